"""What the sampler wrappers (``floor``, ``skip_zero_variance``, ``reward_consistency``)
share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import _entries, _random, _shard, _topk
from curriculax._types import TaskDraw, TaskSampler


def check_inner(inner: object, wrapper: str, num_tasks: int) -> TaskSampler:
    """``inner`` if it is a TaskSampler built for the same pool, else an error naming the
    wrapper (an inner sampler that does not declare its pool size is trusted)."""
    if not isinstance(inner, TaskSampler):
        raise TypeError(
            f"{wrapper}: inner must be a TaskSampler (or, in a config, a table with a 'type'), "
            f"got {type(inner).__name__}"
        )
    if inner.num_tasks is not None and inner.num_tasks != num_tasks:
        raise ValueError(
            f"{wrapper}: inner sampler is built for num_tasks={inner.num_tasks}, the wrapper "
            f"for {num_tasks}; build both for the same pool"
        )
    return inner


def entry_task_with_inner(
    entry_task: Sequence[int] | np.ndarray | None, inner: TaskSampler, n: int, where: str
) -> Sequence[int] | np.ndarray | None:
    """The copies a wrapper's per-task state follows: its own ``entry_task``, else its inner
    sampler's (``TaskSampler.entry_task``, each entry's first entry; None: each entry its own).

    Raises:
      ValueError: both are given and group the entries differently (the labels may differ).
    """
    if entry_task is None or inner.entry_task is None:
        return inner.entry_task if entry_task is None else entry_task
    own = _entries.entries(entry_task, n, where).rep
    theirs = _entries.entries(inner.entry_task, n, f"{where} (inner sampler)").rep
    if not np.array_equal(own, theirs):
        at = int(np.flatnonzero(own != theirs)[0])
        raise ValueError(
            f"{where}: entry_task groups the pool's entries otherwise than the inner "
            f"sampler's entry_task (entry {at} is a copy of entry {own[at]} here, of entry "
            f"{theirs[at]} there); give both the same map, or give it to the inner sampler alone"
        )
    return entry_task


def ids_of(drawn: object, wrapper: str) -> jax.Array:
    """The ``i32[num]`` ids an inner sampler drew; a sampler that hands out payloads
    (:class:`~curriculax.TaskDraw`) cannot be wrapped (its payloads cannot be replaced by
    pool tasks)."""
    if isinstance(drawn, TaskDraw):
        raise TypeError(
            f"{wrapper} wraps samplers that return pool task ids; the inner sampler returned "
            "a TaskDraw with payloads"
        )
    return drawn


def inner_metrics(inner: TaskSampler, state: object) -> dict[str, jax.Array]:
    """The inner sampler's metrics under ``inner/``."""
    return {f"inner/{k}": v for k, v in inner.metrics(state).items()}


def find_states(node: Any, cls: type | tuple[type, ...]) -> list:
    """Every ``cls`` instance inside ``node`` (a component's state, or a curriculum's or an
    engine's: dicts, lists and tuples are searched; an instance is not searched inside)."""
    if isinstance(node, cls):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in find_states(v, cls)]
    if isinstance(node, list | tuple):
        return [s for v in node for s in find_states(v, cls)]
    return []


def replace_draws(
    candidates: jax.Array,
    keep: jax.Array,
    eligible: jax.Array,
    key: jax.Array,
    salt: int,
    start: jax.Array,
    axis: str | None,
) -> tuple[jax.Array, jax.Array]:
    """Replaces the draws a wrapper does not keep by a uniform subset of the eligible tasks.

    Args:
      candidates: ``i32[num]`` the inner sampler's draws.
      keep: ``bool[num]`` the draws to keep.
      eligible: ``bool[N_local]`` tasks that may replace a draw (this device's slice).
      key: PRNG key of the uniform choice; ``salt``: its stream.
      start: first global id of this device's slice; ``axis``: the bound mesh axis or None.

    Returns:
      ``(ids: i32[num], replaced: bool[num])``: the ``r``-th dropped draw takes the ``r``-th
      replacement (eligible, not a kept draw) while there are any; the others stay as drawn.
      Cost: one O(N) pass and a ``top_k`` of ``num``.
    """
    num = candidates.shape[0]
    n_local = eligible.shape[0]
    local_ids = start + jnp.arange(n_local, dtype=jnp.int32)
    word = _random.bits(jax.random.bits(key, (), jnp.uint32), local_ids, salt)
    keys = jnp.where(eligible, 1.0 + (word >> 8).astype(jnp.float32) * jnp.float32(2.0**-24), 0.0)
    keys = keys.at[_shard.to_local(jnp.where(keep, candidates, -1), start, n_local)].set(
        0.0, mode="drop"
    )
    best_keys, best_ids = _topk.top_k(keys, num, start, axis)
    available = jnp.sum(best_keys > 0, dtype=jnp.int32)
    rank = jnp.cumsum(~keep, dtype=jnp.int32) - 1
    replaced = ~keep & (rank < available)
    ids = jnp.where(replaced, best_ids[jnp.clip(rank, 0, best_ids.shape[0] - 1)], candidates)
    return ids.astype(jnp.int32), replaced
