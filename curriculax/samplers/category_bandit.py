"""A bandit over task categories (difficulty levels, families): SEC and learning progress."""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import _counters, _permute
from curriculax._checks import check_num, check_num_tasks
from curriculax._groups import draw_groups
from curriculax._types import GroupResults, TaskSampler

REWARDS = ("advantage", "progress")
DEFAULT_TEMPERATURE = {"advantage": 0.2, "progress": 0.05}
_PER_CATEGORY_METRICS = 32


class CategoryBanditState(NamedTuple):
    """State of :func:`category_bandit` (nothing per task: ``C`` categories).

    Attributes:
      q: ``f32[C]`` value of each category.
      fast: ``f32[C]`` fast moving average of the category's mean reward (``progress``).
      slow: ``f32[C]`` slow moving average of the same.
      observed: ``bool[C]`` the category has had a group with a valid rollout.
      draws: ``i32[C]`` tasks drawn from each category so far.
    """

    q: jax.Array
    fast: jax.Array
    slow: jax.Array
    observed: jax.Array
    draws: jax.Array


def _rate(value: object, name: str, *, zero_ok: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, got {value!r}")
    ok = 0.0 <= value <= 1.0 if zero_ok else 0.0 < value <= 1.0
    if not ok:
        bound = "[0, 1]" if zero_ok else "(0, 1]"
        raise ValueError(f"{name} must lie in {bound}, got {value}")
    return float(value)


def _categories(categories: object, n: int) -> np.ndarray:
    if categories is None:
        raise ValueError(
            "category_bandit needs categories: an int array of shape [num_tasks] (the category "
            "of each task, e.g. its difficulty level). From a config, pass it as context: "
            "cx.curriculum_from_config(config, num_tasks, categories=levels)"
        )
    c = np.asarray(categories)
    if c.shape != (n,):
        raise ValueError(f"categories must have shape [num_tasks={n}], got {c.shape}")
    whole = np.issubdtype(c.dtype, np.floating) and bool(np.all(c == np.round(c)))
    if not (np.issubdtype(c.dtype, np.integer) or whole):
        raise TypeError(f"categories must be integers, got dtype {c.dtype}")
    c = c.astype(np.int64)
    if c.min() < 0:
        raise ValueError(f"categories must be >= 0, got {int(c.min())} (task {int(c.argmin())})")
    if c.max() >= 2**16:
        raise ValueError(f"at most 65536 categories, got a category {int(c.max())}")
    return c.astype(np.int32)


def category_bandit(
    num_tasks: int,
    categories: object,
    *,
    reward: str = "advantage",
    step_size: float = 0.3,
    temperature: float | None = None,
    epsilon: float = 0.1,
    fast: float = 0.5,
    slow: float = 0.05,
) -> TaskSampler:
    """A non-stationary bandit over task categories; a task uniformly inside the chosen one.

    Each category ``c`` has a value ``Q_c``. A batch of results gives every category it
    touches a reward ``r_c`` and ``Q_c <- step_size * r_c + (1 - step_size) * Q_c`` (categories
    not in the batch keep their value). Each draw picks a category with probability
    ``(1 - epsilon) * softmax(Q / temperature)_c + epsilon / C'`` over the ``C'`` non-empty
    categories, then a task uniformly inside it; a call hands out distinct tasks while the
    chosen categories have enough of them (an exhausted category drops out of that call).

    Rewards:

    - ``"advantage"`` (SEC, arXiv 2505.14970): the mean ``|advantage|`` over the category's
      groups in the batch (valid rollouts, trainable positions): the learning signal a
      category gives now. Fooled by tasks whose reward is a coin flip (their advantages are
      large and teach nothing).
    - ``"progress"`` (TSCL, arXiv 1707.00183): ``|fast EMA - slow EMA|`` of the category's
      mean reward: how fast it is changing. Robust to unlearnable and coin-flip categories
      (their rate does not move); slow to start (zero until rates move).

    Temperature: the two rewards live on different scales (|advantage| of a mixed GRPO group
    ~0.5-1; a learning-progress gap ~0.01-0.2), so the default depends on ``reward`` (0.2
    for advantage, 0.05 for progress): a category with clear signal is then tens of times
    likelier than one with none.

    Cost: ``sample`` O(num * C^2 + num) (a per-call draw over ``C`` categories that retires
    exhausted ones, then a task by a keyed permutation inside the category: no pass over
    the pool); ``observe`` O(G K T + C). The per-category task index is built once, at
    construction (O(N log N) on the host).

    Args:
      num_tasks: pool size ``N``.
      categories: ``int[N]`` the category of each task, in ``[0, C)`` (``C = max + 1``; an
        id with no task is never drawn). From a config, give it as context:
        ``cx.curriculum_from_config(config, N, categories=levels)``.
      reward: ``"advantage"`` or ``"progress"``.
      step_size: ``a`` in (0, 1].
      temperature: softmax temperature over ``Q`` (> 0); None: 0.2 for advantage, 0.05 for
        progress.
      epsilon: share of draws uniform over the non-empty categories, in [0, 1].
      fast: rate of the fast moving average (progress), in (0, 1].
      slow: rate of the slow moving average (progress), in (0, fast).

    Returns:
      A :class:`~curriculax.TaskSampler` (no per-task state). Metrics: ``entropy`` (of the
      category distribution, nats), ``q_max``, and with at most 32 categories
      ``q/<c>`` and ``prob/<c>`` per category.

    Example:
      >>> levels = np.repeat(np.arange(4), 25)  # 100 tasks, 4 levels
      >>> s = category_bandit(100, levels)
      >>> ids, state = s.sample(s.init(jax.random.key(0)), jax.random.key(1), 8)
    """
    n = check_num_tasks(num_tasks)
    cats = _categories(categories, n)
    if reward not in REWARDS:
        raise ValueError(f"reward must be one of {list(REWARDS)}, got {reward!r}")
    step_size = _rate(step_size, "step_size", zero_ok=False)
    epsilon = _rate(epsilon, "epsilon", zero_ok=True)
    fast = _rate(fast, "fast", zero_ok=False)
    slow = _rate(slow, "slow", zero_ok=False)
    if not slow < fast:
        raise ValueError(f"slow ({slow}) must be below fast ({fast})")
    if temperature is None:
        temperature = DEFAULT_TEMPERATURE[reward]
    if isinstance(temperature, bool) or not isinstance(temperature, int | float):
        raise TypeError(f"temperature must be a number, got {temperature!r}")
    if not (temperature > 0 and math.isfinite(temperature)):
        raise ValueError(f"temperature must be finite and > 0, got {temperature}")
    temperature = float(temperature)

    num_cats = int(cats.max()) + 1
    counts_np = np.bincount(cats, minlength=num_cats).astype(np.int32)
    order_np = np.argsort(cats, kind="stable").astype(np.int32)
    starts_np = (np.cumsum(counts_np) - counts_np).astype(np.int32)
    nonempty_np = counts_np > 0
    num_nonempty = int(nonempty_np.sum())

    def probabilities(q: jax.Array) -> jax.Array:
        nonempty = jnp.asarray(nonempty_np)
        logits = jnp.where(nonempty, q / temperature, -jnp.inf)
        soft = jax.nn.softmax(logits)
        return (1.0 - epsilon) * soft + jnp.where(nonempty, epsilon / num_nonempty, 0.0)

    def init(key: jax.Array) -> CategoryBanditState:
        del key
        # Separate buffers: a donated state must not hold one buffer twice.
        return CategoryBanditState(
            q=jnp.zeros((num_cats,), jnp.float32),
            fast=jnp.zeros((num_cats,), jnp.float32),
            slow=jnp.zeros((num_cats,), jnp.float32),
            observed=jnp.zeros((num_cats,), bool),
            draws=jnp.zeros((num_cats,), jnp.int32),
        )

    def sample(state: CategoryBanditState, key: jax.Array, num: int):
        num = check_num(num)
        if num == 0:
            return jnp.zeros((0,), jnp.int32), state
        k_groups, k_pick = jax.random.split(key)
        uniforms = jax.random.uniform(k_groups, (num_cats + 1, num))
        counts = jnp.asarray(counts_np)
        labels, ranks, drawable = draw_groups(uniforms, probabilities(state.q), counts)
        # Fewer distinct tasks than positions (tiny pool, or tiny chosen categories): repeat
        # the distinct draws in order.
        pos = jnp.arange(num, dtype=jnp.int32)
        source = jnp.where(drawable < num, pos % jnp.maximum(drawable, 1), pos)
        labels, ranks = labels[source], ranks[source]
        pick_word = _permute.key_bits(k_pick)
        member = _permute.permute(ranks, counts[labels], _permute.round_keys(pick_word, labels))
        ids = jnp.asarray(order_np)[jnp.asarray(starts_np)[labels] + member]
        per_cat = jnp.zeros((num_cats,), jnp.int32).at[labels].add(1)
        draws = _counters.add(state.draws, per_cat)
        return ids.astype(jnp.int32), state._replace(draws=draws)

    def observe(state: CategoryBanditState, results: GroupResults) -> CategoryBanditState:
        if results.task_ids.shape[0] == 0:
            return state
        ids = results.task_ids.astype(jnp.int32)
        in_pool = (ids >= 0) & (ids < n)
        valid = results.valid.astype(bool)
        count = jnp.sum(valid, axis=1)
        use = in_pool & (count > 0)
        cat = jnp.where(use, jnp.asarray(cats)[jnp.clip(ids, 0, n - 1)], num_cats)
        if reward == "advantage":
            mask = results.token_mask.astype(bool) & valid[:, :, None]
            total = jnp.sum(jnp.where(mask, jnp.abs(results.advantages), 0.0), axis=(1, 2))
            signal = total / jnp.maximum(jnp.sum(mask, axis=(1, 2)), 1).astype(jnp.float32)
        else:
            total = jnp.sum(jnp.where(valid, results.rewards, 0.0), axis=1)
            signal = total / jnp.maximum(count, 1).astype(jnp.float32)
        groups = jnp.zeros((num_cats,), jnp.float32).at[cat].add(1.0, mode="drop")
        sums = jnp.zeros((num_cats,), jnp.float32).at[cat].add(signal, mode="drop")
        touched = groups > 0
        batch = sums / jnp.maximum(groups, 1.0)
        if reward == "advantage":
            r = batch
            fast_avg, slow_avg = state.fast, state.slow
        else:
            first = touched & ~state.observed
            fast_avg = jnp.where(touched, fast * batch + (1 - fast) * state.fast, state.fast)
            slow_avg = jnp.where(touched, slow * batch + (1 - slow) * state.slow, state.slow)
            fast_avg = jnp.where(first, batch, fast_avg)
            slow_avg = jnp.where(first, batch, slow_avg)
            r = jnp.abs(fast_avg - slow_avg)
        q = jnp.where(touched, step_size * r + (1 - step_size) * state.q, state.q)
        return state._replace(
            q=q.astype(jnp.float32),
            fast=fast_avg.astype(jnp.float32),
            slow=slow_avg.astype(jnp.float32),
            observed=state.observed | touched,
        )

    def metrics(state: CategoryBanditState) -> dict[str, jax.Array]:
        p = probabilities(state.q)
        entropy = -jnp.sum(jnp.where(p > 0, p * jnp.log(jnp.where(p > 0, p, 1.0)), 0.0))
        out = {"entropy": entropy, "q_max": jnp.max(jnp.where(nonempty_np, state.q, -jnp.inf))}
        if num_cats <= _PER_CATEGORY_METRICS:
            for c in range(num_cats):
                out[f"q/{c}"] = state.q[c]
                out[f"prob/{c}"] = p[c]
        return out

    return TaskSampler(init, sample, observe, metrics, num_tasks=n)
