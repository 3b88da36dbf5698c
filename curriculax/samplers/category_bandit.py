"""A bandit over task categories (difficulty levels, families): SEC and learning progress."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import _counters, _permute, _progress, _spread
from curriculax._checks import check_num, check_num_tasks, number, unit_interval
from curriculax._groups import draw_groups
from curriculax._types import GroupResults, TaskSampler
from curriculax.samplers import _wrapping

REWARDS = ("advantage", "progress", "advantage_progress")
DEFAULT_TEMPERATURE = {"advantage": 0.2, "progress": 0.05, "advantage_progress": 0.2}
DEFAULT_NOISE_BATCHES = 20
DEFAULT_NOISE_RELIABILITY = 0.5
_PER_CATEGORY_METRICS = 32


class CategoryBanditState(NamedTuple):
    """State of :func:`category_bandit` (nothing per task: ``C`` categories).

    Attributes:
      q: ``f32[C]`` value of each category.
      fast: ``f32[C]`` fast moving average of the category's mean reward (``progress``).
      slow: ``f32[C]`` slow moving average of the same.
      observed: ``bool[C]`` the category has had a group with a valid rollout.
      draws: ``i32[C]`` tasks drawn from each category so far.
      fast_a, fast_b, slow_a, slow_b: ``f32[C]`` split-half moving averages of the category's
        batch pass rate (even and odd rollouts; :mod:`curriculax._progress`), kept for every
        reward: they feed ``advantage_progress`` and the noise diagnostic.
      cross, power: ``f32[C]`` the moving averages behind the progress reliability.
      batches: ``i32[C]`` batches that updated them.
      mixed: ``i32[C]`` of those, batches in which the category had a group with reward
        variance.
    """

    q: jax.Array
    fast: jax.Array
    slow: jax.Array
    observed: jax.Array
    draws: jax.Array
    fast_a: jax.Array
    fast_b: jax.Array
    slow_a: jax.Array
    slow_b: jax.Array
    cross: jax.Array
    power: jax.Array
    batches: jax.Array
    mixed: jax.Array


def _bandit_state(state: Any, where: str) -> CategoryBanditState:
    """The one :class:`CategoryBanditState` inside ``state``, or a ValueError naming
    ``where`` and what ``state`` is."""
    found = _wrapping.find_states(state, CategoryBanditState)
    if len(found) != 1:
        raise ValueError(
            f"{where} needs a state holding exactly one CategoryBanditState, found "
            f"{len(found)} in the {type(state).__name__} given; pass the category_bandit "
            "sampler's own state"
        )
    return found[0]


def category_reliability(state: Any) -> jax.Array:
    """``f32[C]`` each category's progress reliability in [0, 1] (split-half; 0: noise or
    nothing moved, 1: its pass rate moves steadily).

    Args:
      state: a :class:`CategoryBanditState`, or any state holding exactly one (a
        curriculum's, an engine's, a wrapper's, ``category_learnability``'s).

    Raises:
      ValueError: if ``state`` holds no CategoryBanditState, or several.
    """
    state = _bandit_state(state, "category_reliability")
    return _progress.reliability(state.cross, state.power)


def noisy_categories(
    state: Any,
    *,
    noise_batches: int = DEFAULT_NOISE_BATCHES,
    noise_reliability: float = DEFAULT_NOISE_RELIABILITY,
) -> np.ndarray:
    """Host side: the categories (``int64[M]``, ascending) whose reward varied in at least
    ``noise_batches`` batches with a progress reliability below ``noise_reliability``
    ("looks like noise": a broken verifier, wrong references). See docs/noise.md.

    Args:
      state: a :class:`CategoryBanditState`, or any state holding exactly one (a
        curriculum's, an engine's, a wrapper's, ``category_learnability``'s).
      noise_batches, noise_reliability: the factory's values.

    Raises:
      ValueError: if ``state`` holds no CategoryBanditState, or several.
    """
    state = _bandit_state(state, "noisy_categories")
    return _progress.flagged(_noise(state, noise_batches, noise_reliability))


def _noise(state: CategoryBanditState, noise_batches: int, noise_reliability: float):
    return _progress.looks_like_noise(
        state, min_mixed=noise_batches, max_reliability=noise_reliability
    )


# Below this temperature Q / temperature may overflow float32 (Q is an average of
# |advantage|- or reward-sized numbers: at 1e-20 it would take Q > 3e18).
_SHIFT_BELOW = 1e-20


def category_probabilities(
    q: jax.Array, nonempty: np.ndarray, temperature: float, epsilon: float
) -> jax.Array:
    """``f32[C]`` the bandit's draw distribution: ``(1 - epsilon) * softmax(q / temperature)
    + epsilon / C'`` over the ``C'`` non-empty categories (``nonempty``: ``bool[C]``, host),
    0 for empty ones."""
    num_nonempty = int(np.sum(nonempty))
    mask = jnp.asarray(nonempty)
    if temperature >= _SHIFT_BELOW:
        logits = q / temperature
    else:
        # q / temperature would overflow to inf in two categories (softmax: NaN, inf - inf):
        # the gaps to the best non-empty Q are divided instead (the best 0, the rest down to
        # -inf). Chosen on the host (the temperature is a Python float), so the program at
        # ordinary temperatures is the one it was and draws what it drew.
        gap = q - jnp.max(jnp.where(mask, q, -jnp.inf))
        logits = jnp.where(gap == 0, 0.0, gap / temperature)
    soft = jax.nn.softmax(jnp.where(mask, logits, -jnp.inf))
    return (1.0 - epsilon) * soft + jnp.where(mask, epsilon / num_nonempty, 0.0)


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
    evidence: float = 0.05,
    noise_batches: int = DEFAULT_NOISE_BATCHES,
    noise_reliability: float = DEFAULT_NOISE_RELIABILITY,
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
      mean reward: how fast it is changing. Robust to unlearnable categories (their rate
      does not move); slow to start (zero until rates move). Not robust to a coin-flip
      category: the noise of its batch means alone gives ``|fast - slow|`` about as large
      as real progress.
    - ``"advantage_progress"``: the mean ``|advantage|`` times the category's progress
      reliability ``rho`` in [0, 1] (:mod:`curriculax._progress`): the even and odd rollouts
      of the category's groups feed two independent fast-minus-slow gaps of its pass rate;
      ``rho`` is the moving average of their product over that of their mean square, near 0
      when the rate does not move, however noisy the rewards (a coin flip), and near 1 when
      it moves steadily. The reward is ``|advantage| * (rho - noise_reliability * ramp)``,
      ``ramp = min(1, mixed / noise_batches)`` growing with the batches in which the
      category's rewards varied: the reliable share of the signal counts as gain and, once
      a category has varied for ``noise_batches`` batches, variance without progress counts
      as cost (a coin-flip group's full-size advantages teach nothing and push the policy
      at random: worse than a wasted draw). So a category that is being learned scores like
      ``|advantage|``, one with no variance 0, and noise below 0.

    Temperature: the rewards live on different scales (|advantage| of a mixed GRPO group
    ~0.5-1; a learning-progress gap ~0.01-0.2), so the default depends on ``reward`` (0.2
    for advantage and advantage_progress, 0.05 for progress): a category with clear signal
    is then tens of times likelier than one with none.

    The noise diagnostic (every reward): a category whose rewards varied in at least
    ``noise_batches`` batches, whose recent pass rate is still strictly inside (0.05, 0.95)
    and whose reliability is below ``noise_reliability`` "looks like noise"
    (``noise/flagged``, ``noise/<c>``; :func:`noisy_categories` on the host). See
    docs/noise.md.

    Cost: ``sample`` O(num * C * min(C, num) + num) (a per-call draw over ``C`` categories
    that retires exhausted ones, then a task by a keyed permutation inside the category: no
    pass over the pool); ``observe`` O(G K T + C). The per-category task index is built once, at
    construction (O(N log N) on the host).

    Args:
      num_tasks: pool size ``N``.
      categories: ``int[N]`` the category of each task, in ``[0, C)`` (``C = max + 1``; an
        id with no task is never drawn). From a config, give it as context:
        ``cx.curriculum_from_config(config, N, categories=levels)``.
      reward: ``"advantage"``, ``"progress"`` or ``"advantage_progress"``.
      step_size: ``a`` in (0, 1].
      temperature: softmax temperature over ``Q`` (> 0); None: 0.2 for advantage, 0.05 for
        progress.
      epsilon: share of draws uniform over the non-empty categories, in [0, 1].
      fast: rate of the fast moving average (progress, reliability), in (0, 1].
      slow: rate of the slow moving average (progress, reliability), in (0, fast).
      evidence: rate of the moving averages behind the reliability, in (0, 1].
      noise_batches: batches with reward variance before a category can be flagged as
        noise (>= 1).
      noise_reliability: reliability below which such a category is flagged, in (0, 1].

    Returns:
      A :class:`~curriculax.TaskSampler` (no per-task state). Metrics: ``entropy`` (of the
      category distribution, nats), ``q_max``, ``noise/flagged`` (categories that look like
      noise, :func:`noisy_categories`), and with at most 32 categories ``q/<c>``,
      ``prob/<c>``, ``reliability/<c>`` and ``noise/<c>`` (1.0 if flagged) per category.

    Example:
      >>> levels = np.repeat(np.arange(4), 25)  # 100 tasks, 4 levels
      >>> s = category_bandit(100, levels)
      >>> ids, state = s.sample(s.init(jax.random.key(0)), jax.random.key(1), 8)
    """
    n = check_num_tasks(num_tasks)
    cats = _categories(categories, n)
    if reward not in REWARDS:
        raise ValueError(f"reward must be one of {list(REWARDS)}, got {reward!r}")
    step_size = unit_interval(step_size, "step_size", open_low=True)
    epsilon = unit_interval(epsilon, "epsilon")
    fast = unit_interval(fast, "fast", open_low=True)
    slow = unit_interval(slow, "slow", open_low=True)
    if not slow < fast:
        raise ValueError(f"slow ({slow}) must be below fast ({fast})")
    evidence = unit_interval(evidence, "evidence", open_low=True)
    if isinstance(noise_batches, bool) or not isinstance(noise_batches, int) or noise_batches < 1:
        raise ValueError(f"noise_batches must be an int >= 1, got {noise_batches!r}")
    noise_reliability = unit_interval(noise_reliability, "noise_reliability", open_low=True)
    if temperature is None:
        temperature = DEFAULT_TEMPERATURE[reward]
    temperature = number(temperature, "temperature")
    if not (temperature > 0 and math.isfinite(temperature)):
        raise ValueError(f"temperature must be finite and > 0, got {temperature}")

    num_cats = int(cats.max()) + 1
    counts_np = np.bincount(cats, minlength=num_cats).astype(np.int32)
    order_np = np.argsort(cats, kind="stable").astype(np.int32)
    starts_np = (np.cumsum(counts_np) - counts_np).astype(np.int32)
    nonempty_np = counts_np > 0

    def probabilities(q: jax.Array) -> jax.Array:
        return category_probabilities(q, nonempty_np, temperature, epsilon)

    def init(key: jax.Array) -> CategoryBanditState:
        del key

        # Separate buffers: a donated state must not hold one buffer twice.
        def zf():
            return jnp.zeros((num_cats,), jnp.float32)

        return CategoryBanditState(
            q=zf(),
            fast=zf(),
            slow=zf(),
            observed=jnp.zeros((num_cats,), bool),
            draws=jnp.zeros((num_cats,), jnp.int32),
            fast_a=zf(),
            fast_b=zf(),
            slow_a=zf(),
            slow_b=zf(),
            cross=zf(),
            power=zf(),
            batches=jnp.zeros((num_cats,), jnp.int32),
            mixed=jnp.zeros((num_cats,), jnp.int32),
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
        rewards = jnp.where(valid, results.rewards.astype(jnp.float32), 0.0)
        mask = results.token_mask.astype(bool) & valid[:, :, None]
        total = jnp.sum(jnp.where(mask, jnp.abs(results.advantages), 0.0), axis=(1, 2))
        abs_adv = total / jnp.maximum(jnp.sum(mask, axis=(1, 2)), 1).astype(jnp.float32)
        mean_reward = jnp.sum(rewards, axis=1) / jnp.maximum(count, 1).astype(jnp.float32)

        def per_cat(x):
            return jnp.zeros((num_cats,), jnp.float32).at[cat].add(x, mode="drop")

        groups = per_cat(jnp.ones(cat.shape, jnp.float32))
        touched = groups > 0
        abs_adv = per_cat(abs_adv) / jnp.maximum(groups, 1.0)
        batch = per_cat(mean_reward) / jnp.maximum(groups, 1.0)

        # Split halves: the category's even and odd rollouts of this batch, pooled.
        k = results.rewards.shape[1]
        even = (jnp.arange(k) % 2 == 0)[None, :]
        half_a = per_cat(jnp.sum(jnp.where(even, rewards, 0.0), axis=1))
        half_b = per_cat(jnp.sum(jnp.where(even, 0.0, rewards), axis=1))
        n_a = per_cat(jnp.sum(valid & even, axis=1).astype(jnp.float32))
        n_b = per_cat(jnp.sum(valid & ~even, axis=1).astype(jnp.float32))
        both = touched & (n_a > 0) & (n_b > 0)
        prog = _progress.update(
            state.fast_a,
            state.fast_b,
            state.slow_a,
            state.slow_b,
            state.cross,
            state.power,
            half_a / jnp.maximum(n_a, 1.0),
            half_b / jnp.maximum(n_b, 1.0),
            state.batches,
            fast=fast,
            slow=slow,
            evidence=evidence,
        )
        old = (state.fast_a, state.fast_b, state.slow_a, state.slow_b, state.cross, state.power)
        fa, fb, sa, sb, cross, power = (jnp.where(both, v, o) for v, o in zip(prog, old))
        spread = _spread.varies(rewards, valid, axis=1)
        varied = per_cat((use & spread).astype(jnp.float32)) > 0

        if reward == "advantage":
            r = abs_adv
            fast_avg, slow_avg = state.fast, state.slow
        elif reward == "advantage_progress":
            # Reliable signal counts as gain, noise as cost, the cost ramping up over the
            # category's first noise_batches batches with variance (from the first: a
            # category's first |advantage| with reliability 0 scores slightly below none).
            mixed = _counters.add(state.mixed, (both & varied).astype(jnp.int32))
            ramp = jnp.minimum(mixed.astype(jnp.float32) / noise_batches, 1.0)
            r = abs_adv * (_progress.reliability(cross, power) - noise_reliability * ramp)
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
            fast_a=fa,
            fast_b=fb,
            slow_a=sa,
            slow_b=sb,
            cross=cross,
            power=power,
            batches=_counters.add(state.batches, both.astype(jnp.int32)),
            mixed=_counters.add(state.mixed, (both & varied).astype(jnp.int32)),
        )

    def metrics(state: CategoryBanditState) -> dict[str, jax.Array]:
        p = probabilities(state.q)
        entropy = -jnp.sum(jnp.where(p > 0, p * jnp.log(jnp.where(p > 0, p, 1.0)), 0.0))
        out = {"entropy": entropy, "q_max": jnp.max(jnp.where(nonempty_np, state.q, -jnp.inf))}
        noise = _noise(state, noise_batches, noise_reliability)
        out["noise/flagged"] = jnp.sum(noise, dtype=jnp.int32).astype(jnp.float32)
        if num_cats <= _PER_CATEGORY_METRICS:
            rho = category_reliability(state)
            for c in range(num_cats):
                out[f"q/{c}"] = state.q[c]
                out[f"prob/{c}"] = p[c]
                out[f"reliability/{c}"] = rho[c]
                out[f"noise/{c}"] = noise[c].astype(jnp.float32)
        return out

    return TaskSampler(init, sample, observe, metrics, num_tasks=n)
