"""Training pools and held-out sets, disjoint by task key, and per-level reporting."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import _checks
from curriculax.tasks._family import TaskFamily
from curriculax.tasks._generate import generate
from curriculax.tasks._keys import held_out_mask
from curriculax.tasks._taskset import TaskSet

Array = jax.Array


def _select(tasks: TaskSet, idx: np.ndarray) -> TaskSet:
    """Host-side row selection of a task set held in numpy arrays; returns device arrays."""
    return jax.tree.map(lambda x: jnp.asarray(np.asarray(x)[idx]), tasks)


def _num_candidates(num_train: int, num_held: int, held_out_frac: float) -> int:
    """Tasks to draw per level so both sides of the split fill up, but for a 6-sigma shortfall.

    The held-out side of ``c`` candidates is Binomial(c, held_out_frac); this returns the
    smallest ``c`` (doubling, then bisecting) whose mean minus 6 standard deviations covers
    ``num_held`` and whose training side likewise covers ``num_train``.
    """

    def enough(c: int) -> bool:
        sd = 6.0 * math.sqrt(c * held_out_frac * (1.0 - held_out_frac))
        return c * held_out_frac - sd >= num_held and c * (1.0 - held_out_frac) - sd >= num_train

    high = max(num_train + num_held, 16)
    while not enough(high):
        high *= 2
    low = high // 2
    while low + 1 < high:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high


def check_unique_keys(tasks: TaskSet) -> None:
    """Raises ``ValueError`` if two tasks share a key (host-side check).

    Raises:
      ValueError: naming the duplicated keys and how many there are.
    """
    _checks.check_unique_keys(
        tasks.key, "the pool", "Draw the pool from another key or with fewer tasks."
    )


def split_by_key(tasks: TaskSet, held_out_frac: float) -> tuple[TaskSet, TaskSet]:
    """Splits tasks into ``(train, held_out)`` by a stable hash of each task's key.

    Host-side (the two sizes depend on the data). A task's side depends on its key alone (see
    :func:`~curriculax.tasks.held_out_mask`), so held-out tasks never reach any training pool
    split with the same ``held_out_frac``. The order of tasks is kept on each side.

    Args:
      tasks: any task set.
      held_out_frac: expected share of tasks held out, in (0, 1).

    Returns:
      ``(train, held_out)``.
    """
    held = np.asarray(held_out_mask(tasks.key, held_out_frac))
    tasks = jax.device_get(tasks)
    return _select(tasks, np.flatnonzero(~held)), _select(tasks, np.flatnonzero(held))


def make_pools(
    key: Array,
    spec: TaskFamily,
    *,
    train_per_level: int,
    held_out_per_level: int,
    held_out_frac: float = 0.2,
) -> tuple[TaskSet, TaskSet]:
    """Builds a training pool and a level-stratified held-out set for one family.

    Draws enough distinct tasks per level (so that a shortfall on either side is a 6-sigma
    event), splits them with :func:`split_by_key`, and keeps the first ``train_per_level``
    training-side and ``held_out_per_level`` held-out-side tasks of each level. Levels whose
    task space is too small for that (e.g. the 8 reversals of length 1) keep every task they
    have on each side, so their counts are smaller, and a tiny level can have no held-out task
    at all (report per level with :func:`per_level_mean`, which gives NaN there).

    Host-side (sizes depend on the split). Guarantees, checked before returning: keys are unique
    across both sets, and no held-out key is in the training pool; more strongly, no held-out
    task is in any training pool built with the same ``held_out_frac``, whatever the seed.

    Args:
      key: PRNG key.
      spec: a task family spec.
      train_per_level: training tasks per level (fewer where the level's space is too small).
      held_out_per_level: held-out tasks per level (fewer where the space is too small).
      held_out_frac: share of each level's task space reserved for evaluation, in (0, 1).

    Returns:
      ``(train, held_out)`` task sets in level order.

    Example:
      >>> from curriculax.tasks import ReversalSpec
      >>> train, held_out = make_pools(jax.random.key(0), ReversalSpec(num_levels=3),
      ...                              train_per_level=4, held_out_per_level=2)
      >>> train.level.tolist(), held_out.level.tolist()  # level 0 holds only 8 tasks
      ([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2], [0, 1, 1, 2, 2])
    """
    # Named here: a float would fail later as an unnamed slice error, after the draw.
    train_per_level = _checks.int_at_least(train_per_level, "train_per_level")
    held_out_per_level = _checks.int_at_least(held_out_per_level, "held_out_per_level")
    held_out_mask(jnp.zeros((), jnp.uint32), held_out_frac)  # validates held_out_frac
    num_candidates = _num_candidates(train_per_level, held_out_per_level, held_out_frac)
    pool = jax.device_get(generate(key, spec, num_candidates))
    check_unique_keys(pool)
    held = np.asarray(held_out_mask(pool.key, held_out_frac))
    levels = np.asarray(pool.level)
    train_idx, held_idx = [], []
    for level in range(spec.num_levels):
        in_level = levels == level
        train_idx.append(np.flatnonzero(in_level & ~held)[:train_per_level])
        held_idx.append(np.flatnonzero(in_level & held)[:held_out_per_level])
    train = _select(pool, np.concatenate(train_idx))
    held_out = _select(pool, np.concatenate(held_idx))
    if np.intersect1d(np.asarray(train.key), np.asarray(held_out.key)).size:
        raise AssertionError("make_pools produced overlapping train and held-out keys.")
    return train, held_out


def per_level_mean(values: Array, level: Array, num_levels: int) -> Array:
    """Mean of ``values`` per difficulty level; jit-able.

    Args:
      values: ``f32[M]`` e.g. per-task exact match from ``Solver.evaluate``.
      level: ``i32[M]`` level of each task.
      num_levels: ``L`` (static).

    Returns:
      ``f32[L]``, NaN for a level without tasks.
    """
    values = jnp.asarray(values, jnp.float32)
    total = jax.ops.segment_sum(values, level, num_segments=num_levels)
    count = jax.ops.segment_sum(jnp.ones_like(values), level, num_segments=num_levels)
    return jnp.where(count > 0, total / jnp.maximum(count, 1.0), jnp.nan)
