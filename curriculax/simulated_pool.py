"""A simulated task pool with known pass rates, for checking what a sampler concentrates on.

Each task has a true pass rate, and a group's rewards are Bernoulli draws of it. Most tasks
are impossible (rate 0) or trivial (rate 1) and give zero-variance groups; a few are
informative (rate in [0.2, 0.8], frozen: the policy does not learn them); some impossible
tasks become learnable at ``switch_step`` (the "emerging" tasks, as when a policy's skill
reaches a new level). A good sampler puts its draws on the informative tasks and finds the
emerging ones soon after the switch.

Noisy pools add two kinds: **coin flips** (rate ``coin_p`` whatever the policy does: a broken
reference or verifier, the "noisy TV") and **learning** tasks, which the policy learns while it
trains on them: each draw raises the task's rate by ``1 / learn_draws`` (from a start in
[0.1, 0.3]) until it reaches 1. A coin flip's groups have the most reward variance of any task
and teach nothing; a sampler that seeks learning rather than variance prefers the learning
tasks. Everything runs as one compiled ``lax.scan``, ``vmap``-ped over seeds, in seconds on a
CPU.

Example:
  >>> import jax
  >>> import curriculax as cx
  >>> from curriculax import simulated_pool as sp
  >>> pool = sp.make_pool(1024, switch_step=50)
  >>> trace = sp.run(cx.samplers.uniform(1024), pool, steps=100, num=32,
  ...                keys=jax.random.split(jax.random.key(0), 2))
  >>> sp.summarize(pool, trace)["informative_share"].shape
  (2,)
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax._checks import check_num_tasks, int_at_least, number
from curriculax._types import GroupResults, TaskDraw, TaskSampler

KINDS = ("impossible", "trivial", "informative", "emerging", "coin_flip", "learning")
IMPOSSIBLE, TRIVIAL, INFORMATIVE, EMERGING, COIN_FLIP, LEARNING = range(6)
# Shares may add up to 1 only up to float rounding (0.05 + 0.55 + 0.3 + 0.1 is 1.0000000000000002).
_SHARE_TOLERANCE = 1e-9


class SimulatedPool(NamedTuple):
    """True pass rates of a simulated pool.

    Attributes:
      before: ``f32[N]`` pass rate of each task before ``switch_step``.
      after: ``f32[N]`` pass rate from ``switch_step`` on.
      kind: ``i32[N]`` index into :data:`KINDS`.
      switch_step: ``i32[]`` the step at which emerging tasks become learnable.
      gain: ``f32[N]`` pass-rate gain per draw of the task (learning tasks; 0 elsewhere;
        ``None``: 0 everywhere). A task's rate is ``clip(rate + gain * draws so far, 0, 1)``.
    """

    before: jax.Array
    after: jax.Array
    kind: jax.Array
    switch_step: jax.Array
    gain: jax.Array | None = None


class SimulationTrace(NamedTuple):
    """What a sampler did on a simulated pool (leading axis: seeds, when ``vmap``-ped).

    Attributes:
      draws: ``i32[S, steps, 6]`` draws per kind (:data:`KINDS`) at each step.
      informative: ``i32[S, steps]`` draws on a task whose current rate lies strictly
        between 0 and 1, whatever its kind: informative tasks, emerging ones after the
        switch, coin flips, and learning tasks until their rate reaches 1.
      first_found: ``i32[S, N]`` first step at or after the switch at which each task was
        drawn (``steps`` if never).
      task_draws: ``i32[S, N]`` draws of each task over the run.
      open_learning: ``i32[S, steps]`` learning tasks whose rate is still below 1 at the step.
      open_learning_draws: ``i32[S, steps]`` draws on those tasks at the step.
      state: the sampler's final state (leading axis ``S``), e.g. for its diagnostics.
    """

    draws: jax.Array
    informative: jax.Array
    first_found: jax.Array
    task_draws: jax.Array
    open_learning: jax.Array
    open_learning_draws: jax.Array
    state: Any = None


def make_pool(
    num_tasks: int,
    *,
    trivial: float = 0.3,
    informative: float = 0.05,
    emerging: float = 0.05,
    switch_step: int = 100,
    seed: int = 0,
    coin_flip: float = 0.0,
    learning: float = 0.0,
    coin_p: float = 0.5,
    learn_draws: int = 40,
) -> SimulatedPool:
    """A pool of ``num_tasks`` tasks in the given shares (the rest impossible), shuffled.

    Each kind gets ``round(num_tasks * share)`` tasks (fewer where rounding up would overfill
    the pool). Shares that add up to 1 (within 1e-9) leave no impossible task: the counts are
    then handed out by largest remainder, so they add up to ``num_tasks``.

    Informative tasks have a rate uniform in [0.2, 0.8]; emerging tasks have rate 0 before
    ``switch_step`` and a rate uniform in [0.2, 0.8] from then on. Coin flips have rate
    ``coin_p`` throughout; learning tasks start at a rate uniform in [0.1, 0.3] and gain
    ``1 / learn_draws`` per draw (so ``0.7 * learn_draws`` to ``0.9 * learn_draws`` draws
    learn one).
    """
    n = check_num_tasks(num_tasks)
    shares = {
        "trivial": trivial,
        "informative": informative,
        "emerging": emerging,
        "coin_flip": coin_flip,
        "learning": learning,
    }
    for name, share in shares.items():
        shares[name] = number(share, name)  # numpy scalars included; a TypeError naming it
        if not 0 <= shares[name] <= 1:
            raise ValueError(f"{name} must be a share in [0, 1], got {share!r}")
    total = math.fsum(shares.values())
    if total > 1.0 + _SHARE_TOLERANCE:
        raise ValueError(f"the shares {shares} add up to more than 1: {total!r}")
    coin_p = number(coin_p, "coin_p")
    if not 0.0 < coin_p < 1.0:
        raise ValueError(f"coin_p must lie strictly between 0 and 1, got {coin_p!r}")
    switch_step = int_at_least(switch_step, "switch_step", 0)
    learn_draws = int_at_least(learn_draws, "learn_draws")
    seed = int_at_least(seed, "seed", 0)  # None would draw another pool each call
    rng = np.random.default_rng(seed)
    labels = [TRIVIAL, INFORMATIVE, EMERGING, COIN_FLIP, LEARNING]
    exact = [n * share for share in shares.values()]
    if total >= 1.0 - _SHARE_TOLERANCE:  # no impossible task was asked for: none is made
        counts = _largest_remainder(exact, n)
    else:
        counts = [round(x) for x in exact]
        while sum(counts) > n:  # rounded up past the pool (0.25 of 6 is 2): take back the most
            i = max(range(len(counts)), key=lambda j: counts[j] - exact[j])
            counts[i] -= 1
    kind = np.full(n, IMPOSSIBLE, np.int32)
    kind[: sum(counts)] = np.repeat(labels, counts)
    kind = rng.permutation(kind)
    rates = rng.uniform(0.2, 0.8, n).astype(np.float32)
    before = np.where(kind == TRIVIAL, 1.0, np.where(kind == INFORMATIVE, rates, 0.0))
    before = np.where(kind == COIN_FLIP, coin_p, before)
    # Drawn after the other rates so pools without learning tasks stay as they were.
    start = rng.uniform(0.1, 0.3, n).astype(np.float32)
    before = np.where(kind == LEARNING, start, before)
    after = np.where(kind == EMERGING, rates, before)
    gain = np.where(kind == LEARNING, 1.0 / learn_draws, 0.0)
    return SimulatedPool(
        jnp.asarray(before, jnp.float32),
        jnp.asarray(after, jnp.float32),
        jnp.asarray(kind),
        jnp.asarray(switch_step, jnp.int32),
        jnp.asarray(gain, jnp.float32),
    )


def _largest_remainder(exact: list[float], total: int) -> list[int]:
    """Whole counts adding up to ``total``: the floors of ``exact`` (which adds up to
    ``total`` up to rounding), then one more each for the largest remainders, first kinds
    first among ties (a share of 0 gets none)."""
    counts = [math.floor(x) for x in exact]
    order = sorted(range(len(exact)), key=lambda j: counts[j] - exact[j])  # stable: ties in order
    for j in order[: max(total - sum(counts), 0)]:
        counts[j] += 1
    return counts


def _results(
    ids: jax.Array, rates: jax.Array, coin: jax.Array, key: jax.Array, group_size: int
) -> GroupResults:
    """Bernoulli groups with GRPO (mean-centred, std-scaled) sequence-level advantages.

    Answers: a task's rollouts give one of two answers. A real task's reward is a function of
    the answer (the answer id is the reward: the right answer or one wrong one); a coin flip's
    (``coin: bool[G]``) answer is drawn apart from its reward, so its groups can contradict
    themselves (:func:`curriculax.samplers.contradicting_groups`).
    """
    shape = (ids.shape[0], group_size)
    rewards = (jax.random.uniform(key, shape) < rates[:, None]).astype(jnp.float32)
    centred = rewards - rewards.mean(axis=1, keepdims=True)
    std = rewards.std(axis=1, keepdims=True)
    adv = jnp.where(std > 0, centred / jnp.maximum(std, 1e-6), 0.0)
    ones = jnp.ones(rewards.shape, bool)
    drawn = jax.random.bernoulli(jax.random.fold_in(key, 1), 0.5, shape)
    answers = jnp.where(coin[:, None], drawn, rewards > 0).astype(jnp.int32)
    return GroupResults(ids, rewards, ones, adv[:, :, None], ones[:, :, None], answers)


def run(
    sampler: TaskSampler,
    pool: SimulatedPool,
    *,
    steps: int,
    num: int,
    keys: jax.Array,
    group_size: int = 8,
) -> SimulationTrace:
    """Runs ``sampler`` for ``steps`` steps of ``num`` groups, one seed per key, as one program.

    Each step samples ``num`` tasks, draws their rewards from the pool's current rates, and
    observes them. A learning task's rate at a step counts its draws before that step.

    The pool has rates for its ``N`` tasks only: a sampler must draw ids in ``[0, N)``, and a
    :class:`~curriculax.TaskDraw` only rows with ``from_pool`` set (its payload rows are tasks
    the pool does not hold). The draws are known only inside the compiled run, so a run that
    drew anything else raises a ValueError once it has finished, instead of returning rewards
    of whatever pool task such an id would have been clamped to.
    """
    steps = int_at_least(steps, "steps")
    num = int_at_least(num, "num")
    group_size = int_at_least(group_size, "group_size")
    n = pool.kind.shape[0]
    if sampler.num_tasks is not None and sampler.num_tasks != n:
        # Larger: its ids past the pool are refused only after the run; smaller: it would
        # never draw part of the pool, without a word.
        raise ValueError(
            f"the sampler was built for {sampler.num_tasks} tasks, the simulated pool has {n}; "
            f"build it with num_tasks={n}"
        )
    _check_keys(keys)
    gain = jnp.zeros((n,), jnp.float32) if pool.gain is None else pool.gain
    num_kinds = len(KINDS)

    def one_seed(key):
        init_key, run_key = jax.random.split(key)

        def step(carry, t):
            state, first, counts, bad = carry
            k_sample, k_rewards = jax.random.split(jax.random.fold_in(run_key, t))
            drawn, state = sampler.sample(state, k_sample, num)
            ids = drawn.ids if isinstance(drawn, TaskDraw) else drawn
            outside = (ids < 0) | (ids >= n)
            if isinstance(drawn, TaskDraw):
                outside = outside | ~drawn.from_pool
            base = jnp.where(t >= pool.switch_step, pool.after, pool.before)
            now = jnp.clip(base + gain * counts, 0.0, 1.0)
            rates = now[ids]
            kinds = pool.kind[ids]
            results = _results(ids, rates, kinds == COIN_FLIP, k_rewards, group_size)
            state = sampler.observe(state, results)
            per_kind = jnp.sum(kinds[:, None] == jnp.arange(num_kinds), axis=0, dtype=jnp.int32)
            useful = jnp.sum((rates > 0) & (rates < 1), dtype=jnp.int32)
            open_ = (pool.kind == LEARNING) & (now < 1.0)
            open_draws = jnp.sum(open_[ids], dtype=jnp.int32)
            after = jnp.where(t >= pool.switch_step, t, steps)
            first = first.at[ids].min(after.astype(jnp.int32))
            counts = counts.at[ids].add(1)
            out = (per_kind, useful, jnp.sum(open_, dtype=jnp.int32), open_draws)
            bad = bad + jnp.sum(outside, dtype=jnp.int32)
            return (state, first, counts, bad), out

        first = jnp.full((n,), steps, jnp.int32)
        counts = jnp.zeros((n,), jnp.int32)
        carry = (sampler.init(init_key), first, counts, jnp.zeros((), jnp.int32))
        (state, first, counts, bad), (draws, useful, open_, open_draws) = jax.lax.scan(
            step, carry, jnp.arange(steps, dtype=jnp.int32)
        )
        return SimulationTrace(draws, useful, first, counts, open_, open_draws, state), bad

    trace, bad = jax.jit(jax.vmap(one_seed))(keys)
    outside = int(np.sum(np.asarray(bad, np.int64)))
    if outside:
        raise ValueError(
            f"the sampler drew {outside:,} task(s) the simulated pool does not hold (ids outside "
            f"[0, {n}), or TaskDraw rows with from_pool False): the pool has pass rates for its "
            f"{n} tasks only"
        )
    return trace


def _check_keys(keys) -> None:
    """A ValueError naming ``keys`` unless it holds a leading axis of seeds (one key gives
    vmap's error, which names neither)."""
    typed = jnp.issubdtype(getattr(keys, "dtype", None), jax.dtypes.prng_key)
    if jnp.ndim(keys) < (1 if typed else 2):
        raise ValueError(
            f"keys must hold one key per seed along a leading axis (jax.random.split(key, "
            f"seeds)), got shape {jnp.shape(keys)}"
        )


def summarize(pool: SimulatedPool, trace: SimulationTrace) -> dict[str, np.ndarray]:
    """Per-seed numbers (``f64[S]`` each):

    - ``informative_share``: share of all draws on tasks with a rate strictly in (0, 1);
    - ``informative_share_before``: the same before the switch (``nan`` when the switch is
      at step 0);
    - ``steps_to_find_half``: steps after the switch until half of the emerging tasks were
      drawn at least once (0: found at the switch step itself; ``inf`` if that did not happen
      before the end of the run, i.e. the value is at least ``steps - switch``; ``nan`` in a
      pool without emerging tasks);
    - ``emerging_share_late``: share of the draws in the last quarter of the run (at least
      its last step) on emerging tasks;
    - ``coin_flip_share``: share of all draws on coin flips;
    - ``coin_flip_rate``: draws per coin flip per step (``nan`` without coin flips);
    - ``learning_rate``: draws per learning task still below rate 1, per step, over the steps
      with such a task (``nan`` without one): a sampler that prefers the tasks the policy is
      learning has ``learning_rate > coin_flip_rate``;
    - ``learned_share``: share of the learning tasks whose rate reached 1 by the end (``nan``
      without learning tasks).
    """
    draws = np.asarray(trace.draws, np.float64)
    useful = np.asarray(trace.informative, np.float64)
    first = np.asarray(trace.first_found)
    kind = np.asarray(pool.kind)
    switch = int(pool.switch_step)
    steps = draws.shape[1]
    total = draws.sum(axis=2)
    emerging = first[:, kind == EMERGING]
    if emerging.size:
        half = np.sort(emerging, axis=1)[:, max((emerging.shape[1] + 1) // 2 - 1, 0)]
        found = np.where(half < steps, half - switch, np.inf)
    else:
        found = np.full(draws.shape[0], np.nan)
    late = slice(steps - max(steps // 4, 1), steps)
    before = (
        useful[:, :switch].sum(1) / total[:, :switch].sum(1)
        if switch > 0
        else np.full(draws.shape[0], np.nan)
    )
    return {
        "informative_share": useful.sum(1) / total.sum(1),
        "informative_share_before": before,
        "steps_to_find_half": np.asarray(found, np.float64),
        "emerging_share_late": draws[:, late, EMERGING].sum(1) / total[:, late].sum(1),
        **_noise_summary(pool, trace, draws, total),
    }


def _noise_summary(pool: SimulatedPool, trace: SimulationTrace, draws, total) -> dict:
    kind = np.asarray(pool.kind)
    steps = draws.shape[1]
    num_coin = int(np.sum(kind == COIN_FLIP))
    open_ = np.asarray(trace.open_learning, np.float64)
    open_draws = np.asarray(trace.open_learning_draws, np.float64)
    learning = kind == LEARNING
    gain = np.zeros(kind.shape) if pool.gain is None else np.asarray(pool.gain)
    final = np.asarray(pool.before)[None, :] + gain[None, :] * np.asarray(trace.task_draws)
    # Without learning tasks (or coin flips) their numbers do not exist: nan, not 0.
    nan = np.full(len(draws), np.nan)
    learned = (final[:, learning] >= 1.0).mean(1) if learning.any() else nan
    opened = open_.sum(1)
    return {
        "coin_flip_share": draws[:, :, COIN_FLIP].sum(1) / total.sum(1),
        "coin_flip_rate": draws[:, :, COIN_FLIP].sum(1) / (num_coin * steps) if num_coin else nan,
        "learning_rate": np.where(opened > 0, open_draws.sum(1) / np.maximum(opened, 1.0), nan),
        "learned_share": np.asarray(learned, np.float64),
    }
