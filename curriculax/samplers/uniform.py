"""Uniform sampling: the baseline a curriculum has to beat."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from curriculax import _permute
from curriculax._checks import check_num, check_num_tasks
from curriculax._types import EmptyState, GroupResults, TaskSampler


def uniform(num_tasks: int) -> TaskSampler:
    """Draws tasks uniformly at random, ignoring every result.

    One ``sample(num)`` call returns ``num`` distinct tasks (a keyed random permutation of the
    pool, evaluated at ``num`` positions: O(num)); when ``num > N`` every task appears
    ``num // N`` or ``num // N + 1`` times. Calls are independent (tasks repeat across calls).

    Args:
      num_tasks: pool size ``N``.

    Returns:
      A stateless :class:`~curriculax.TaskSampler` (its state is ``EmptyState()``; no
      metrics).

    Example:
      >>> s = uniform(100)
      >>> ids, _ = s.sample(s.init(jax.random.key(0)), jax.random.key(1), 8)
    """
    n = check_num_tasks(num_tasks)

    def init(key: jax.Array) -> EmptyState:
        del key
        return EmptyState()

    def sample(state: EmptyState, key: jax.Array, num: int):
        num = check_num(num)
        pos = jnp.arange(num, dtype=jnp.int32) % n
        return _permute.permute(pos, n, _permute.round_keys(_permute.key_bits(key))), state

    def observe(state: EmptyState, results: GroupResults) -> EmptyState:
        del results
        return state

    def metrics(state: EmptyState) -> dict[str, jax.Array]:
        del state
        return {}

    return TaskSampler(init, sample, observe, metrics, num_tasks=n)
