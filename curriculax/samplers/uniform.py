"""Uniform sampling: the baseline a curriculum has to beat."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import _entries, _permute
from curriculax._checks import check_num, check_num_tasks
from curriculax._types import EmptyState, GroupResults, TaskSampler


def uniform(
    num_tasks: int,
    *,
    distinct: bool = False,
    entry_task: Sequence[int] | np.ndarray | None = None,
) -> TaskSampler:
    """Draws tasks uniformly at random, ignoring every result.

    One ``sample(num)`` call returns ``num`` distinct tasks (a keyed random permutation of the
    pool, evaluated at ``num`` positions: O(num)); when ``num > N`` (``D`` with ``distinct``)
    every task appears ``num // N`` or ``num // N + 1`` times. Calls are independent (tasks
    repeat across calls).

    By default every pool *entry* has the same chance, so a task the pool holds 40 times is
    drawn 40 times as often as a task it holds once (a shuffled data loader). With
    ``distinct=True`` every distinct *task* has the same chance, however many copies the pool
    holds (the pool deduplicated): the permutation runs over the ``D`` tasks' first entries,
    and those ids are returned. Without copies (``entry_task`` all distinct) the draws equal
    the default's for the same key.

    Args:
      num_tasks: pool size ``N``.
      distinct: draw distinct tasks, not entries, uniformly (needs ``entry_task``).
      entry_task: ``int[N]``, entries with equal values hold the same task (e.g.
        :func:`curriculax.tasks.distinct_tasks`); read only with ``distinct=True`` (a config
        passes it to every factory that takes it).

    Returns:
      A stateless :class:`~curriculax.TaskSampler` (its state is ``EmptyState()``; no
      metrics). With ``distinct=True`` it carries the pool's ``entry_task`` (first entries).

    Raises:
      ValueError: ``distinct=True`` without ``entry_task``, or ``entry_task`` of the wrong
        shape or type.

    Example:
      >>> s = uniform(100)
      >>> ids, _ = s.sample(s.init(jax.random.key(0)), jax.random.key(1), 8)
      >>> d = uniform(4, distinct=True, entry_task=[7, 7, 7, 9])  # two tasks, 1/2 each
    """
    n = check_num_tasks(num_tasks)
    if not isinstance(distinct, bool):
        raise TypeError(f"uniform: distinct must be a bool, got {distinct!r}")
    if distinct and entry_task is None:
        raise ValueError(
            "uniform: distinct=True needs entry_task (int[N], entries with equal values hold "
            "the same task, e.g. curriculax.tasks.distinct_tasks(pool)); without it every "
            "entry counts as its own task"
        )
    ent = _entries.entries(entry_task if distinct else None, n, "uniform")
    firsts = np.flatnonzero(ent.is_rep).astype(np.int32)  # i32[D], D = ent.num_distinct
    d = int(firsts.size)

    def init(key: jax.Array) -> EmptyState:
        del key
        return EmptyState()

    def sample(state: EmptyState, key: jax.Array, num: int):
        num = check_num(num)
        pos = jnp.arange(num, dtype=jnp.int32) % d
        ids = _permute.permute(pos, d, _permute.round_keys(_permute.key_bits(key)))
        return (ids if d == n else jnp.asarray(firsts)[ids]), state

    def observe(state: EmptyState, results: GroupResults) -> EmptyState:
        del results
        return state

    def metrics(state: EmptyState) -> dict[str, jax.Array]:
        del state
        return {}

    return TaskSampler(
        init, sample, observe, metrics, num_tasks=n, entry_task=ent.rep if distinct else None
    )
