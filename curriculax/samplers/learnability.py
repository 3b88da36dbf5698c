"""Learnability: draw the tasks whose pass rate is most uncertain-to-useful, from a posterior
that forgets (MoPPS / LILO / SFL family)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import _counters, _entries, _permute, _random, _shard, _topk
from curriculax._checks import check_num, check_num_tasks, number, unit_interval
from curriculax._types import GroupResults, TaskSampler

DRAWS = ("thompson", "mean")

# Salts of the per-task hashed numbers drawn in one call (independent streams).
_SALT_BETA, _SALT_TIE, _SALT_NEW, _SALT_SETTLE = 0, 2, 3, 4


class LearnabilityState(NamedTuple):
    """State of :func:`learnability`.

    The posterior of task ``i`` is ``Beta(a0 + s_i * f, b0 + f_i * f)`` with
    ``f = 2 ** (-(clock - updated_i) / (half_life * D))`` (``D`` distinct tasks: ``N``
    without ``entry_task``): evidence recorded when the clock
    (groups observed so far) read ``updated_i``, decayed lazily, so ``observe`` costs nothing
    for tasks it does not touch. ``observe`` ages a task's older evidence by the groups
    observed since its last visit, not by the visiting batch's own: a task observed in every
    batch keeps all its evidence (it forgets between visits only).

    Attributes:
      successes: ``f32[N]`` success evidence as of ``updated``.
      failures: ``f32[N]`` failure evidence as of ``updated``.
      updated: ``i32[N]`` clock reading when the evidence was last written.
      seen: ``bool[N]`` the task was dispatched or a result for it was observed.
      clock: ``i32[]`` groups observed so far (the forgetting clock).
    """

    successes: jax.Array
    failures: jax.Array
    updated: jax.Array
    seen: jax.Array
    clock: jax.Array

    # Fields indexed by task: a checkpoint restored onto a reordered pool permutes these.
    PER_TASK = ("successes", "failures", "updated", "seen")
    AT_FIRST_ENTRY = True  # with entry_task: see curriculax._types


def _half_life(value: object) -> float:
    if value is None:
        return math.inf
    h = number(value, "half_life")
    if not h > 0:
        raise ValueError(
            f"half_life must be > 0 pool passes (or None / inf for no forgetting), got {value!r}"
        )
    return h


def _prior(value: object) -> tuple[float, float]:
    if isinstance(value, np.ndarray) and value.shape == (2,):
        value = value.tolist()
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2:
        raise TypeError(f"prior must be a pair [a0, b0] of Beta pseudo-counts, got {value!r}")
    a0, b0 = (number(v, "prior") for v in value)
    if not (a0 > 0 and b0 > 0 and math.isfinite(a0) and math.isfinite(b0)):
        raise ValueError(f"prior pseudo-counts must be finite and > 0, got {list(value)}")
    return a0, b0


class _Observed(NamedTuple):
    """What :meth:`_BetaPool.update` read from a batch (``f32[G]`` / ``[G, K]`` / ``bool``),
    for samplers that update more than the posterior. ``rep``: ``i32[G]`` each group's task's
    representative, the slot its state lives in (the task id unless the pool repeats tasks)."""

    rep: jax.Array
    in_pool: jax.Array
    valid: jax.Array
    rewards: jax.Array
    hit: jax.Array
    wins: jax.Array
    losses: jax.Array
    start: jax.Array
    n_local: int


def _count(mask: jax.Array, axis: str | None) -> jax.Array:
    """``f32[]`` the pool-wide count of ``mask`` (summed over the devices of ``axis``)."""
    return _shard.psum(jnp.sum(mask, dtype=jnp.int32), axis).astype(jnp.float32)


class _BetaPool(NamedTuple):
    """Learnability's validated settings and the per-task Beta posterior, draw, update and
    metrics built on them: the one home for samplers that score tasks by that posterior
    (learnability, learning_progress). Their states hold ``successes``, ``failures``,
    ``updated``, ``seen`` (per local task) and ``clock``.

    Attributes:
      n: pool size (entries).
      num_distinct: distinct tasks (``n`` unless entries repeat tasks).
      entry_rep: ``int[n]`` each entry's representative, or None (every entry its own task).
      target, thompson, a0, b0, success_threshold, uniform_share, unseen_first, axis_name:
        as for :func:`learnability` (``thompson``: ``draw == "thompson"``).
      horizon: the half-life in groups (``inf``: no forgetting).
      name: the sampler's registered name, for the errors it raises.
    """

    n: int
    num_distinct: int
    entry_rep: np.ndarray | None
    target: float
    thompson: bool
    a0: float
    b0: float
    horizon: float
    success_threshold: float | None
    uniform_share: float
    unseen_first: bool
    axis_name: str | None
    name: str = "learnability"

    def posterior(self, state: NamedTuple) -> tuple[jax.Array, jax.Array]:
        """``(a, b)``: the Beta parameters of every local task now."""
        if math.isinf(self.horizon):
            fade = jnp.ones_like(state.successes)
        else:
            age = (state.clock - state.updated).astype(jnp.float32)
            fade = jnp.exp2(-age / jnp.float32(self.horizon))
        return self.a0 + state.successes * fade, self.b0 + state.failures * fade

    def closeness(
        self,
        state: NamedTuple,
        word: jax.Array,
        ids: jax.Array,
        extra: tuple[jax.Array, jax.Array] | None = None,
    ) -> jax.Array:
        """``f32[n_local]`` learnability's score ``1 - |p - target| / max(target, 1 -
        target)``, ``p`` a Thompson draw of the posterior (or its mean); ``extra``: pseudo-counts
        ``(f32[n_local], f32[n_local])`` added to the posterior's first."""
        a, b = self.posterior(state)
        if extra is not None:
            a, b = a + extra[0], b + extra[1]
        p = _random.beta(word, ids, a, b, _SALT_BETA) if self.thompson else a / (a + b)
        return 1.0 - jnp.abs(p - self.target) / max(self.target, 1.0 - self.target)

    def draw(
        self,
        state: NamedTuple,
        score: Callable[[jax.Array, jax.Array], jax.Array],
        key: jax.Array,
        num: int,
    ) -> tuple[jax.Array, NamedTuple]:
        """:func:`ranked_draw` by ``score``: ``(i32[num] ids, state with the drawn marked
        seen)``."""
        ids, seen = ranked_draw(
            state.seen,
            score,
            key,
            num,
            self.n,
            uniform_share=self.uniform_share,
            unseen_first=self.unseen_first,
            axis_name=self.axis_name,
            entry_rep=self.entry_rep,
            who=self.name,
        )
        return ids, state._replace(seen=seen)

    def update(
        self, state: NamedTuple, results: GroupResults
    ) -> tuple[dict[str, jax.Array], _Observed]:
        """Learnability's ``observe`` (``G >= 1`` groups): each observed task's evidence
        decayed to now, plus the batch's successes and failures (valid rollouts only), marked
        seen; the clock advances by the groups in the pool.

        Returns:
          ``(fields, observed)``: the new ``successes``, ``failures``, ``updated``, ``seen``
          and ``clock`` for ``state._replace(**fields)``, and what was read from the batch.
        """
        n, n_local = self.n, state.successes.shape[0]
        _shard.check_split(n_local, n, self.axis_name, f"{self.name} (observe)")
        start = _shard.offset(_shard.bound(self.axis_name), n_local)
        ids = results.task_ids.astype(jnp.int32)
        in_pool = (ids >= 0) & (ids < n)
        valid = results.valid.astype(bool)
        rewards = results.rewards.astype(jnp.float32)
        if self.success_threshold is None:
            hit = jnp.clip(rewards, 0.0, 1.0)
        else:
            hit = (rewards >= self.success_threshold).astype(jnp.float32)
        wins = jnp.sum(jnp.where(valid, hit, 0.0), axis=1)
        losses = jnp.sum(valid, axis=1).astype(jnp.float32) - wins
        rep = (
            ids if self.entry_rep is None else jnp.asarray(self.entry_rep)[jnp.clip(ids, 0, n - 1)]
        )
        slot = _shard.to_local(jnp.where(in_pool, rep, -1), start, n_local)
        clock = _counters.add(state.clock, jnp.sum(in_pool, dtype=jnp.int32))
        # Age each observed task's evidence to the clock before this batch, then add the new
        # groups (a task observed twice in one batch gets both: the decayed value is set twice,
        # the same value both times, and the additions accumulate). The batch that observes a
        # task does not age its older evidence, which is stamped with the clock after it: a
        # task observed in every batch keeps all its evidence (it forgets between visits only).
        # Every stored study measured this; aging by the batch too (``clock - before``) is the
        # decay the half-life names, and changed a study's result (docs/noise.md, session 24).
        if math.isinf(self.horizon):
            fade = jnp.ones(ids.shape, jnp.float32)
        else:
            before = state.updated.at[slot].get(mode="fill", fill_value=0)
            age = (state.clock - before).astype(jnp.float32)
            fade = jnp.exp2(-age / jnp.float32(self.horizon))
        s = state.successes.at[slot].get(mode="fill", fill_value=0.0) * fade
        f = state.failures.at[slot].get(mode="fill", fill_value=0.0) * fade
        fields = {
            "successes": state.successes.at[slot]
            .set(s, mode="drop")
            .at[slot]
            .add(wins, mode="drop"),
            "failures": state.failures.at[slot]
            .set(f, mode="drop")
            .at[slot]
            .add(losses, mode="drop"),
            "updated": state.updated.at[slot].set(clock, mode="drop"),
            "seen": state.seen.at[slot].set(True, mode="drop"),
            "clock": clock,
        }
        observed = _Observed(rep, in_pool, valid, rewards, hit, wins, losses, start, n_local)
        return fields, observed

    def metrics(self, state: NamedTuple, seen: jax.Array) -> dict[str, jax.Array]:
        """Learnability's metrics over the local tasks marked in ``seen`` (``bool[n_local]``)."""
        axis = _shard.bound(self.axis_name)
        a, b = self.posterior(state)
        mean = a / (a + b)
        num_seen = _shard.psum(jnp.sum(seen, dtype=jnp.int32), axis)
        total = _shard.psum(jnp.sum(jnp.where(seen, mean, 0.0)), axis)
        return {
            "pool/unseen": (self.num_distinct - num_seen).astype(jnp.float32),
            "pool/unsolved": _count((mean < 0.2) & seen, axis),
            "pool/learnable": _count((mean >= 0.2) & (mean <= 0.8) & seen, axis),
            "pool/solved": _count((mean > 0.8) & seen, axis),
            "mean_pass_rate": total / jnp.maximum(num_seen, 1).astype(jnp.float32),
            "clock": state.clock.astype(jnp.float32),
        }


def _beta_pool(
    n: int,
    *,
    target: object,
    draw: object,
    half_life: object,
    prior: object,
    success_threshold: object,
    uniform_share: object,
    unseen_first: object,
    axis_name: str | None,
    entry_rep: np.ndarray | None = None,
    num_distinct: int | None = None,
    name: str = "learnability",
) -> _BetaPool:
    """Validates learnability's arguments (raising ValueError or TypeError that names the bad
    one) into a :class:`_BetaPool` over a pool of ``n`` entries."""
    target = number(target, "target")
    if not 0.0 < target < 1.0:
        raise ValueError(f"target must lie strictly between 0 and 1, got {target}")
    if draw not in DRAWS:
        raise ValueError(f"draw must be one of {list(DRAWS)}, got {draw!r}")
    h = _half_life(half_life)
    a0, b0 = _prior(prior)
    if success_threshold is not None:
        success_threshold = number(success_threshold, "success_threshold")
        if not math.isfinite(success_threshold):
            raise ValueError(
                f"success_threshold must be finite (or None: fractional successes), got "
                f"{success_threshold}"
            )
    uniform_share = unit_interval(uniform_share, "uniform_share")
    if not isinstance(unseen_first, bool):
        raise TypeError(f"unseen_first must be a bool, got {unseen_first!r}")
    num_distinct = n if num_distinct is None else num_distinct
    return _BetaPool(
        n=n,
        num_distinct=num_distinct,
        entry_rep=entry_rep,
        target=target,
        thompson=draw == "thompson",
        a0=a0,
        b0=b0,
        horizon=h * num_distinct,
        success_threshold=success_threshold,
        uniform_share=uniform_share,
        unseen_first=unseen_first,
        axis_name=axis_name,
        name=name,
    )


def ranked_draw(
    seen: jax.Array,
    score: Callable[[jax.Array, jax.Array], jax.Array],
    key: jax.Array,
    num: int,
    n: int,
    *,
    uniform_share: float,
    unseen_first: bool,
    axis_name: str | None,
    entry_rep: jax.Array | None = None,
    who: str = "learnability",
) -> tuple[jax.Array, jax.Array]:
    """The draw of :func:`learnability` for any per-task score: unseen tasks first, then the
    best scores, then a uniform floor; distinct within a call. O(N + num log N).

    Args:
      seen: ``bool[n_local]`` this device's tasks already dispatched or observed.
      score: ``(word u32[], ids i32[n_local]) -> f32[n_local]`` scores in [0, 1] of this
        device's tasks (``ids`` are global; ``word`` seeds per-task random numbers).
      key: the call's key.
      num: static count.
      n: pool size.
      uniform_share, unseen_first, axis_name: as for :func:`learnability`.
      who: the calling sampler's name, for the error a misbuilt split raises.
      entry_rep: ``i32[n]`` (host) for pools that repeat tasks: each entry's representative,
        the first entry holding its task (:func:`curriculax._entries.entries`). Only
        representatives are scored, warmed up and marked seen, so a call's scored draws are
        distinct tasks; the uniform floor still draws entries. None: every entry its own task.

    Returns:
      ``(i32[num] ids, bool[n_local] seen)`` with the drawn tasks marked seen.
    """
    num = check_num(num)
    if num == 0:
        return jnp.zeros((0,), jnp.int32), seen
    axis = _shard.bound(axis_name)
    n_local = seen.shape[0]
    _shard.check_split(n_local, n, axis_name, f"{who} (sample)")
    start = _shard.offset(axis, n_local)
    local_ids = start + jnp.arange(n_local, dtype=jnp.int32)
    pos = jnp.arange(num, dtype=jnp.int32)
    words = jax.random.bits(key, (3,), jnp.uint32)
    score_word, floor_word = words[0], words[1]
    share_u = (words[2] >> 8).astype(jnp.float32) * jnp.float32(2.0**-24)
    if entry_rep is None:
        is_rep = jnp.ones((n_local,), bool)

        def rep_of(ids):
            return ids
    else:
        rep = jnp.asarray(entry_rep, jnp.int32)
        is_rep = rep[jnp.clip(local_ids, 0, n - 1)] == local_ids

        def rep_of(ids):
            return rep[jnp.clip(ids, 0, n - 1)]

    # The uniform floor: a share of the positions left after the unseen tasks.
    if unseen_first:
        unseen = _shard.psum(jnp.sum(~seen & is_rep, dtype=jnp.int32), axis)
        num_warm = jnp.minimum(unseen, num)
    else:
        num_warm = jnp.zeros((), jnp.int32)
    num_floor = _random.stochastic_round(uniform_share * (num - num_warm), share_u)
    num_best = num - num_floor
    floor_ids = _permute.permute(pos % n, n, _permute.round_keys(floor_word))

    # The rest by key: unseen tasks first (keys in [2, 3), at random among them), then
    # the scores (keys in [1, 2)); the floor's picks are left out (key 0).
    keys = _topk.ranking_key(score(score_word, local_ids), score_word, local_ids, _SALT_TIE)
    if unseen_first:
        keys = jnp.where(seen, keys, 2.0 + _random.unit(score_word, local_ids, _SALT_NEW))
    keys = jnp.where(is_rep, keys, 0.0)
    taken = jnp.where(pos >= num_best, rep_of(floor_ids[jnp.maximum(pos - num_best, 0)]), -1)
    keys = keys.at[_shard.to_local(taken, start, n_local)].set(0.0, mode="drop")
    best_keys, best_ids = _topk.top_k(keys, num, start, axis, tie=(score_word, _SALT_SETTLE))
    eligible = jnp.sum(best_keys > 0, dtype=jnp.int32)

    # Positions: the best (cycling when too few are eligible), then the floor's picks.
    best = jnp.where(eligible > 0, best_ids[pos % jnp.maximum(eligible, 1)], floor_ids[pos])
    ids = jnp.where(pos < num_best, best, floor_ids[jnp.maximum(pos - num_best, 0)])
    ids = ids.astype(jnp.int32)
    return ids, seen.at[_shard.to_local(rep_of(ids), start, n_local)].set(True, mode="drop")


def learnability(
    num_tasks: int,
    *,
    target: float = 0.5,
    draw: str = "thompson",
    half_life: float | None = 1.0,
    prior: Sequence[float] = (1.0, 1.0),
    success_threshold: float | None = None,
    uniform_share: float = 0.05,
    unseen_first: bool = True,
    entry_task: Sequence[int] | None = None,
    axis_name: str | None = None,
) -> TaskSampler:
    """Draws the tasks whose pass rate is closest to ``target``, by a posterior that forgets.

    Each task carries a Beta posterior of its pass rate. A finished group adds its successes
    and failures as evidence (valid rollouts only; see ``success_threshold``), and evidence
    decays toward the prior with a half-life of ``half_life`` passes over the pool (the
    clock is the number of groups observed; one pass = ``N`` groups), so a task nobody has
    drawn for a while becomes uncertain again and competes for draws: a task that failed
    under an early policy is retried, and one that became easy is noticed. The decay is
    applied lazily from a per-task "last written" clock reading, so ``observe`` touches only
    the observed tasks (MoPPS's ``alpha <- lambda alpha + (1 - lambda) alpha0 + s``, with
    ``lambda`` per elapsed group instead of per visit).

    A ``sample(num)`` call:

    1. with ``unseen_first``, hands out tasks never seen before (dispatched or observed), at
       random among them: a warm-up that dispatches every task once before any twice. It
       depends on the per-task ``seen`` field alone, so a state restored onto a reordered
       pool loses no task;
    2. fills the next positions with the tasks of highest score ``1 - |p - target| /
       max(target, 1 - target)``, where ``p`` is a Thompson draw from the task's posterior
       (``draw = "thompson"``) or its posterior mean (``"mean"``). With ``target = 0.5``
       this ranks exactly as the learnability ``p (1 - p)`` (LILO, SFL) and as MoPPS's
       "closest to 0.5";
    3. draws a share ``uniform_share`` of the positions left after step 1 uniformly over the
       pool, placed last (the floor that bounds the worst case against uniform sampling;
       randomized rounding, so the share holds in expectation for any ``num``, even 1).

    Tasks are distinct within a call (the floor's picks are kept out of steps 1-2); only a
    pool smaller than the call repeats tasks, the best ones cycling.

    Defaults, and why. Thompson draws (MoPPS) explore in proportion to uncertainty, where
    the posterior mean (``draw = "mean"``) retries a stale task only once its mean has
    drifted back near the target, which on the simulated pool either explores too little or
    too late. The warm-up gives every task one measured group before any is drawn twice.
    The forgetting clock counts groups, not calls: with a half-life in calls the share of
    draws spent re-checking stale tasks grows with ``N / num`` (a big pool's stale tasks
    all look new again before the sampler returns to them), while in pool passes it does not
    depend on the pool or batch size. One pass trades concentration against rediscovery:
    longer half-lives put more draws on known informative tasks and find tasks that became
    learnable later (the figures on the simulated pool, for these defaults and the
    alternatives: docs/studies.md). 5% uniform keeps every task reachable whatever the
    posterior says.

    When not to use it. Scoring each task by its own pass rate pays when tasks are learned
    one by one and many sit at 0 < p < 1. When skill transfers across the tasks of a level
    (learning some length-3 reversals teaches the rest), and a task's pass rate stays 0 until
    the level is nearly learned, per-task scores spread the draws over the levels much as
    uniform sampling does, so they cannot move the mass to the level that needs it: from
    random weights it did not beat uniform sampling on any pool of the GRPO studies
    (docs/studies.md), where the category bandit over levels beat uniform on the hard-skew
    pool and reached the target on more seeds on the easy-skew one. From a warm-started base,
    where pass rates are spread from the first step, it beat uniform on the balanced,
    easy-skew and 20% coin-flip pools without labels, and not on hard-skew or the 50% one.
    It is drawn into tasks whose reward is noise (a coin flip has the most variance); see
    :func:`learning_progress` and the category bandit's ``"advantage_progress"`` reward.

    The Thompson draw uses hashed per-task normals and the Wilson-Hilferty approximation of
    the Gamma draws behind a Beta draw (quantiles within ~0.007 of the exact Beta's for
    pseudo-counts >= 1), so it is the same whether or not the pool is split over devices.

    Cost per ``sample``: one O(N) elementwise pass (decay, draw, score) and one
    ``jax.lax.top_k`` of ``num`` (the fastest exact selection measured; the timings are in
    docs/studies.md), then a second O(N) pass and ``top_k`` that settle a tie at the cut at
    random (``curriculax/_topk.py``), so O(N + num log N). ``observe``: O(G K).

    Args:
      num_tasks: pool size ``N``.
      target: the pass rate worth training on, in (0, 1). 0.5 maximizes the reward variance
        of a group (the learnability of LILO / SFL).
      draw: ``"thompson"`` (a posterior draw per task per call) or ``"mean"`` (the
        posterior mean; deterministic up to random tie-breaks).
      half_life: passes over the pool (``N`` observed groups) after which unrefreshed
        evidence counts half; ``None`` (or ``inf`` in TOML) never forgets.
      prior: Beta pseudo-counts ``[a0, b0]`` of an unseen (or fully forgotten) task.
      success_threshold: ``None``: rewards are clipped to [0, 1] and count as fractional
        successes (a reward of 0.3 adds 0.3 success and 0.7 failure; exact for 0/1
        rewards). A number: a rollout succeeds iff its reward ``>= success_threshold``
        (use this for rewards outside [0, 1]).
      uniform_share: share of each call's positions not taken by unseen tasks that is drawn
        uniformly, in [0, 1].
      unseen_first: dispatch every task once before drawing any by score.
      entry_task: ``int[N]`` for pools that repeat tasks: entries with equal values hold the
        same task (:func:`curriculax.tasks.distinct_tasks` computes it), so all copies of a
        task share one posterior (kept at its first entry), a call's scored draws are
        distinct tasks, and the warm-up visits each distinct task once. The uniform share
        still draws entries, so it samples tasks in proportion to their copies, as
        :func:`uniform` does; ``half_life`` counts passes over the distinct tasks.
        ``None``: every entry is its own task. Studies pass it as config context
        (``entry_task=...``).
      axis_name: the mesh axis along which the per-task state is split under ``shard_map``
        (as for :func:`difficulty_pools`; the engine does this for
        ``Env(..., shard_tasks=True)``). Draws are identical to the unsplit sampler's; a
        call needs one small all-gather (each device's top ``num``).

    Returns:
      A :class:`~curriculax.TaskSampler`. Metrics: ``pool/unseen`` (never dispatched),
      ``pool/unsolved`` / ``pool/learnable`` / ``pool/solved`` (seen tasks whose posterior
      mean is ``< 0.2``, in between, ``> 0.8``, with forgetting applied), ``mean_pass_rate``
      (posterior mean over seen tasks), ``clock`` (groups observed).

    Raises:
      ValueError or TypeError: naming the bad argument and value.

    Example:
      >>> s = learnability(1000)
      >>> ids, state = s.sample(s.init(jax.random.key(0)), jax.random.key(1), 8)
      >>> ids.shape
      (8,)
    """
    n = check_num_tasks(num_tasks)
    shared = entry_task is not None
    ent = _entries.entries(entry_task, n, "learnability")
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
        entry_rep=ent.rep if shared else None,
        num_distinct=ent.num_distinct,
    )

    def init(key: jax.Array) -> LearnabilityState:
        del key
        return LearnabilityState(
            successes=jnp.zeros((n,), jnp.float32),
            failures=jnp.zeros((n,), jnp.float32),
            updated=jnp.zeros((n,), jnp.int32),
            seen=jnp.zeros((n,), bool),
            clock=_counters.zero(),
        )

    def sample(state: LearnabilityState, key: jax.Array, num: int):
        return pool.draw(state, partial(pool.closeness, state), key, num)

    def observe(state: LearnabilityState, results: GroupResults) -> LearnabilityState:
        if results.task_ids.shape[0] == 0:
            return state
        return state._replace(**pool.update(state, results)[0])

    def metrics(state: LearnabilityState) -> dict[str, jax.Array]:
        n_local = state.seen.shape[0]
        start = _shard.offset(_shard.bound(axis_name), n_local)
        return pool.metrics(state, state.seen & _entries.local_reps(ent, start, n_local))

    return TaskSampler(
        init, sample, observe, metrics, num_tasks=n, entry_task=ent.rep if shared else None
    )
