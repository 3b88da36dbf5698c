"""Learnability whose prior for each task is its category's pass rate (a hierarchical Beta
model): per-task scores where tasks have been measured, the category's where they have not."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import _counters, _entries, _shard
from curriculax._checks import check_num_tasks, number
from curriculax._types import GroupResults, TaskSampler
from curriculax.samplers.category_bandit import _categories
from curriculax.samplers.learnability import LearnabilityState, _beta_pool

# Categories up to this many get a metric each.
_MAX_CATEGORY_METRICS = 32


def category_pass_rates(
    pool, state: LearnabilityState, cats_local: jax.Array, num_cats: int, is_rep: jax.Array
) -> jax.Array:
    """``f32[C]`` each category's pooled pass rate: ``(a0 + S_c) / (a0 + b0 + S_c + F_c)``,
    ``S_c`` / ``F_c`` the decayed successes / failures of the category's tasks (summed over
    the devices of the pool's axis). O(N + C)."""
    a, b = pool.posterior(state)
    wins = jnp.where(is_rep, a - pool.a0, 0.0)
    losses = jnp.where(is_rep, b - pool.b0, 0.0)
    axis = _shard.bound(pool.axis_name)
    s = _shard.psum(jax.ops.segment_sum(wins, cats_local, num_segments=num_cats), axis)
    f = _shard.psum(jax.ops.segment_sum(losses, cats_local, num_segments=num_cats), axis)
    return (pool.a0 + s) / (pool.a0 + pool.b0 + s + f)


def hierarchical_learnability(
    num_tasks: int,
    categories: object = None,
    *,
    strength: float = 8.0,
    target: float = 0.5,
    draw: str = "thompson",
    half_life: float | None = 1.0,
    prior: Sequence[float] = (1.0, 1.0),
    success_threshold: float | None = None,
    uniform_share: float = 0.05,
    unseen_first: bool = False,
    entry_task: Sequence[int] | None = None,
    axis_name: str | None = None,
) -> TaskSampler:
    """:func:`learnability` whose prior for each task is its category's pass rate.

    A task's posterior is ``Beta(strength * m_c + s_i, strength * (1 - m_c) + f_i)``: its own
    decayed successes and failures (as :func:`learnability` keeps them) on top of ``strength``
    pseudo-rollouts at its category's pooled pass rate ``m_c = (a0 + S_c) / (a0 + b0 + S_c +
    F_c)`` (``S_c``, ``F_c``: the decayed evidence of all the category's tasks; the flat prior
    ``(a0, b0)`` enters through the category's rate, not per task). Draws are learnability's:
    the tasks whose Thompson draw lies closest to ``target``, a uniform share, distinct within a
    call.

    What the category adds. A task nobody has measured (or whose evidence has faded) is
    scored by what its category's tasks showed, not by the flat prior: in a category out of
    reach (pass rate near 0) a task draws near 0 and is left alone, so the sampler does not
    visit every task of the unreachable mass once (``unseen_first`` is off by default: the
    category's rate replaces the warm-up); in a category at the frontier it draws near the
    frontier's rate. (A first version kept the flat prior per task as well, ``Beta(a0 +
    strength * m_c + s_i, ...)``: a task of a category at 0 then kept a mean near ``a0 / (a0 +
    b0 + strength)`` and a tail, and over the hundreds of such tasks of a skewed pool the
    largest Thompson draws won most top-k slots: from the base on hard-skew it put 76% of its
    draws on the unreachable levels, as learnability does. docs/noise.md has that run.)
    Where a task has been measured, its own evidence soon outweighs the ``strength``
    pseudo-rollouts, so the choice is per-task as in :func:`learnability`. With no categories
    (``None``: one category, the whole pool) or categories that carry no signal, every
    category's rate is the pool's, and this is learnability with the pool's pass rate as its
    prior: the fallback when labels are absent or wrong.

    Measured (the GRPO studies, docs/noise.md, "The robust preset"; inside
    ``reward_consistency`` with its gate, 10 seeds): from the base, with level labels, it
    matched learnability's median where every level is learnable (balanced, easy-skew) and
    category learnability's on hard-skew (2.75x uniform); from scratch on hard-skew with level
    labels it reached the target on 9/10 seeds (uniform 5/10, learnability 1/10, the category
    bandit 10/10). Without labels it is learnability with another prior, no better: on hard-skew
    from the base 1.22x uniform (learning progress 1.57x); from scratch it reached the target on
    fewer seeds than uniform (hard-skew 1/10 against 5/10, balanced 5/10 against 8/10), and a
    larger ``uniform_share`` is not the fix there (0.25 and 0.5 on the tuning seeds: hard-skew
    0/10 each against uniform's 3/10, balanced 6/10 against 9/10), while from the base with
    level labels it gave up most of the gain (median 8,320 rollouts against 5,120).

    Cost per ``sample``: learnability's O(N + num log N) plus one O(N + C) segment sum (and,
    split over devices, one ``psum`` of ``2 C`` numbers). ``observe``: O(G K). Split over
    devices, the category sums are float32 sums added in another order than on one device,
    so they can differ in the last bits and a near-tie of two tasks' draws can break the
    other way: unlike :func:`learnability`'s, its split draws match the unsplit sampler's
    only up to such ties (in a check at N = 4096 on 4 devices, 3 of 128 positions in one
    call of 20 swapped).

    Args:
      num_tasks: pool size ``N``.
      categories: ``int[N]`` each entry's category in ``[0, C)`` (e.g. its difficulty level),
        or None (one category). With ``entry_task``, a task counts in its first entry's
        category.
      strength: pseudo-rollouts the category's pass rate is worth in a task's posterior
        (> 0; 8: one group of 8 rollouts).
      target, draw, half_life, prior, success_threshold, uniform_share, unseen_first,
        entry_task, axis_name: as for :func:`learnability` (``prior`` is also the prior of
        each category's pooled rate).

    Returns:
      A :class:`~curriculax.TaskSampler` whose state is a
      :class:`~curriculax.samplers.LearnabilityState`. Metrics: learnability's and, with at
      most 32 categories, ``category_pass_rate/<c>``.

    Raises:
      ValueError or TypeError: naming the bad argument and value.

    Example:
      >>> levels = np.repeat(np.arange(4), 25)  # 100 tasks, 4 levels
      >>> s = hierarchical_learnability(100, levels)
      >>> ids, state = s.sample(s.init(jax.random.key(0)), jax.random.key(1), 8)
    """
    n = check_num_tasks(num_tasks)
    shared = entry_task is not None
    ent = _entries.entries(entry_task, n, "hierarchical_learnability")
    cats_np = np.zeros((n,), np.int32) if categories is None else _categories(categories, n)
    cats_np = cats_np[ent.rep]  # copies of a task under their representative's category
    num_cats = int(cats_np.max()) + 1
    strength = number(strength, "strength")
    if not (strength > 0 and np.isfinite(strength)):
        raise ValueError(f"strength must be a finite number > 0, got {strength}")
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
        name="hierarchical_learnability",
    )

    def local(values: np.ndarray, start: jax.Array, n_local: int) -> jax.Array:
        return jax.lax.dynamic_slice_in_dim(jnp.asarray(values), start, n_local)

    def rates(state: LearnabilityState) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(f32[C] category rates, i32[n_local] local categories, bool[n_local] reps)``."""
        n_local = state.seen.shape[0]
        start = _shard.offset(_shard.bound(axis_name), n_local)
        cats = local(cats_np, start, n_local)
        is_rep = _entries.local_reps(ent, start, n_local)
        return category_pass_rates(pool, state, cats, num_cats, is_rep), cats, is_rep

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
        rate, cats, _ = rates(state)
        m = rate[cats]
        # The task's prior is the category's pseudo-rollouts alone: the flat prior's (a0, b0),
        # which pool.posterior adds, would keep every task of a category out of reach at a
        # mean of a0 / (a0 + b0 + f) and a tail that, over many such tasks, wins top-k slots.
        extra = (strength * m - pool.a0, strength * (1.0 - m) - pool.b0)
        return pool.draw(state, partial(pool.closeness, state, extra=extra), key, num)

    def observe(state: LearnabilityState, results: GroupResults) -> LearnabilityState:
        if results.task_ids.shape[0] == 0:
            return state
        return state._replace(**pool.update(state, results)[0])

    def metrics(state: LearnabilityState) -> dict[str, jax.Array]:
        rate, _, is_rep = rates(state)
        out = pool.metrics(state, state.seen & is_rep)
        if num_cats <= _MAX_CATEGORY_METRICS:
            for c in range(num_cats):
                out[f"category_pass_rate/{c}"] = rate[c]
        return out

    return TaskSampler(
        init, sample, observe, metrics, num_tasks=n, entry_task=ent.rep if shared else None
    )
