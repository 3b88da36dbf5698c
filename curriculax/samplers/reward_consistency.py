"""Tasks whose reward contradicts itself: one answer, two rewards, so the reward is noise."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import _counters, _progress, _shard
from curriculax._checks import check_num, check_num_tasks, number, unit_interval
from curriculax._contradiction import mark, marked, task_of
from curriculax._types import GroupResults, TaskSampler
from curriculax.gates.reward_consistency import ConsistencyGateState
from curriculax.samplers import _wrapping
from curriculax.samplers.learnability import _count

_SALT_PICK = 11


class RewardConsistencyState(NamedTuple):
    """State of :func:`reward_consistency`.

    Attributes:
      inner: the wrapped sampler's state.
      contradicted: ``bool[N]`` tasks with at least one contradicting group so far.
      groups: ``i32[]`` contradicting groups observed so far.
      skipped: ``i32[]`` inner draws of contradicted tasks replaced before rollout so far.
    """

    inner: Any
    contradicted: jax.Array
    groups: jax.Array
    skipped: jax.Array

    # Fields indexed by task: a checkpoint restored onto a reordered pool permutes these.
    PER_TASK = ("contradicted",)


def contradicted_tasks(state: Any) -> np.ndarray:
    """Host side: the ids (``int64[M]``, ascending) of the tasks whose reward contradicted
    itself, for a user to inspect (a verifier that accepts at random, a reward that ignores
    the answer).

    Args:
      state: the state of the :func:`reward_consistency` sampler or of the gate of that name
        (:func:`curriculax.gates.reward_consistency`), or any state holding them (a
        curriculum's, an engine's): when it holds several, their marks must agree (they do
        when they have seen the same groups).

    Raises:
      ValueError: ``state`` holds no such state, or several that disagree.
    """
    found = _wrapping.find_states(state, (RewardConsistencyState, ConsistencyGateState))
    marks = [np.asarray(s.contradicted) for s in found]
    if not marks or any(not np.array_equal(m, marks[0]) for m in marks[1:]):
        raise ValueError(
            f"contradicted_tasks needs a state holding the marks of a reward_consistency "
            f"sampler or gate, found {len(marks)}"
            + (" that disagree; pass one component's own state" if marks else "")
        )
    return _progress.flagged(marks[0])


def reward_consistency(
    num_tasks: int,
    inner: TaskSampler,
    *,
    keep_share: float = 0.05,
    muted_reward: float = 0.0,
    entry_task: Sequence[int] | np.ndarray | None = None,
    axis_name: str | None = None,
) -> TaskSampler:
    """Mutes tasks whose reward is proven not to depend on the answer; any sampler inside.

    A task whose reward ignores the answer (a verifier that accepts at random, a reference
    that is a coin flip) has the most reward variance of the pool and teaches nothing, so
    every sampler that seeks variance is drawn to it, and telling it from a task being
    learned by its pass rate alone takes many visits (:func:`learning_progress`, docs/noise.md).
    The rollouts' answers tell it at once: a deterministic verifier gives equal answers equal
    rewards, so a group with two rollouts of one answer and different rewards
    (:func:`contradicting_groups`) is proof. From its first contradicting group on, a task is
    marked ``contradicted``: each of its groups reaches ``inner`` as a group of failures
    (every reward ``muted_reward``, no advantage: to the inner sampler a task with no signal;
    the default 0 is a failure for rewards in [0, 1]), and each inner
    draw of it is rolled out only with probability ``keep_share`` and otherwise replaced
    before rollout by a task drawn uniformly among the unmarked ones not already in the call
    (as :func:`skip_zero_variance` replaces its skips). ``keep_share > 0`` is the floor: a
    marked task is still drawn now and then, never dropped for good.

    A sampler chooses what is rolled out, not what trains: the group that proves a task noisy
    and the floor's draws of it still reach the update. Add the gate of the same name
    (:func:`curriculax.gates.reward_consistency`), which rejects every group of a marked task.
    With uniform inside, the two together reached the target faster than the sampler alone on
    the studies' 50% coin-flip pool, from scratch and from the base (paired intervals above 1;
    elsewhere within noise: docs/noise.md).

    Its limits: it needs the answers (``GroupResults.answers``: the GRPO solver reports a hash
    of each completion; the host driver takes ``answers=``), it cannot see noise in a group
    whose answers are all different (a policy that spreads its answers thin: early in training
    from scratch, or long free-form completions; hash the *extracted* answer the verifier
    reads, not the whole text), and it cannot see a reward that is a deterministic function of
    the answer but of the wrong one (a wrong reference: that task reads as one the policy
    fails, so it draws no variance anyway). A contradicted task stays marked for the run.
    Where the pool holds copies of a task (``entry_task``, its own or, without it, the inner
    sampler's), a proof marks every copy (each copy's entry is marked: marks stay per entry,
    and ``contradicted_tasks`` lists them all), so no copy of a noisy task is drawn as a
    replacement or reaches ``inner`` unmuted, as the gate of that name given the same map
    rejects every copy.

    Cost: the inner sampler's, plus one O(N) pass and a ``top_k`` of ``num`` per ``sample``
    (the replacements) and O(G K^2) per ``observe`` (plus O(N log G) with copies). It wraps
    samplers that return pool ids.

    Args:
      num_tasks: pool size ``N``.
      inner: the wrapped :class:`~curriculax.TaskSampler` (built for the same pool); in a
        config, a table: ``{"type": "reward_consistency", "inner": {"type": ...}}``.
      keep_share: probability that an inner draw of a contradicted task is rolled out
        anyway, in [0, 1] (0: never again; 1: only muted, never skipped).
      muted_reward: the reward every rollout of a contradicted task's group reaches ``inner``
        with: one the inner sampler counts as a failure (below its ``success_threshold`` or
        ``solved_reward``). 0 (the default) for rewards in [0, 1]; for rewards in {-1, 1}
        with a threshold of 0, give -1 (0 would count as a success there).
      entry_task: ``int[N]``, entries with equal values hold the same task (e.g.
        :func:`curriculax.tasks.distinct_tasks`; a config passes it as context, as to the
        gate): a proof on one copy marks every copy. None: the inner sampler's
        ``entry_task``, or, where it has none, each entry its own task. Given beside an inner
        ``entry_task`` that groups the entries otherwise: ``ValueError``. The sampler's own
        ``entry_task`` stays the inner sampler's (where that state sits; its own marks are
        alike on every copy, so they follow the task keys on a reordered pool either way).
      axis_name: the mesh axis along which per-task state is split under ``shard_map`` (the
        inner sampler must be built with the same one).

    Returns:
      A :class:`~curriculax.TaskSampler`. Metrics: the inner sampler's under ``inner/``, plus
      ``noise/contradicted`` (entries marked: each copy of a task),
      ``noise/contradicting_groups`` and ``noise/skipped`` (draws replaced; both cumulative).

    Example:
      >>> from curriculax.samplers import learnability
      >>> from curriculax.testing import group_results
      >>> s = reward_consistency(4, learnability(4))
      >>> r = group_results([1], [[1.0, 0.0]])._replace(answers=jnp.array([[7, 7]]))
      >>> contradicted_tasks(s.observe(s.init(jax.random.key(0)), r)).tolist()
      [1]
    """
    n = check_num_tasks(num_tasks)
    inner = _wrapping.check_inner(inner, "reward_consistency", n)
    muted_reward = number(muted_reward, "muted_reward")
    if not math.isfinite(muted_reward):
        raise ValueError(f"muted_reward must be finite, got {muted_reward}")
    keep_share = unit_interval(keep_share, "keep_share")

    entry_task = _wrapping.entry_task_with_inner(entry_task, inner, n, "reward_consistency")
    rep = task_of(entry_task, n, "reward_consistency")

    def init(key: jax.Array) -> RewardConsistencyState:
        return RewardConsistencyState(
            inner.init(key), jnp.zeros((n,), bool), _counters.zero(), _counters.zero()
        )

    def sample(state: RewardConsistencyState, key: jax.Array, num: int):
        num = check_num(num)
        if num == 0:
            return jnp.zeros((0,), jnp.int32), state
        axis = _shard.bound(axis_name)
        _shard.check_split(state.contradicted.shape[0], n, axis_name, "reward_consistency")
        start = _shard.offset(axis, state.contradicted.shape[0])
        k_inner, k_keep, k_pick = jax.random.split(key, 3)
        drawn, inner_state = inner.sample(state.inner, k_inner, num)
        candidates = _wrapping.ids_of(drawn, "reward_consistency").astype(jnp.int32)
        noisy = marked(state.contradicted, candidates, axis)
        keep = ~noisy | (jax.random.uniform(k_keep, (num,)) < keep_share)
        ids, replaced = _wrapping.replace_draws(
            candidates, keep, ~state.contradicted, k_pick, _SALT_PICK, start, axis
        )
        skipped = _counters.add(state.skipped, jnp.sum(replaced, dtype=jnp.int32))
        return ids, state._replace(inner=inner_state, skipped=skipped)

    def observe(state: RewardConsistencyState, results: GroupResults) -> RewardConsistencyState:
        _shard.check_split(state.contradicted.shape[0], n, axis_name, "reward_consistency")
        bad, flags, muted = mark(state.contradicted, results, _shard.bound(axis_name), rep)
        quiet = results._replace(
            rewards=jnp.where(muted[:, None], muted_reward, results.rewards).astype(
                results.rewards.dtype
            ),
            advantages=jnp.where(muted[:, None, None], 0.0, results.advantages).astype(
                results.advantages.dtype
            ),
        )
        return state._replace(
            inner=inner.observe(state.inner, quiet),
            contradicted=flags,
            groups=_counters.add(state.groups, jnp.sum(bad, dtype=jnp.int32)),
        )

    def metrics(state: RewardConsistencyState) -> dict[str, jax.Array]:
        out = _wrapping.inner_metrics(inner, state.inner)
        out["noise/contradicted"] = _count(state.contradicted, _shard.bound(axis_name))
        out["noise/contradicting_groups"] = state.groups.astype(jnp.float32)
        out["noise/skipped"] = state.skipped.astype(jnp.float32)
        return out

    return TaskSampler(init, sample, observe, metrics, num_tasks=n, entry_task=inner.entry_task)
