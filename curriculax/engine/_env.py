"""Training sources: a task pool, its curriculum, its group size and its mixing weight."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from curriculax._checks import check_unique_keys, int_at_least
from curriculax._types import Curriculum, TaskDraw

_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


def content_keys(tasks: Any) -> np.ndarray:
    """Stable ``u32[N]`` keys from the content of each task (FNV-1a over the row bytes).

    The hash covers every leaf of the pool pytree in flattening order, each row's bytes in
    little-endian order with the leaf's dtype and shape, so equal tasks get equal keys on every
    machine and jax version.
    """
    leaves = jax.tree.leaves(tasks)
    if not leaves:
        raise ValueError("a task pool must have at least one array leaf")
    n = np.shape(leaves[0])[0]
    h = np.full((n,), 0x811C9DC5, np.uint64)
    prime = np.uint64(0x01000193)
    mask = np.uint64(0xFFFFFFFF)
    for leaf in leaves:
        arr = np.asarray(leaf)
        arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        tag = f"{arr.dtype.str}{arr.shape[1:]}".encode()
        rows = np.ascontiguousarray(arr).reshape(n, -1).view(np.uint8).reshape(n, -1)
        for byte in tag:
            h = ((h ^ np.uint64(byte)) * prime) & mask
        for j in range(rows.shape[1]):  # a loop over bytes per task, vectorized over tasks
            h = ((h ^ rows[:, j].astype(np.uint64)) * prime) & mask
    return h.astype(np.uint32)


def _keys_from_data(tasks: Any) -> np.ndarray | None:
    """A pool's own ``key`` field (a NamedTuple attribute or a dict entry), if it has one."""
    keys = tasks.get("key") if isinstance(tasks, dict) else getattr(tasks, "key", None)
    if keys is None or callable(keys):
        return None
    return np.asarray(keys)


@dataclasses.dataclass(frozen=True)
class Env:
    """One training source.

    Attributes:
      name: env name (metrics are namespaced ``curriculum/<name>/...``).
      tasks: the task pool, any pytree of arrays with a leading task axis ``N``.
      curriculum: a :class:`~curriculax.Curriculum` built for ``N`` tasks; default: the
        epoch-shuffled :func:`~curriculax.samplers.sequential` sampler with no gates.
      group_size: rollouts per task (``K``).
      weight: mixing weight (relative share of generation batches; 0: never sampled).
      keys: stable ``u32[N]`` task keys; default: the pool's own ``key`` field when it has
        one (a NamedTuple attribute or dict entry), else a content hash of each task (see
        :func:`content_keys`). Per-task curriculum state is checkpointed with these keys.
      rollout: optional ``(solver_state, tasks, key, group_size) -> Rollouts`` used instead of
        the solver's own ``rollout`` for this env (e.g. a different verifier).
      shard_tasks: with an engine mesh, split this env's per-task curriculum state along the
        mesh axis (for pools too large to replicate). The sampler must be built with
        ``axis_name`` equal to the engine's axis, e.g.
        ``difficulty_pools(N, axis_name="data")``; ``N`` must divide evenly.
    """

    name: str
    tasks: Any
    curriculum: Curriculum | None = None
    group_size: int = 8
    weight: float = 1.0
    keys: Any = None
    rollout: Any = None
    shard_tasks: bool = False

    def __post_init__(self):
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(
                f"env name must be letters, digits, '_', '-' or '.', got {self.name!r}"
            )
        leaves = jax.tree.leaves(self.tasks)
        if not leaves:
            raise ValueError(f"env {self.name!r}: the task pool has no array leaves")
        sizes = {np.shape(x)[0] if np.ndim(x) else None for x in leaves}
        if len(sizes) != 1 or None in sizes:
            raise ValueError(
                f"env {self.name!r}: every pool leaf needs the same leading task axis, "
                f"got leading sizes {sorted(map(str, sizes))}"
            )
        n = sizes.pop()
        if n < 1:
            raise ValueError(f"env {self.name!r}: the task pool is empty")
        k = int_at_least(self.group_size, f"env {self.name!r}: group_size")
        w = self.weight
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w):
            raise ValueError(f"env {self.name!r}: weight must be a finite number, got {w!r}")
        if w < 0:
            raise ValueError(f"env {self.name!r}: weight must be >= 0, got {w}")
        if self.curriculum is None:
            from curriculax._curriculum import curriculum
            from curriculax.samplers import sequential

            object.__setattr__(self, "curriculum", curriculum(sequential(n)))
        elif not isinstance(self.curriculum, Curriculum):
            raise TypeError(
                f"env {self.name!r}: curriculum must be a curriculax.Curriculum "
                f"(build one with cx.curriculum(sampler, gates)), got "
                f"{type(self.curriculum).__name__}"
            )
        sampler_n = self.curriculum.sampler.num_tasks
        if sampler_n is not None and sampler_n != n and not _draws_payloads(self.curriculum):
            # Ids past the pool would be clamped onto its last task; ids it never draws would
            # strand part of the pool. (A sampler that draws payloads, like the self-play
            # frontier, numbers tasks past the pool on purpose.)
            raise ValueError(
                f"env {self.name!r}: the curriculum's sampler was built for {sampler_n} tasks, "
                f"the pool has {n}; build it with num_tasks={n}"
            )
        keys = self.keys
        if keys is None:
            keys = _keys_from_data(self.tasks)
        keys = content_keys(self.tasks) if keys is None else np.asarray(keys)
        if keys.shape != (n,):
            raise ValueError(f"env {self.name!r}: keys must be u32[N={n}], got shape {keys.shape}")
        if not np.issubdtype(keys.dtype, np.integer):
            raise TypeError(f"env {self.name!r}: keys must be integers, got {keys.dtype}")
        keys = keys.astype(np.uint32)
        check_unique_keys(keys, f"env {self.name!r}")
        object.__setattr__(self, "keys", keys)
        object.__setattr__(self, "group_size", k)
        object.__setattr__(self, "tasks", jax.tree.map(jnp.asarray, self.tasks))

    @property
    def num_tasks(self) -> int:
        """Pool size ``N``."""
        return int(self.keys.shape[0])


def _draws_payloads(cur: Curriculum) -> bool:
    """Whether ``cur.sample`` returns a :class:`TaskDraw` (task payloads beside pool ids)."""
    key = jax.random.key(0)
    drawn = jax.eval_shape(lambda k: cur.sample(cur.init(k), k, 1)[0], key)
    return isinstance(drawn, TaskDraw)
