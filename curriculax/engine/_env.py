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


_FNV32_BASIS, _FNV32_PRIME = 0x811C9DC5, 0x01000193
_FNV64_BASIS, _FNV64_PRIME = 0xCBF29CE484222325, 0x100000001B3
_LOW = np.uint64(0xFFFFFFFF)


def _fmix64(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's ``fmix64`` finalizer on ``u64[N]`` (numpy's uint64 arrays wrap mod 2**64)."""
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xFF51AFD7ED558CCD)
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> np.uint64(33))


def content_keys(tasks: Any, *, bits: int = 64) -> np.ndarray:
    """Stable keys from the content of each task: ``u64[N]`` (``bits=64``) or ``u32[N]``.

    The hash covers every leaf of the pool pytree in flattening order, each row's bytes in
    little-endian order with the leaf's dtype and shape, so equal tasks get equal keys on every
    machine and jax version. The low 32 bits of a 64-bit key are FNV-1a-32 over those bytes
    (the whole key before 64-bit keys, and still what ``bits=32`` returns); the high 32 bits
    are the top of ``fmix64(FNV-1a-64)`` over the same bytes. Distinct tasks then collide with
    probability about ``N**2 / 2**65`` (about 3e-6 for a pool of 1e7) instead of ``N**2 / 2**33``,
    and a checkpoint written with 32-bit keys maps onto the low words.

    Args:
      tasks: a pytree of arrays with a leading task axis ``N``.
      bits: 64 (the engine's keys) or 32 (the low word alone: the self-play frontier's keys).

    Returns:
      ``u64[N]`` or ``u32[N]`` keys.
    """
    if bits not in (32, 64):
        raise ValueError(f"bits must be 32 or 64, got {bits!r}")
    leaves = jax.tree.leaves(tasks)
    if not leaves:
        raise ValueError("a task pool must have at least one array leaf")
    n = np.shape(leaves[0])[0]
    h32 = np.full((n,), _FNV32_BASIS, np.uint64)
    h64 = np.full((n,), _FNV64_BASIS, np.uint64)
    p32, p64 = np.uint64(_FNV32_PRIME), np.uint64(_FNV64_PRIME)
    with np.errstate(over="ignore"):
        for leaf in leaves:
            arr = np.asarray(leaf)
            arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
            tag = f"{arr.dtype.str}{arr.shape[1:]}".encode()
            rows = np.ascontiguousarray(arr).reshape(n, -1).view(np.uint8).reshape(n, -1)
            for byte in tag:
                h32 = ((h32 ^ np.uint64(byte)) * p32) & _LOW
                if bits == 64:
                    h64 = (h64 ^ np.uint64(byte)) * p64
            for j in range(rows.shape[1]):  # a loop over bytes per task, vectorized over tasks
                col = rows[:, j].astype(np.uint64)
                h32 = ((h32 ^ col) * p32) & _LOW
                if bits == 64:
                    h64 = (h64 ^ col) * p64
        if bits == 32:
            return h32.astype(np.uint32)
        return (_fmix64(h64) & ~_LOW) | h32


def key_words(keys: np.ndarray) -> np.ndarray:
    """``u64[N]`` keys as ``u32[N, 2]`` (high word, low word): JAX runs without 64-bit ints."""
    keys = np.asarray(keys, np.uint64)
    return np.stack([keys >> np.uint64(32), keys & _LOW], axis=-1).astype(np.uint32)


def key_ints(words: np.ndarray) -> np.ndarray:
    """``u32[..., 2]`` (high, low) words back to ``u64[...]`` keys (host side)."""
    words = np.asarray(words).astype(np.uint64)
    return (words[..., 0] << np.uint64(32)) | words[..., 1]


def _as_keys(keys: Any, n: int, where: str) -> np.ndarray:
    """User-given keys (any non-negative integers below 2**64) as ``u64[N]``."""
    keys = np.asarray(keys)
    if keys.shape != (n,):
        raise ValueError(f"{where}: keys must be integers of shape (N={n},), got {keys.shape}")
    if not np.issubdtype(keys.dtype, np.integer):
        raise TypeError(f"{where}: keys must be integers, got {keys.dtype}")
    if np.issubdtype(keys.dtype, np.signedinteger) and n and keys.min() < 0:
        raise ValueError(f"{where}: keys must be >= 0, got {int(keys.min())}")
    return keys.astype(np.uint64)


def _keys_from_data(tasks: Any) -> np.ndarray | None:
    """A pool's own ``key`` field (a NamedTuple attribute or a dict entry), if it has one."""
    keys = tasks.get("key") if isinstance(tasks, dict) else getattr(tasks, "key", None)
    if keys is None or callable(keys):
        return None
    return np.asarray(keys)


def task_keys(tasks: Any) -> np.ndarray:
    """``u32[N]`` the keys self-play tells tasks apart by: the pool's own ``key`` field (low 32
    bits), else :func:`content_keys` with ``bits=32``. A generated task is keyed so too, so a
    copy of a held-out task is recognised whatever keys the seed pool was given."""
    own = _keys_from_data(tasks)
    return content_keys(tasks, bits=32) if own is None else np.asarray(own).astype(np.uint32)


@dataclasses.dataclass(frozen=True)
class Env:
    """One training source.

    Attributes:
      name: env name (metrics are namespaced ``curriculum/<name>/...``).
      tasks: the task pool, any pytree of arrays with a leading task axis ``N``.
      curriculum: a :class:`~curriculax.Curriculum` built for ``N`` tasks; default: the
        epoch-shuffled :func:`~curriculax.samplers.sequential` sampler with no gates.
      group_size: rollouts per task (``K``).
      weight: mixing weight (relative share of generation batches; 0: never sampled); a
        numpy scalar is stored as the Python number.
      keys: stable task keys, unique within the pool, held as ``u64[N]`` (given keys: any
        non-negative integers below 2**64, kept as they are); default: the pool's own ``key``
        field when it has one (a NamedTuple attribute or dict entry), else a 64-bit content
        hash of each task (see :func:`content_keys`). Per-task curriculum state is
        checkpointed with these keys; on the device they travel as ``u32[N, 2]`` words.
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
        if isinstance(w, np.integer | np.floating):  # a numpy scalar as the Python number
            w = w.item()
            object.__setattr__(self, "weight", w)
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
        where = f"env {self.name!r}"
        keys = content_keys(self.tasks) if keys is None else _as_keys(keys, n, where)
        check_unique_keys(keys, where)
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
