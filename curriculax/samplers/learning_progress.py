"""Learning progress per task: draw the tasks the policy is learning, not the noisy ones."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import _counters, _entries, _progress, _shard, _spread
from curriculax._checks import check_num_tasks, int_at_least, number, unit_interval
from curriculax._types import GroupResults, TaskSampler
from curriculax.samplers import _wrapping
from curriculax.samplers.difficulty_pools import sum_by_id
from curriculax.samplers.learnability import _beta_pool, _count

DEFAULT_NOISE_VISITS = 8
DEFAULT_NOISE_RELIABILITY = 0.5


class LearningProgressState(NamedTuple):
    """State of :func:`learning_progress`.

    The pass-rate posterior is :class:`~curriculax.samplers.LearnabilityState`'s (evidence
    that forgets with a half-life in pool passes); the progress fields are the split-half
    moving averages of :mod:`curriculax._progress`, one per task, updated per visit.

    Attributes:
      successes, failures: ``f32[N]`` posterior evidence as of ``updated``.
      updated: ``i32[N]`` clock reading when the evidence was last written.
      seen: ``bool[N]`` dispatched or observed.
      fast_a, fast_b, slow_a, slow_b: ``f32[N]`` fast and slow moving averages of the pass
        rate of each group's even (``a``) and odd (``b``) rollouts.
      cross: ``f32[N]`` moving average of ``(fast_a - slow_a) * (fast_b - slow_b)``.
      power: ``f32[N]`` moving average of their mean square.
      visits: ``i32[N]`` visits that updated the progress averages (both halves valid); a
        visit is a batch's groups of the task, pooled.
      mixed: ``i32[N]`` of those, visits in which one of the task's groups carried reward
        variance (valid rollouts with different rewards, or with ``success_threshold`` a
        success and a failure).
      clock: ``i32[]`` groups observed so far.
    """

    successes: jax.Array
    failures: jax.Array
    updated: jax.Array
    seen: jax.Array
    fast_a: jax.Array
    fast_b: jax.Array
    slow_a: jax.Array
    slow_b: jax.Array
    cross: jax.Array
    power: jax.Array
    visits: jax.Array
    mixed: jax.Array
    clock: jax.Array

    PER_TASK = (
        "successes",
        "failures",
        "updated",
        "seen",
        "fast_a",
        "fast_b",
        "slow_a",
        "slow_b",
        "cross",
        "power",
        "visits",
        "mixed",
    )
    AT_FIRST_ENTRY = True  # with entry_task: see curriculax._types


def reliability(state: LearningProgressState) -> jax.Array:
    """``f32[N]`` each task's progress reliability in [0, 1] (split-half; 0: noise or nothing
    moved, 1: its pass rate moves steadily)."""
    return _progress.reliability(state.cross, state.power)


def looks_like_noise(
    state: LearningProgressState,
    *,
    noise_visits: int = DEFAULT_NOISE_VISITS,
    noise_reliability: float = DEFAULT_NOISE_RELIABILITY,
) -> jax.Array:
    """``bool[N]``: tasks with at least ``noise_visits`` visits that carried reward variance,
    a recent pass rate (the fast moving averages) still strictly inside (0.05, 0.95), and a
    progress reliability below ``noise_reliability``: variance that never turned into
    progress. A task learned (or lost) since is not flagged for the variance it once had.
    Pure (usable under ``jit``); :func:`noisy_tasks` gives the ids on the host."""
    return _progress.looks_like_noise(
        state, min_mixed=noise_visits, max_reliability=noise_reliability
    )


def noisy_tasks(
    state: Any,
    *,
    noise_visits: int = DEFAULT_NOISE_VISITS,
    noise_reliability: float = DEFAULT_NOISE_RELIABILITY,
) -> np.ndarray:
    """Host side: the ids (``int64[M]``, ascending) of the tasks :func:`looks_like_noise`
    flags, for a user to inspect (a wrong reference, a verifier that accepts at random).

    Args:
      state: a :class:`LearningProgressState`, or any state holding exactly one (a
        curriculum's, an engine's, a floor wrapper's).
      noise_visits, noise_reliability: the factory's values.

    Raises:
      ValueError: if ``state`` holds no LearningProgressState, or several.
    """
    found = _wrapping.find_states(state, LearningProgressState)
    if len(found) != 1:
        raise ValueError(
            f"noisy_tasks needs a state holding exactly one LearningProgressState, found "
            f"{len(found)}; pass the learning_progress sampler's own state"
        )
    flags = looks_like_noise(
        found[0], noise_visits=noise_visits, noise_reliability=noise_reliability
    )
    return _progress.flagged(flags)


def learning_progress(
    num_tasks: int,
    *,
    target: float = 0.5,
    draw: str = "thompson",
    half_life: float | None = 1.0,
    prior: Sequence[float] = (1.0, 1.0),
    success_threshold: float | None = None,
    patience: float = 8.0,
    fast: float = 0.5,
    slow: float = 0.1,
    evidence: float = 0.1,
    uniform_share: float = 0.05,
    unseen_first: bool = True,
    noise_visits: int = DEFAULT_NOISE_VISITS,
    noise_reliability: float = DEFAULT_NOISE_RELIABILITY,
    entry_task: Sequence[int] | None = None,
    axis_name: str | None = None,
) -> TaskSampler:
    """Draws informative tasks whose variance turns into progress; noisy ones fade out.

    :func:`~curriculax.samplers.learnability` draws the tasks whose pass rate is closest to
    ``target``: the ones with the most reward variance. A task whose reward ignores the answer
    (a wrong reference, a verifier that accepts at random: a coin flip) has the most variance
    of all and teaches nothing. This sampler scores each task by

        ``informativeness * (rho + (1 - rho) * 2 ** (-mixed / patience))``

    where informativeness is learnability's score (``1 - |p - target| / max(target, 1 -
    target)`` for a Thompson draw ``p`` of the forgetting posterior), ``mixed`` counts the
    task's visits that carried reward variance (a success and a failure in one group), and
    ``rho`` in [0, 1] is the split-half reliability of its learning progress
    (:mod:`curriculax._progress`): each group's even and odd rollouts feed two independent
    fast-minus-slow moving averages of the pass rate, and ``rho`` is the moving average of
    their product over that of their mean square. A task whose rate does not move has
    ``rho`` near 0 in expectation, however much its reward varies (the two halves' noises are
    independent, the self-play judge's split-sample care); one the policy is learning has
    ``rho`` near 1. So a new task competes on informativeness alone, and each visit with
    variance but no progress halves its weight every ``patience`` such visits, while a task
    whose variance turns into progress keeps its weight. The uniform floor
    (``uniform_share``) keeps every task reachable, so nothing is dropped forever.

    The draw is learnability's (``ranked_draw``): unseen tasks first, then the best scores by
    top-k, then the uniform floor; distinct within a call. Cost per ``sample``: O(N + num
    log N); ``observe``: O(G K + G log G).

    When to use it: a pool where per-task pass rates are spread, as for a pretrained policy.
    From a warm-started base, with ``entry_task`` (copies sharing state, as the studies run
    it), it beat uniform on the balanced (1.75x fewer rollouts, 20 seeds), easy-skew (4.50x)
    and both coin-flip pools (1.50x at 20 seeds, 2.00x), and not on hard-skew (1.25x [1.00,
    1.50] at 40 seeds; each copy with its own state 1.43x [1.12, 1.67], the two 1.14x [0.88,
    1.46] apart, paired) (docs/studies.md). Like learnability it is
    blind where every task reads 0 until a whole level is learned (a policy from scratch: 0/10
    seeds on both coin-flip pools, uniform 0/10 and 4/10; see learnability's "When not to use
    it"). Telling a coin flip from a task costs about ``patience`` visits with variance each,
    so within budgets of a few visits per task it still draws coin flips at about uniform's
    share (docs/noise.md); with labels, a category bandit with ``reward =
    "advantage_progress"`` is the robust choice.

    The noise diagnostic: ``noise/flagged`` counts the tasks with at least ``noise_visits``
    visits with variance and ``rho < noise_reliability`` (:func:`looks_like_noise`);
    :func:`noisy_tasks` lists their ids on the host. See docs/noise.md.

    Args:
      num_tasks: pool size ``N``.
      target, draw, half_life, prior, success_threshold: the posterior and informativeness,
        as for :func:`~curriculax.samplers.learnability`.
      patience: visits with variance (and no progress) that halve a task's weight, > 0.
      fast: rate of the fast per-visit moving average of each half's pass rate, in (0, 1].
      slow: rate of the slow one, in (0, fast).
      evidence: rate of the moving averages behind ``rho``, in (0, 1].
      uniform_share: share of each call's positions (after unseen tasks) drawn uniformly.
      unseen_first: dispatch every task once before drawing any by score.
      noise_visits: visits with variance before a task can be flagged as noise (>= 1).
      noise_reliability: ``rho`` below which such a task is flagged, in (0, 1].
      entry_task: ``int[N]`` for pools that repeat tasks, as for
        :func:`~curriculax.samplers.learnability`: all copies of a task share one posterior
        and one set of progress averages (kept at its first entry, whose id
        :func:`noisy_tasks` reports), a call's scored draws are distinct tasks, and a batch
        updates a task's progress once, from all its groups pooled, whichever copies it drew.
        ``None``: every entry is its own task.
      axis_name: the mesh axis along which the per-task state is split under
        ``shard_map`` (as for learnability; draws identical to the unsplit sampler's).

    Returns:
      A :class:`~curriculax.TaskSampler`. Metrics: learnability's (``pool/unseen``,
      ``pool/unsolved``, ``pool/learnable``, ``pool/solved``, ``mean_pass_rate``,
      ``clock``), ``progress/learning`` (tasks with ``rho >= 0.5``), ``noise/flagged``.

    Raises:
      ValueError or TypeError: naming the bad argument and value.

    Example:
      >>> s = learning_progress(1000)
      >>> ids, state = s.sample(s.init(jax.random.key(0)), jax.random.key(1), 8)
      >>> noisy_tasks(state).tolist()
      []
    """
    n = check_num_tasks(num_tasks)
    ent = _entries.entries(entry_task, n, "learning_progress")
    pool = _beta_pool(
        n,
        target=target,
        draw=draw,
        half_life=half_life,
        prior=prior,
        success_threshold=success_threshold,
        uniform_share=uniform_share,
        unseen_first=unseen_first,
        axis_name=axis_name,
        entry_rep=None if entry_task is None else ent.rep,
        num_distinct=ent.num_distinct,
        name="learning_progress",
    )
    patience = number(patience, "patience")
    if not (patience > 0 and math.isfinite(patience)):
        raise ValueError(f"patience must be finite and > 0 visits, got {patience}")
    fast, slow, evidence = (
        unit_interval(v, name, open_low=True)
        for v, name in ((fast, "fast"), (slow, "slow"), (evidence, "evidence"))
    )
    if not slow < fast:
        raise ValueError(f"slow ({slow}) must be below fast ({fast})")
    noise_visits = int_at_least(noise_visits, "noise_visits")
    noise_reliability = unit_interval(noise_reliability, "noise_reliability", open_low=True)

    def noise(state: LearningProgressState) -> jax.Array:
        return looks_like_noise(
            state, noise_visits=noise_visits, noise_reliability=noise_reliability
        )

    def init(key: jax.Array) -> LearningProgressState:
        del key

        def zf():  # a fresh buffer per field: a donated state must hold each buffer once
            return jnp.zeros((n,), jnp.float32)

        return LearningProgressState(
            successes=zf(),
            failures=zf(),
            updated=jnp.zeros((n,), jnp.int32),
            seen=jnp.zeros((n,), bool),
            fast_a=zf(),
            fast_b=zf(),
            slow_a=zf(),
            slow_b=zf(),
            cross=zf(),
            power=zf(),
            visits=jnp.zeros((n,), jnp.int32),
            mixed=jnp.zeros((n,), jnp.int32),
            clock=_counters.zero(),
        )

    def sample(state: LearningProgressState, key: jax.Array, num: int):
        def score(word, ids):
            rho = reliability(state)
            fresh = jnp.exp2(-state.mixed.astype(jnp.float32) / jnp.float32(patience))
            return pool.closeness(state, word, ids) * (rho + (1.0 - rho) * fresh)

        return pool.draw(state, score, key, num)

    def observe(state: LearningProgressState, results: GroupResults) -> LearningProgressState:
        if results.task_ids.shape[0] == 0:
            return state
        # The posterior, as learnability's: decay each observed task's evidence to now, add.
        fields, obs = pool.update(state, results)
        rep, in_pool = obs.rep, obs.in_pool

        # Progress: one update per task and batch, from the two halves of all its groups in
        # the batch pooled (whichever copies drew it), applied at one of its rows.
        sums = _progress.half_sums(obs.rewards, obs.valid, obs.hit)
        # Reward variance in a group, decided exactly (not from sums of fractional rewards: a
        # group of equal partial rewards has none).
        spread = _spread.varies(obs.hit, obs.valid, axis=1)
        pooled, last = sum_by_id(
            rep, in_pool, jnp.concatenate([sums, spread.astype(jnp.float32)[:, None]], 1)
        )
        half = _progress.halves_of(pooled[:, :4])
        use = last & half.ok  # ``ok`` is the task's, pooled: the same on all its rows
        at = _shard.to_local(jnp.where(use, rep, -1), obs.start, obs.n_local)

        def get(x):
            return x.at[at].get(mode="fill", fill_value=0)

        visits = get(state.visits)
        new = _progress.update(
            *(get(x) for x in (state.fast_a, state.fast_b, state.slow_a, state.slow_b)),
            get(state.cross),
            get(state.power),
            half.a,
            half.b,
            visits,
            fast=fast,
            slow=slow,
            evidence=evidence,
        )
        fa, fb, sa, sb, cross, power = (
            old.at[at].set(v, mode="drop")
            for old, v in zip(
                (
                    state.fast_a,
                    state.fast_b,
                    state.slow_a,
                    state.slow_b,
                    state.cross,
                    state.power,
                ),
                new,
            )
        )
        mixed_group = pooled[:, 4] > 0  # a group of the task's in this batch had variance
        return state._replace(
            **fields,
            fast_a=fa,
            fast_b=fb,
            slow_a=sa,
            slow_b=sb,
            cross=cross,
            power=power,
            visits=state.visits.at[at].set(_counters.add(visits, 1), mode="drop"),
            mixed=state.mixed.at[at].set(
                _counters.add(get(state.mixed), mixed_group.astype(jnp.int32)), mode="drop"
            ),
        )

    def metrics(state: LearningProgressState) -> dict[str, jax.Array]:
        axis = _shard.bound(axis_name)
        n_local = state.seen.shape[0]
        reps = _entries.local_reps(ent, _shard.offset(axis, n_local), n_local)
        seen = state.seen & reps  # a task's state is read at its first entry only
        out = pool.metrics(state, seen)
        out["progress/learning"] = _count((reliability(state) >= 0.5) & seen, axis)
        out["noise/flagged"] = _count(noise(state) & reps, axis)
        return out

    shared = None if entry_task is None else ent.rep
    return TaskSampler(init, sample, observe, metrics, num_tasks=n, entry_task=shared)
