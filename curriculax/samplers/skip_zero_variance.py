"""Pre-rollout skipping of tasks predicted to give a zero-variance group (GRESO-style)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import _counters, _entries, _shard, _spread
from curriculax._checks import check_num, check_num_tasks, number, unit_interval
from curriculax._types import GroupResults, TaskSampler
from curriculax.samplers import _wrapping

_SALT_PICK = 7
# Per observed batch, the weight the counts of re-tested solved tasks lose (about 20 batches'
# memory); the counts start at one forgotten test in one, so the target starts at its cap.
_RETEST_DECAY = 0.05


class SkipState(NamedTuple):
    """State of :func:`skip_zero_variance`.

    Attributes:
      inner: the wrapped sampler's state.
      streak: ``i32[N]`` consecutive zero-variance (or, with ``skip="solved"``, solved) groups
        of each task (its latest groups); with ``entry_task`` (its own or, without it, its
        inner sampler's), kept at each task's first entry.
      p: ``f32[]`` base keep probability (a task with streak ``k`` is kept with
        probability ``max(p ** k, floor)``), steered toward the target zero-variance share.
      zero_variance_share: ``f32[]`` share of zero-variance groups in the latest batch.
      skipped: ``i32[]`` inner draws skipped before rollout so far.
      group_size: ``i32[]`` rollouts per group in the latest observed batch with a valid
        rollout: its largest group's valid rollouts (not ``K``, which a caller may pad with
        invalid rollouts: the host driver pads ``K`` to a power of two, the engine to the
        largest group of its envs).
      retests: ``f32[]`` groups of tasks with a streak (predicted zero-variance or solved,
        rolled out all the same), a count that decays by ``_RETEST_DECAY`` per batch.
      forgotten: ``f32[]`` those of them that broke their streak, decayed alike; their ratio
        ``forgotten / retests`` is the ``forgotten_share`` metric.
    """

    inner: Any
    streak: jax.Array
    p: jax.Array
    zero_variance_share: jax.Array
    skipped: jax.Array
    group_size: jax.Array
    retests: jax.Array
    forgotten: jax.Array

    # Fields indexed by task: a checkpoint restored onto a reordered pool permutes these.
    PER_TASK = ("streak",)
    AT_FIRST_ENTRY = True  # with entry_task: see curriculax._types


def _inner_replacements(
    inner: TaskSampler,
    inner_state: Any,
    key: jax.Array,
    candidates: jax.Array,
    keep: jax.Array,
    streak_of: Callable[[jax.Array], jax.Array],
    extra: int,
) -> tuple[jax.Array, jax.Array]:
    """Skipped draws replaced by the inner sampler's own draws (``replace="inner"``).

    A second call of the inner sampler (``extra`` draws, its new state discarded) offers the
    replacements, in a random order: the ``r``-th skipped draw takes the ``r``-th offered
    task with streak 0 that is neither a kept draw nor offered before. Skipped draws left over
    (too few such offers) are the caller's to replace uniformly.

    Returns:
      ``(ids: i32[num], replaced: bool[num])``.
    """
    k_draw, k_order = jax.random.split(key)
    offered, _ = inner.sample(inner_state, k_draw, extra)
    offered = _wrapping.ids_of(offered, "skip_zero_variance").astype(jnp.int32)
    offered = offered[jax.random.permutation(k_order, extra)]
    kept = jnp.sort(jnp.where(keep, candidates, -1))
    in_kept = kept[jnp.clip(jnp.searchsorted(kept, offered), 0, kept.shape[0] - 1)] == offered
    order = jnp.argsort(offered, stable=True)
    ranked = offered[order]
    first_ranked = jnp.concatenate([jnp.ones((1,), bool), ranked[1:] != ranked[:-1]])
    first = jnp.zeros((extra,), bool).at[order].set(first_ranked)
    usable = (streak_of(offered) == 0) & ~in_kept & first
    usable_ids = offered[jnp.argsort(~usable, stable=True)]
    rank = jnp.cumsum(~keep, dtype=jnp.int32) - 1
    replaced = ~keep & (rank < jnp.sum(usable, dtype=jnp.int32))
    ids = jnp.where(replaced, usable_ids[jnp.clip(rank, 0, extra - 1)], candidates)
    return ids.astype(jnp.int32), replaced


def skip_zero_variance(
    num_tasks: int,
    inner: TaskSampler,
    *,
    target_share: float = 0.25,
    floor: float = 0.01,
    initial_p: float = 0.5,
    p_step: float = 0.05,
    skip: str = "zero_variance",
    solved_reward: float = 1.0,
    replay: str = "fixed",
    forgotten_misses: int = 1,
    replace: str = "uniform",
    entry_task: Sequence[int] | np.ndarray | None = None,
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

    ``skip="solved"`` counts only *solved* groups (every valid rollout rewarded at least
    ``solved_reward``) and lets any other group reset the streak: a task the policy has
    mastered is skipped, one it fails on every rollout is not (from random weights nearly every
    group is all-zero at first, and those tasks are the ones left to learn). ``target_share``
    is then the share of solved groups ``p`` steers toward (0: skip every solved task but the
    ``floor``). With ``entry_task`` (a pool that repeats tasks), copies of a task share one
    streak (kept at the first entry), so a task solved under one copy is skipped under all;
    replacements are still drawn uniformly over entries, so the copies' weight stays on the
    tasks not skipped. Measured (docs/studies.md, inside ``reward_consistency`` and its gate,
    ``target_share=0``): from random weights it reached the GRPO studies' target on more seeds
    than uniform on every pool but hard-skew (a demonstrated win on the coin-flip pools only);
    from a warm-started base it reached the chain's on 17/20 seeds where uniform and GRESO's
    rule reached it on 2-3/20 (a win). It moves the draws onto whatever is not solved, so where
    much of the pool is out of reach (hard-skew) it drills that and reached the target on fewer
    seeds than uniform in both regimes (not a demonstrated loss). Over the preset's scores
    under a 25% ``floor`` from the base (20 seeds, docs/noise.md): ``target_share=0`` won the
    chain (20/20) and lost hard-skew (7/20 against uniform's 18/20: the solved target tasks
    are skipped, then forgotten); ``target_share=0.25``, which leaves a quarter of the groups
    to solved tasks, won hard-skew (20/20, 1.75x) and lost the chain's win (10/20).

    ``replay="forgetting"`` makes ``target_share`` a cap: the share ``p`` is steered toward is
    ``target_share`` times the ``forgotten_share``, the share of re-tested tasks (drawn while
    they had a streak and rolled out all the same: by ``p``, by the ``floor``) whose group broke
    the streak, counted over about the latest 20 batches and starting at 1 (the cap). A pool
    whose solved tasks stay solved is left to skip them (the target falls toward 0); one where
    skipping them lets them be forgotten keeps replaying them. A task re-tested at a pass rate
    just under 1 breaks its streak without being forgotten, so the share is not 0 even where
    nothing is lost: at pass rate 0.97 a re-test of 8 rollouts misses at least once 22% of
    the time.
    Measured over the same floored scores from the base (20 seeds, labels none, ``target_share
    =0.5``; docs/noise.md): 19/20 seeds at the target on both the chain and hard-skew, where
    each fixed share lost one of them, 1.24x and 1.17x behind the better fixed share of each;
    a cap of 0.25 did no better on those two pools. How it compares with the best arm on every
    base cell and label mode: docs/what-to-use.md ("No ``auto`` default is registered").

    ``forgotten_misses=2`` counts a re-test as forgotten only when at least two of its valid
    rollouts miss (reward below ``solved_reward``): 2% of re-tests at pass rate 0.97, 19% at
    0.9, 50% at 0.8 (8 rollouts); the streak still breaks at the first miss. Measured
    (docs/noise.md, session 19; the same floored scores from the base, labels none, tuning
    seeds): the chain 10/10 at 17,920 against 9/10 at 21,760 with one miss, hard-skew 9/10 at
    10,240 against 9/10 at 7,040: the forgotten share fell on both pools, not only where tasks
    stay solved. With ``target_share=1`` on every base cell: the best arm's median on hard-skew
    without labels (20/20 at 7,680); behind at the median on the chain (15/20 at 26,240 against
    19/20 at 19,840 with one miss and cap 0.5; intervals include 1). Kept for the studies that
    measured it.

    ``replace="inner"`` takes the replacements from the inner sampler instead: a second call
    of it (``2 num`` draws, its state from that call discarded) offers them, in a random
    order, each a task with streak 0 not already in the call; only skipped draws left over are
    replaced uniformly. Uniform replacements spread the skipped draws over everything not
    solved, whatever the inner sampler's scores say of it; the inner sampler's own draws keep
    its preferences. It costs a second inner ``sample`` per call. Measured (docs/noise.md,
    session 18; the forgetting candidate from the base, tuning seeds): better on no pool and
    slower at the median on the chain (7-8/10 seeds against 9/10; intervals overlap), whose win
    needs uniform draws onto its hardest level; on hard-skew with level labels the draws
    still moved onto the unreachable lengths once the reachable tasks were solved (the inner
    sampler then offers solved tasks too, and the uniform fallback fills the batch). Kept for
    the studies that measured it.

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
      skip: ``"zero_variance"`` (GRESO: every valid reward equal) or ``"solved"`` (every
        valid reward at least ``solved_reward``).
      solved_reward: the least reward of a solved rollout (``skip="solved"`` only).
      replay: ``"fixed"`` (steer toward ``target_share``) or ``"forgetting"`` (steer toward
        ``target_share`` times the ``forgotten_share``).
      forgotten_misses: the least number of a re-tested task's valid rollouts that miss
        (reward below ``solved_reward``) for its group to count as forgotten, an integer >= 1
        (``replay="forgetting"`` with ``skip="solved"`` only above 1); 1: any group that breaks
        the streak.
      replace: ``"uniform"`` (skipped draws replaced uniformly over the tasks not predicted
        zero-variance) or ``"inner"`` (by the inner sampler's draws first, above).
      entry_task: ``int[N]``, entries with equal values hold the same task (e.g.
        :func:`curriculax.tasks.distinct_tasks`; a config passes it as context): copies share
        a streak. None: the inner sampler's ``entry_task`` (its copies share one), or, where
        it has none, each entry its own. Given beside an inner ``entry_task`` that groups the
        entries otherwise: ``ValueError``.
      axis_name: the mesh axis along which per-task state is split under ``shard_map`` (the
        inner sampler must be built with the same one).

    Returns:
      A :class:`~curriculax.TaskSampler`. Metrics: the inner sampler's under ``inner/``, plus
      ``skipped``, ``skipped_rollouts``, ``p``, ``zero_variance_share`` (latest batch),
      ``predicted_zero_variance`` (tasks with a streak), ``forgotten_share`` (above) and
      ``target_share`` (the share ``p`` is steered toward); with ``skip="solved"`` these count
      solved groups.

    Example:
      >>> from curriculax.samplers import uniform
      >>> s = skip_zero_variance(100, uniform(100))
      >>> ids, state = s.sample(s.init(jax.random.key(0)), jax.random.key(1), 8)
    """
    n = check_num_tasks(num_tasks)
    inner = _wrapping.check_inner(inner, "skip_zero_variance", n)
    target_share = unit_interval(target_share, "target_share")
    floor = unit_interval(floor, "floor", open_low=True)
    initial_p = unit_interval(initial_p, "initial_p")
    p_step = unit_interval(p_step, "p_step")
    if skip not in ("zero_variance", "solved"):
        raise ValueError(
            f"skip_zero_variance: skip must be 'zero_variance' or 'solved', got {skip!r}"
        )
    solved_reward = number(solved_reward, "skip_zero_variance: solved_reward")
    if replay not in ("fixed", "forgetting"):
        raise ValueError(
            f"skip_zero_variance: replay must be 'fixed' or 'forgetting', got {replay!r}"
        )
    if replace not in ("uniform", "inner"):
        raise ValueError(
            f"skip_zero_variance: replace must be 'uniform' or 'inner', got {replace!r}"
        )
    if isinstance(forgotten_misses, bool) or not isinstance(forgotten_misses, int):
        raise TypeError(
            f"skip_zero_variance: forgotten_misses must be an integer, got {forgotten_misses!r}"
        )
    if forgotten_misses < 1:
        raise ValueError(
            f"skip_zero_variance: forgotten_misses must be at least 1, got {forgotten_misses}"
        )
    if forgotten_misses > 1 and (skip != "solved" or replay != "forgetting"):
        raise ValueError(
            "skip_zero_variance: forgotten_misses above 1 needs skip='solved' and "
            f"replay='forgetting', got skip={skip!r}, replay={replay!r}"
        )
    from_inner = replace == "inner"
    solved_only = skip == "solved"
    follow = replay == "forgetting"

    def steered_target(state: SkipState) -> jax.Array:
        share = state.forgotten / jnp.maximum(state.retests, 1e-6)
        return jnp.float32(target_share) * (share if follow else 1.0)

    # Without its own map, the inner sampler's: the streak is then laid out as the
    # entry_task it advertises says (AT_FIRST_ENTRY), so a restore moves it with its task.
    entry_task = _wrapping.entry_task_with_inner(entry_task, inner, n, "skip_zero_variance")
    ent = _entries.entries(entry_task, n, "skip_zero_variance")
    shared = entry_task is not None and not ent.is_rep.all()
    rep = jnp.asarray(ent.rep)

    def rep_of(ids: jax.Array) -> jax.Array:
        return rep[jnp.clip(ids, 0, n - 1)] if shared else ids

    def init(key: jax.Array) -> SkipState:
        return SkipState(
            inner=inner.init(key),
            streak=jnp.zeros((n,), jnp.int32),
            p=jnp.asarray(initial_p, jnp.float32),
            zero_variance_share=jnp.zeros((), jnp.float32),
            skipped=_counters.zero(),
            group_size=_counters.zero(),
            retests=jnp.ones((), jnp.float32),
            forgotten=jnp.ones((), jnp.float32),
        )

    def sample(state: SkipState, key: jax.Array, num: int):
        num = check_num(num)
        if num == 0:
            return jnp.zeros((0,), jnp.int32), state
        axis = _shard.bound(axis_name)
        n_local = state.streak.shape[0]
        _shard.check_split(n_local, n, axis_name, "skip_zero_variance")
        start = _shard.offset(axis, n_local)
        k_inner, k_skip, k_pick = jax.random.split(key, 3)
        drawn, inner_state = inner.sample(state.inner, k_inner, num)
        candidates = _wrapping.ids_of(drawn, "skip_zero_variance").astype(jnp.int32)

        def streak_of(ids: jax.Array) -> jax.Array:
            # held by one device when split: sum the one-hot reads
            slot = _shard.to_local(rep_of(ids), start, n_local)
            return _shard.psum(state.streak.at[slot].get(mode="fill", fill_value=0), axis)

        streak = streak_of(candidates)
        keep_prob = jnp.maximum(state.p ** streak.astype(jnp.float32), floor)
        keep = (streak == 0) | (jax.random.uniform(k_skip, (num,)) < keep_prob)
        from_extra = jnp.zeros((num,), bool)
        if from_inner:
            # The second inner call's key: a fourth split key (the session-18 studies' own),
            # taken apart so the default mode's three keys stay the 3-way split's.
            k_offer = jax.random.split(key, 4)[3]
            candidates, from_extra = _inner_replacements(
                inner, state.inner, k_offer, candidates, keep, streak_of, min(2 * num, n)
            )
            keep = keep | from_extra

        # Replacements: entries whose task has streak 0, not already kept in this call, a
        # uniform subset (each copy of a task a candidate, as under uniform).
        fresh = state.streak == 0
        if shared:  # an entry's streak is its first entry's, possibly on another device
            local = start + jnp.arange(n_local, dtype=jnp.int32)
            fresh = _shard.gather(state.streak, axis).reshape(-1)[rep_of(local)] == 0
        ids, replaced = _wrapping.replace_draws(
            candidates, keep, fresh, k_pick, _SALT_PICK, start, axis
        )
        replaced = replaced | from_extra
        new = state._replace(
            inner=inner_state,
            skipped=_counters.add(state.skipped, jnp.sum(replaced, dtype=jnp.int32)),
        )
        return ids.astype(jnp.int32), new

    def observe(state: SkipState, results: GroupResults) -> SkipState:
        g = results.rewards.shape[0]
        if g == 0:
            return state._replace(inner=inner.observe(state.inner, results))
        n_local = state.streak.shape[0]
        _shard.check_split(n_local, n, axis_name, "skip_zero_variance")
        axis = _shard.bound(axis_name)
        start = _shard.offset(axis, n_local)
        ids = results.task_ids.astype(jnp.int32)
        valid = results.valid.astype(bool)
        rewards = results.rewards.astype(jnp.float32)
        has = jnp.any(valid, axis=1)
        low, high = _spread.valid_range(rewards, valid, axis=1)
        flat = has & (high == low)
        if solved_only:
            flat = flat & (low >= solved_reward)
        use = has & (ids >= 0) & (ids < n)
        slot = _shard.to_local(jnp.where(use, rep_of(ids), -1), start, n_local)
        # Re-tests: groups whose task had a streak before this batch (held by one device).
        prior = _shard.psum(state.streak.at[slot].get(mode="fill", fill_value=0), axis)
        retest = use & (prior > 0)
        keep = 1.0 - _RETEST_DECAY
        retests = keep * state.retests + jnp.sum(retest, dtype=jnp.float32)
        if forgotten_misses > 1:
            misses = jnp.sum(valid & (rewards < solved_reward), axis=1, dtype=jnp.int32)
            lost = misses >= forgotten_misses
        else:
            lost = ~flat
        forgotten = keep * state.forgotten + jnp.sum(retest & lost, dtype=jnp.float32)
        # A task twice in one batch: the streak grows by its zero-variance groups, unless one
        # of them had variance (then it restarts at 0).
        grew = state.streak.at[slot].add(flat.astype(jnp.int32), mode="drop")
        broke = jnp.zeros((n_local,), bool).at[slot].max(~flat, mode="drop")
        observed_groups = jnp.sum(has, dtype=jnp.int32)
        size = jnp.max(jnp.where(use, jnp.sum(valid, axis=1, dtype=jnp.int32), 0))
        share = jnp.sum(flat, dtype=jnp.int32) / jnp.maximum(observed_groups, 1)
        seen = observed_groups > 0
        retests = jnp.where(seen, retests, state.retests)
        forgotten = jnp.where(seen, forgotten, state.forgotten)
        steered = state._replace(retests=retests, forgotten=forgotten)
        step = p_step * (steered_target(steered) - share)
        p = jnp.where(seen, jnp.clip(state.p + step, 0.0, 1.0), state.p)
        return state._replace(
            inner=inner.observe(state.inner, results),
            streak=jnp.where(broke, 0, grew).astype(jnp.int32),
            p=p.astype(jnp.float32),
            zero_variance_share=jnp.where(
                observed_groups > 0, share, state.zero_variance_share
            ).astype(jnp.float32),
            group_size=jnp.where(size > 0, size, state.group_size).astype(jnp.int32),
            retests=retests.astype(jnp.float32),
            forgotten=forgotten.astype(jnp.float32),
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
        out["forgotten_share"] = state.forgotten / jnp.maximum(state.retests, 1e-6)
        out["target_share"] = steered_target(state)
        return out

    return TaskSampler(
        init,
        sample,
        observe,
        metrics,
        num_tasks=n,
        entry_task=ent.rep if shared else inner.entry_task,
    )
