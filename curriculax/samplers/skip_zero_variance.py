"""Pre-rollout skipping of tasks predicted to give a zero-variance group (GRESO-style)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from curriculax import _counters, _shard
from curriculax._checks import check_num, check_num_tasks
from curriculax._types import GroupResults, TaskSampler
from curriculax.samplers import _wrapping

_SALT_PICK = 7


class SkipState(NamedTuple):
    """State of :func:`skip_zero_variance`.

    Attributes:
      inner: the wrapped sampler's state.
      streak: ``i32[N]`` consecutive zero-variance groups of each task (its latest groups).
      p: ``f32[]`` base keep probability (a task with streak ``k`` is kept with
        probability ``max(p ** k, floor)``), steered toward the target zero-variance share.
      zero_variance_share: ``f32[]`` share of zero-variance groups in the latest batch.
      skipped: ``i32[]`` inner draws skipped before rollout so far.
      group_size: ``i32[]`` rollouts per group in the latest observed batch.
    """

    inner: Any
    streak: jax.Array
    p: jax.Array
    zero_variance_share: jax.Array
    skipped: jax.Array
    group_size: jax.Array

    # Fields indexed by task: a checkpoint restored onto a reordered pool permutes these.
    PER_TASK = ("streak",)


def _unit_interval(value: object, name: str, *, open_low: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, got {value!r}")
    ok = (0.0 < value <= 1.0) if open_low else (0.0 <= value <= 1.0)
    if not ok:
        raise ValueError(f"{name} must lie in {'(0, 1]' if open_low else '[0, 1]'}, got {value}")
    return float(value)


def skip_zero_variance(
    num_tasks: int,
    inner: TaskSampler,
    *,
    target_share: float = 0.25,
    floor: float = 0.01,
    initial_p: float = 0.5,
    p_step: float = 0.05,
    axis_name: str | None = None,
) -> TaskSampler:
    """Skips, before rollout, draws of tasks whose recent groups all had zero variance.

    GRESO (arXiv 2506.02177): a task whose last ``k`` groups were all zero-variance (every
    valid rollout got the same reward: nothing for GRPO to learn) is skipped with probability
    ``1 - max(p ** k, floor)``. ``p`` is steered after each batch by ``p_step * (target_share
    - share)``, where ``share`` is the batch's share of zero-variance groups: down (skip
    more) while there are too many, up otherwise, settling where the mean share equals the
    target (GRESO moves ``p`` by a fixed step by the sign, which settles where the median
    does: far off for small batches). GRESO aims for ~25%, not 0%, since some zero-variance
    groups are the price of noticing that a task changed. ``floor`` keeps every task's chance
    of being rolled out when drawn above zero, so no task is skipped forever, and a
    rolled-out task with variance resets its streak.

    Each ``sample(num)`` asks the inner sampler for ``num`` tasks, decides per draw whether to
    skip it, and replaces each skipped draw by a task drawn uniformly among those not
    predicted to be zero-variance (streak 0, not already in the call); if there are too few
    of those, skipped draws are rolled out after all (and not counted as skipped). The inner
    sampler's accounting stays exact: every task it handed out was either rolled out or
    deliberately skipped, never silently dropped.

    Why a wrapper and not part of :func:`learnability`: GRESO's setting is a data stream
    (``sequential``, ``uniform``) that knows nothing about tasks, where skipping is the whole
    curriculum; ``learnability`` already ranks a task with 0/8 or 8/8 successes low, so
    skipping adds little there. As a wrapper it serves any sampler that returns pool ids.

    The saving is counted as ``skipped``: inner draws not rolled out because they were
    predicted zero-variance, each one group (``K`` rollouts) that went to another task
    instead; ``skipped_rollouts`` multiplies by the group size of the latest observed batch.

    Cost: the inner sampler's plus one O(N) pass and a ``top_k`` of ``num`` (the
    replacements); ``observe`` O(G K).

    Args:
      num_tasks: pool size ``N``.
      inner: the wrapped :class:`~curriculax.TaskSampler` (built for the same pool); in a
        config, a table: ``{"type": "skip_zero_variance", "inner": {"type": "uniform"}}``.
      target_share: the share of zero-variance groups ``p`` is steered toward, in [0, 1].
      floor: the least keep probability of a drawn task, in (0, 1].
      initial_p: ``p`` at the start, in [0, 1].
      p_step: gain of the steering of ``p`` per observed batch, in [0, 1].
      axis_name: the mesh axis along which per-task state is split under ``shard_map`` (the
        inner sampler must be built with the same one).

    Returns:
      A :class:`~curriculax.TaskSampler`. Metrics: the inner sampler's under ``inner/``, plus
      ``skipped``, ``skipped_rollouts``, ``p``, ``zero_variance_share`` (latest batch) and
      ``predicted_zero_variance`` (tasks with a streak).

    Example:
      >>> s = skip_zero_variance(100, uniform(100))
      >>> ids, state = s.sample(s.init(jax.random.key(0)), jax.random.key(1), 8)
    """
    n = check_num_tasks(num_tasks)
    inner = _wrapping.check_inner(inner, "skip_zero_variance", n)
    target_share = _unit_interval(target_share, "target_share")
    floor = _unit_interval(floor, "floor", open_low=True)
    initial_p = _unit_interval(initial_p, "initial_p")
    p_step = _unit_interval(p_step, "p_step")

    def init(key: jax.Array) -> SkipState:
        return SkipState(
            inner=inner.init(key),
            streak=jnp.zeros((n,), jnp.int32),
            p=jnp.asarray(initial_p, jnp.float32),
            zero_variance_share=jnp.zeros((), jnp.float32),
            skipped=_counters.zero(),
            group_size=_counters.zero(),
        )

    def sample(state: SkipState, key: jax.Array, num: int):
        num = check_num(num)
        if num == 0:
            return jnp.zeros((0,), jnp.int32), state
        axis = _shard.bound(axis_name)
        n_local = state.streak.shape[0]
        start = _shard.offset(axis, n_local)
        k_inner, k_skip, k_pick = jax.random.split(key, 3)
        drawn, inner_state = inner.sample(state.inner, k_inner, num)
        candidates = _wrapping.ids_of(drawn, "skip_zero_variance").astype(jnp.int32)

        # The streak of each candidate (held by one device when split: sum the one-hot reads).
        slot = _shard.to_local(candidates, start, n_local)
        streak = _shard.psum(state.streak.at[slot].get(mode="fill", fill_value=0), axis)
        keep_prob = jnp.maximum(state.p ** streak.astype(jnp.float32), floor)
        keep = (streak == 0) | (jax.random.uniform(k_skip, (num,)) < keep_prob)

        # Replacements: tasks with streak 0 not already kept in this call, a uniform subset.
        ids, replaced = _wrapping.replace_draws(
            candidates, keep, state.streak == 0, k_pick, _SALT_PICK, start, axis
        )
        new = state._replace(
            inner=inner_state,
            skipped=_counters.add(state.skipped, jnp.sum(replaced, dtype=jnp.int32)),
        )
        return ids.astype(jnp.int32), new

    def observe(state: SkipState, results: GroupResults) -> SkipState:
        g, k = results.rewards.shape
        if g == 0:
            return state._replace(inner=inner.observe(state.inner, results))
        n_local = state.streak.shape[0]
        axis = _shard.bound(axis_name)
        start = _shard.offset(axis, n_local)
        ids = results.task_ids.astype(jnp.int32)
        valid = results.valid.astype(bool)
        rewards = results.rewards.astype(jnp.float32)
        has = jnp.any(valid, axis=1)
        high = jnp.max(jnp.where(valid, rewards, -jnp.inf), axis=1)
        low = jnp.min(jnp.where(valid, rewards, jnp.inf), axis=1)
        flat = has & (high == low)
        use = has & (ids >= 0) & (ids < n)
        slot = _shard.to_local(jnp.where(use, ids, -1), start, n_local)
        # A task twice in one batch: the streak grows by its zero-variance groups, unless one
        # of them had variance (then it restarts at 0).
        grew = state.streak.at[slot].add(flat.astype(jnp.int32), mode="drop")
        broke = jnp.zeros((n_local,), bool).at[slot].max(~flat, mode="drop")
        observed_groups = jnp.sum(has, dtype=jnp.int32)
        share = jnp.sum(flat, dtype=jnp.int32) / jnp.maximum(observed_groups, 1)
        step = p_step * (target_share - share)
        p = jnp.where(observed_groups > 0, jnp.clip(state.p + step, 0.0, 1.0), state.p)
        return state._replace(
            inner=inner.observe(state.inner, results),
            streak=jnp.where(broke, 0, grew).astype(jnp.int32),
            p=p.astype(jnp.float32),
            zero_variance_share=jnp.where(
                observed_groups > 0, share, state.zero_variance_share
            ).astype(jnp.float32),
            group_size=jnp.asarray(k, jnp.int32),
        )

    def metrics(state: SkipState) -> dict[str, jax.Array]:
        axis = _shard.bound(axis_name)
        predicted = _shard.psum(jnp.sum(state.streak > 0, dtype=jnp.int32), axis)
        out = _wrapping.inner_metrics(inner, state.inner)
        out["skipped"] = state.skipped.astype(jnp.float32)
        out["skipped_rollouts"] = state.skipped.astype(jnp.float32) * state.group_size.astype(
            jnp.float32
        )
        out["p"] = state.p
        out["zero_variance_share"] = state.zero_variance_share
        out["predicted_zero_variance"] = predicted.astype(jnp.float32)
        return out

    return TaskSampler(init, sample, observe, metrics, num_tasks=n, entry_task=inner.entry_task)
