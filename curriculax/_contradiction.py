"""Groups whose reward contradicts itself (one answer, two rewards), and per-task marks of them.

Shared by the :func:`curriculax.samplers.reward_consistency` sampler (which stops drawing a
marked task) and the :func:`curriculax.gates.reward_consistency` gate (which stops training on
it).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import _entries, _shard
from curriculax._types import GroupResults


def contradicting_groups(results: GroupResults) -> jax.Array:
    """``bool[G]``: groups holding two valid rollouts with equal answers and different
    rewards (compared exactly, not by a tolerance). A verifier that is a function of the
    answer cannot produce one, so each is proof that the task's reward ignores the answer (a
    verifier that accepts at random, a coin flip), not a statistical guess. Two distinct
    rollouts, both with finite rewards (a NaN differs even from itself). Cost O(G K^2).

    Args:
      results: groups with ``answers`` (``i32[G, K]``).

    Raises:
      ValueError: ``results.answers`` is None.
    """
    if results.answers is None:
        raise ValueError(
            "reward_consistency needs each rollout's answer id (GroupResults.answers, "
            "i32[G, K]: equal ids for equal answers); this env reports none. The GRPO solver "
            "reports them; a custom rollout sets Rollouts.answers, and the host driver takes "
            "observe(..., answers=...)"
        )
    answers = jnp.asarray(results.answers, jnp.int32)
    valid = jnp.asarray(results.valid, bool)
    rewards = jnp.asarray(results.rewards, jnp.float32)
    ok = valid & jnp.isfinite(rewards)
    k = rewards.shape[1]
    pair = ok[:, :, None] & ok[:, None, :] & ~jnp.eye(k, dtype=bool)
    same = answers[:, :, None] == answers[:, None, :]
    differ = rewards[:, :, None] != rewards[:, None, :]
    return jnp.any(pair & same & differ, axis=(1, 2))


def marked(flags: jax.Array, ids: jax.Array, axis: str | None) -> jax.Array:
    """``bool[M]``: ``flags`` (this device's ``bool[N_local]`` slice of ``bool[N]``) at global
    ``ids`` (``i32[M]``); an id out of range reads False. Under ``shard_map`` each id is held
    by one device: the reads are summed over ``axis``."""
    start = _shard.offset(axis, flags.shape[0])
    here = flags.at[_shard.to_local(ids, start, flags.shape[0])].get(mode="fill", fill_value=False)
    return _shard.psum(here.astype(jnp.int32), axis) > 0


def task_of(entry_task, n: int, where: str) -> np.ndarray | None:
    """``i32[N]`` each entry's task representative (its first entry) for a pool that repeats
    tasks, else None (every entry its own task)."""
    if entry_task is None:
        return None
    ent = _entries.entries(entry_task, n, where)
    return None if ent.is_rep.all() else ent.rep


def mark(
    flags: jax.Array, results: GroupResults, axis: str | None, rep: np.ndarray | None = None
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Marks the tasks of this batch's contradicting groups.

    Args:
      flags: ``bool[N_local]`` this device's slice of the per-entry marks.
      results: the batch (with ``answers``).
      axis: the mesh axis the marks are split along, or None.
      rep: :func:`task_of`'s ``i32[N]``, or None: a proof then marks every copy of its task
        (each of this device's entries whose task is among the batch's proven ones: a sort of
        the ``G`` proven tasks and a search per entry, O(N_local log G), no communication).

    Returns:
      ``(bad, flags, rows)``: ``bool[G]`` the groups that contradict themselves, the updated
      ``bool[N_local]`` marks, and ``bool[G]`` the groups whose task is marked after this
      batch (a group of a task another group of the batch proved noisy included).
    """
    bad = contradicting_groups(results)
    n_local = flags.shape[0]
    start = _shard.offset(axis, n_local)
    ids = jnp.asarray(results.task_ids, jnp.int32)
    if rep is None:
        flags = flags.at[_shard.to_local(jnp.where(bad, ids, -1), start, n_local)].set(
            True, mode="drop"
        )
    elif ids.shape[0]:
        n = rep.shape[0]
        table = jnp.asarray(rep)
        proven = jnp.where(bad & (ids >= 0) & (ids < n), table[jnp.clip(ids, 0, n - 1)], -1)
        proven = jnp.sort(proven)
        mine = jax.lax.dynamic_slice_in_dim(table, start, n_local)
        at = jnp.clip(jnp.searchsorted(proven, mine), 0, proven.shape[0] - 1)
        flags = flags | (proven[at] == mine)
    return bad, flags, marked(flags, ids, axis)
