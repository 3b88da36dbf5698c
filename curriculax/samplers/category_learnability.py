"""A bandit over categories that picks the tasks inside each by learnability."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import _counters, _entries, _random, _topk
from curriculax._checks import check_num, check_num_tasks
from curriculax._groups import draw_groups
from curriculax._types import GroupResults, TaskSampler
from curriculax.samplers.category_bandit import (
    DEFAULT_NOISE_BATCHES,
    DEFAULT_NOISE_RELIABILITY,
    DEFAULT_TEMPERATURE,
    CategoryBanditState,
    _categories,
    category_bandit,
    category_probabilities,
)
from curriculax.samplers.learnability import (
    _SALT_NEW,
    _SALT_SETTLE,
    _SALT_TIE,
    LearnabilityState,
    _beta_pool,
)


class CategoryLearnabilityState(NamedTuple):
    """State of :func:`category_learnability`.

    Attributes:
      bandit: the category bandit's state (:class:`~curriculax.samplers.CategoryBanditState`,
        ``C`` categories).
      tasks: the per-task pass-rate posterior
        (:class:`~curriculax.samplers.LearnabilityState`, ``N`` entries).
    """

    bandit: CategoryBanditState
    tasks: LearnabilityState


def category_learnability(
    num_tasks: int,
    categories: object,
    *,
    reward: str = "advantage_progress",
    step_size: float = 0.3,
    temperature: float | None = None,
    epsilon: float = 0.1,
    target: float = 0.5,
    draw: str = "thompson",
    half_life: float | None = 1.0,
    prior: Sequence[float] = (1.0, 1.0),
    success_threshold: float | None = None,
    entry_task: Sequence[int] | None = None,
    noise_batches: int = DEFAULT_NOISE_BATCHES,
    noise_reliability: float = DEFAULT_NOISE_RELIABILITY,
) -> TaskSampler:
    """A category bandit chooses how many tasks each category gets; learnability chooses
    which.

    Each draw picks a category exactly as :func:`category_bandit` does (its ``reward``,
    ``step_size``, ``temperature`` and ``epsilon``; by default the reward robust to coin
    flips, ``"advantage_progress"``), then, where the bandit takes a task uniformly inside
    the category, this sampler takes the category's best tasks by :func:`learnability`'s
    score: unseen tasks of the category first (at random among them), then the tasks whose
    Thompson draw of the pass rate is closest to ``target``. The per-task posterior forgets
    with a half-life in passes over the pool, as learnability's does. Tasks are distinct
    within a call (the bandit hands a category at most as many draws as it has distinct
    tasks while others remain).

    With one category (no labels: ``categories = zeros``) this is learnability without its
    uniform share; with labels that carry no signal the bandit's draws spread over the
    categories and the choice inside each is still learnability's. The floors: the bandit's
    ``epsilon`` over categories; inside a category, Thompson draws and forgetting (a task not
    drawn for a while becomes uncertain and competes again).

    When to use it (the GRPO studies from a warm-started base, 10 seeds: docs/noise.md). With
    labels you trust, on pools where much of the mass is out of reach or noise: it beat
    uniform on hard-skew (2.75x) and on the pool with half its entries coin flips in their own
    category (2.33x, 8% of its draws on them): higher ratios than the robust bandit's (2.44x,
    1.75x; not compared with it directly). It did not
    beat uniform on balanced (1.25x) or the 20% coin-flip pool (1.00x), where the bandit or
    learnability did better. It is not robust to noise the labels hide: with the coin flips
    filed under real levels, learnability's score (highest at a pass rate of 0.5) drew it into
    them and it fell below uniform (0.56x).

    Cost per ``sample``: the bandit's O(num * C * min(C, num) + num), one O(N) pass (decay, Thompson
    draw, score), a gather of the scores into the distinct tasks laid out by category in rows of
    ``ceil(D / C)`` (``D`` distinct tasks; at most about ``2 D`` cells however the categories are
    sized; built once on the host), a ``jax.lax.top_k`` of ``min(num, row)`` along each row (twice:
    the second settles a tie at a row's cut at random), and one sort of those candidates (at most
    about ``2 C num``): O(N + C num log(C num)). ``observe``: O(G K T + C). The per-task state is
    not split over devices.

    Args:
      num_tasks: pool size ``N``.
      categories: ``int[N]`` each entry's category in ``[0, C)``, as for
        :func:`category_bandit` (with ``entry_task``, each task counts in its first entry's
        category).
      reward, step_size, temperature, epsilon, noise_batches, noise_reliability: the
        bandit's, as for :func:`category_bandit` (``temperature`` None: that reward's
        default).
      target, draw, half_life, prior, success_threshold, entry_task: the per-task
        posterior's, as for :func:`learnability`.

    Returns:
      A :class:`~curriculax.TaskSampler`. Metrics: the bandit's (``entropy``, ``q_max``,
      ``noise/flagged`` and, with at most 32 categories, ``q/<c>``, ``prob/<c>``,
      ``reliability/<c>``, ``noise/<c>``) and learnability's (``pool/unseen``,
      ``pool/unsolved``, ``pool/learnable``, ``pool/solved``, ``mean_pass_rate``, ``clock``).

    Raises:
      ValueError or TypeError: naming the bad argument and value.

    Example:
      >>> levels = np.repeat(np.arange(4), 25)  # 100 tasks, 4 levels
      >>> s = category_learnability(100, levels)
      >>> ids, state = s.sample(s.init(jax.random.key(0)), jax.random.key(1), 8)
    """
    n = check_num_tasks(num_tasks)
    ent = _entries.entries(entry_task, n, "category_learnability")
    shared = entry_task is not None
    # Copies of a task file under their representative's category, so one task has one.
    cats = _categories(categories, n)[ent.rep]
    bandit = category_bandit(
        n,
        cats,
        reward=reward,
        step_size=step_size,
        temperature=temperature,
        epsilon=epsilon,
        noise_batches=noise_batches,
        noise_reliability=noise_reliability,
    )
    temperature = DEFAULT_TEMPERATURE[reward] if temperature is None else float(temperature)
    pool = _beta_pool(
        n,
        target=target,
        draw=draw,
        half_life=half_life,
        prior=prior,
        success_threshold=success_threshold,
        uniform_share=0.0,
        unseen_first=True,
        axis_name=None,
        entry_rep=ent.rep if shared else None,
        num_distinct=ent.num_distinct,
        name="category_learnability",
    )

    # The distinct tasks (representatives) by category, in rows of `width` tasks (a category
    # spans ceil(count / width) rows; rows padded with -1): about 2 D cells for D distinct
    # tasks, however the categories are sized.
    num_cats = int(cats.max()) + 1
    reps = np.flatnonzero(ent.is_rep).astype(np.int32)
    counts_np = np.bincount(cats[reps], minlength=num_cats).astype(np.int32)
    nonempty_np = counts_np > 0
    width = -(-reps.size // int(nonempty_np.sum()))
    rows_np = -(-counts_np // width)
    row_start_np = np.cumsum(rows_np) - rows_np
    row_cat_np = np.repeat(np.arange(num_cats), rows_np)
    table_np = np.full((row_cat_np.size, width), -1, np.int32)
    order = reps[np.argsort(cats[reps], kind="stable")]
    member = np.arange(order.size) - np.repeat(np.cumsum(counts_np) - counts_np, counts_np)
    cat_of = np.repeat(np.arange(num_cats), counts_np)
    table_np[row_start_np[cat_of] + member // width, member % width] = order
    all_ids = np.arange(n, dtype=np.int32)

    def init(key: jax.Array) -> CategoryLearnabilityState:
        tasks = LearnabilityState(
            successes=jnp.zeros((n,), jnp.float32),
            failures=jnp.zeros((n,), jnp.float32),
            updated=jnp.zeros((n,), jnp.int32),
            seen=jnp.zeros((n,), bool),
            clock=_counters.zero(),
        )
        return CategoryLearnabilityState(bandit.init(key), tasks)

    def sample(state: CategoryLearnabilityState, key: jax.Array, num: int):
        num = check_num(num)
        if state.tasks.seen.shape[0] != n:
            raise ValueError(
                f"category_learnability keeps its per-task state whole ({n} tasks), got "
                f"{state.tasks.seen.shape[0]}: it does not split over devices "
                "(use Env(..., shard_tasks=False))"
            )
        if num == 0:
            return jnp.zeros((0,), jnp.int32), state
        k_groups, k_score = jax.random.split(key)
        uniforms = jax.random.uniform(k_groups, (num_cats + 1, num))
        probs = category_probabilities(state.bandit.q, nonempty_np, temperature, epsilon)
        counts = jnp.asarray(counts_np)
        labels, ranks, drawable = draw_groups(uniforms, probs, counts)
        # Fewer distinct tasks than positions: repeat the distinct draws in order.
        pos = jnp.arange(num, dtype=jnp.int32)
        source = jnp.where(drawable < num, pos % jnp.maximum(drawable, 1), pos)
        labels, ranks = labels[source], ranks[source]

        # Learnability's keys: unseen tasks in [2, 3), the others by score in [1, 2).
        word = jax.random.bits(k_score, (), jnp.uint32)
        ids = jnp.asarray(all_ids)
        keys = _topk.ranking_key(pool.closeness(state.tasks, word, ids), word, ids, _SALT_TIE)
        keys = jnp.where(state.tasks.seen, keys, 2.0 + _random.unit(word, ids, _SALT_NEW))
        # Each row's best k, then the candidates of each category (its rows' blocks, which
        # lie side by side) ranked: the r-th of category c is its r-th best task.
        k = min(num, width)
        table = jnp.asarray(table_np)
        rows = jnp.where(table >= 0, keys[jnp.maximum(table, 0)], -1.0)
        # the barrier keeps XLA from sorting whole rows to slice values (_topk.top_k)
        values, columns = jax.lax.optimization_barrier(jax.lax.top_k(rows, k))
        # equal keys (scores a posterior mean ties) at random, not by column (_topk.settle)
        again = _random.unit(word, jnp.maximum(table, 0), _SALT_SETTLE)
        again = jnp.where(rows == values[:, -1:], 1.0 + again, 0.0)
        columns = _topk.settle(values, columns, jax.lax.top_k(again, k)[1])
        candidates = jnp.take_along_axis(table, columns, axis=1).reshape(-1)
        # A category's rows merged by key, equal keys by the same hashed draw that settled
        # them inside a row (lexsort keeps row order among equal keys: a tie went to the
        # category's first row, its lowest ids)
        tied = _random.unit(word, jnp.maximum(candidates, 0), _SALT_SETTLE)
        order = jnp.lexsort((-tied, -values.reshape(-1), np.repeat(row_cat_np, k)))
        ranked = candidates[order]
        picked = ranked[jnp.asarray(row_start_np * k)[labels] + ranks]
        per_cat = jnp.zeros((num_cats,), jnp.int32).at[labels].add(1)
        bandit_state = state.bandit._replace(draws=_counters.add(state.bandit.draws, per_cat))
        tasks = state.tasks._replace(seen=state.tasks.seen.at[picked].set(True))
        return picked.astype(jnp.int32), CategoryLearnabilityState(bandit_state, tasks)

    def observe(
        state: CategoryLearnabilityState, results: GroupResults
    ) -> CategoryLearnabilityState:
        if results.task_ids.shape[0] == 0:
            return state
        return CategoryLearnabilityState(
            bandit.observe(state.bandit, results),
            state.tasks._replace(**pool.update(state.tasks, results)[0]),
        )

    def metrics(state: CategoryLearnabilityState) -> dict[str, jax.Array]:
        return {
            **bandit.metrics(state.bandit),
            **pool.metrics(state.tasks, state.tasks.seen & jnp.asarray(ent.is_rep)),
        }

    return TaskSampler(
        init, sample, observe, metrics, num_tasks=n, entry_task=ent.rep if shared else None
    )
