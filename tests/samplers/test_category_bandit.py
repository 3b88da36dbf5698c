"""cx.samplers.category_bandit: mass moves to the category with signal; epsilon; config."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curriculax as cx

N, CATS = 64, 4
LEVELS = np.repeat(np.arange(CATS), N // CATS)  # tasks 0-15 in category 0, 16-31 in 1, ...


def _run(sampler, rate_of, steps=60, num=16, seed=0):
    """Scans ``steps`` steps: draw ``num`` tasks, Bernoulli(8) rewards at ``rate_of(cat, t)``,
    GRPO advantages. Returns (final state, ``i32[steps, num]`` categories drawn)."""
    cats = jnp.asarray(LEVELS)

    def step(state, t):
        k_s, k_r = jax.random.split(jax.random.fold_in(jax.random.key(seed), t))
        ids, state = sampler.sample(state, k_s, num)
        rates = rate_of(cats[ids], t)
        rewards = (jax.random.uniform(k_r, (num, 8)) < rates[:, None]).astype(jnp.float32)
        centred = rewards - rewards.mean(1, keepdims=True)
        std = rewards.std(1, keepdims=True)
        adv = jnp.where(std > 0, centred / jnp.maximum(std, 1e-6), 0.0)
        ones = jnp.ones(rewards.shape, bool)
        res = cx.GroupResults(ids, rewards, ones, adv[:, :, None], ones[:, :, None])
        return sampler.observe(state, res), cats[ids]

    run = jax.jit(lambda s: jax.lax.scan(step, s, jnp.arange(steps)))
    return run(sampler.init(jax.random.key(seed)))


def _share(drawn, cat, last=20):
    return float(np.mean(np.asarray(drawn)[-last:] == cat))


def test_advantage_reward_moves_mass_to_the_category_with_signal():
    # Category 2 passes half the time; the others never or always (zero-variance groups).
    s = cx.samplers.category_bandit(N, LEVELS)
    rates = jnp.array([0.0, 1.0, 0.5, 0.0])
    state, drawn = _run(s, lambda c, t: rates[c])
    assert _share(drawn, 2) > 0.7
    m = s.metrics(state)
    assert float(m["prob/2"]) > 0.7 and float(m["q/2"]) > float(m["q/0"])


def test_progress_reward_follows_the_rising_category_and_ignores_a_coin_flip():
    # Category 1 is a coin flip all along (big advantages, nothing to learn); category 3's
    # pass rate climbs from 0 to 1 over the run. |advantage| is drawn into the coin flip;
    # learning progress goes to the climbing category.
    def rate_of(c, t):
        climbing = jnp.clip(t / 80.0, 0.0, 1.0)
        return jnp.where(c == 1, 0.5, jnp.where(c == 3, climbing, 0.0))

    progress = cx.samplers.category_bandit(N, LEVELS, reward="progress")
    advantage = cx.samplers.category_bandit(N, LEVELS, reward="advantage")
    _, by_progress = _run(progress, rate_of, steps=60)
    _, by_advantage = _run(advantage, rate_of, steps=60)
    # measured over seeds 0-3: progress 0.81-0.86 on the climber, 0.07-0.10 on the coin flip;
    # advantage 0.48-0.54 on the coin flip
    assert _share(by_progress, 3) > 4 * _share(by_progress, 1)
    assert _share(by_advantage, 1) > 3 * _share(by_progress, 1)


def test_epsilon_keeps_every_nonempty_category_reachable_and_empty_ones_out():
    levels = np.array([0] * 10 + [2] * 10 + [3] * 4)  # category 1 has no task
    s = cx.samplers.category_bandit(24, levels, epsilon=0.2, temperature=0.01)
    state = s.init(jax.random.key(0))._replace(q=jnp.array([1.0, 0.0, 0.0, 0.0]))
    p = {k: float(v) for k, v in s.metrics(state).items()}
    assert p["prob/1"] == 0.0
    for c in (2, 3):
        assert p[f"prob/{c}"] == pytest.approx(0.2 / 3, rel=1e-5)
    assert p["prob/0"] == pytest.approx(0.8 + 0.2 / 3, rel=1e-5)
    keys = jax.random.split(jax.random.key(1), 400)
    ids = jax.jit(jax.vmap(lambda k: s.sample(state, k, 4)[0]))(keys)
    drawn = levels[np.asarray(ids).ravel()]
    assert 1 not in drawn and {0, 2, 3} <= set(drawn.tolist())


def test_a_call_gives_distinct_tasks_of_the_chosen_categories():
    s = cx.samplers.category_bandit(N, LEVELS, epsilon=0.0, temperature=0.01)
    state = s.init(jax.random.key(0))._replace(q=jnp.array([0.0, 0.0, 1.0, 0.0]))
    ids, state = jax.jit(s.sample, static_argnums=2)(state, jax.random.key(3), 16)
    assert sorted(ids.tolist()) == list(range(32, 48))  # all 16 tasks of category 2
    assert state.draws.tolist() == [0, 0, 16, 0]


def test_config_takes_the_categories_as_context():
    config = {"sampler": {"type": "category_bandit", "reward": "progress", "epsilon": 0.05}}
    cur = cx.curriculum_from_config(config, N, categories=LEVELS)
    ids, _ = jax.jit(cur.sample, static_argnums=2)(
        cur.init(jax.random.key(0)), jax.random.key(1), 8
    )
    assert ids.shape == (8,)
    small = {"type": "category_bandit", "categories": [0, 1, 1]}  # a small pool inline
    assert isinstance(cx.sampler_from_config(small, 3), cx.TaskSampler)
    with pytest.raises(ValueError, match=r"missing \['categories'\].*categories=\.\.\."):
        cx.curriculum_from_config(config, N)
    with pytest.raises(ValueError, match=r"'categories' is given both in the config and as"):
        cx.sampler_from_config(small, 3, categories=[0, 0, 0])
    # context a factory does not ask for is ignored
    cx.curriculum_from_config({"sampler": {"type": "uniform"}}, N, categories=LEVELS)


@pytest.mark.parametrize(
    "categories, kwargs, error, match",
    [
        (LEVELS[:10], {}, ValueError, r"categories must have shape \[num_tasks=64\]"),
        (LEVELS - 1, {}, ValueError, r"categories must be >= 0, got -1"),
        (LEVELS + 0.5, {}, TypeError, r"categories must be integers"),
        (LEVELS, {"reward": "regret"}, ValueError, r"reward must be one of"),
        (LEVELS, {"temperature": 0}, ValueError, r"temperature must be finite and > 0"),
        (LEVELS, {"epsilon": 2}, ValueError, r"epsilon must lie in \[0, 1\], got 2"),
        (LEVELS, {"step_size": 0}, ValueError, r"step_size must lie in \(0, 1\]"),
        (LEVELS, {"fast": 0.1, "slow": 0.2}, ValueError, r"slow \(0.2\) must be below fast"),
    ],
)
def test_bad_arguments_name_the_argument_and_value(categories, kwargs, error, match):
    with pytest.raises(error, match=match):
        cx.samplers.category_bandit(N, categories, **kwargs)


def test_advantage_progress_follows_the_learning_category_not_the_coin_flip():
    # Category 1 is a coin flip, category 3 climbs from 0 to 1 over 80 steps, the others never
    # pass. |advantage| is drawn into the coin flip; |advantage| x progress reliability goes
    # to the climber while it climbs and, once the coin flip has varied for noise_batches
    # batches without progress, keeps it below the categories with no signal at all.
    def rate_of(c, t):
        climbing = jnp.clip(t / 80.0, 0.0, 1.0)
        return jnp.where(c == 1, 0.5, jnp.where(c == 3, climbing, 0.0))

    robust = cx.samplers.category_bandit(N, LEVELS, reward="advantage_progress")
    advantage = cx.samplers.category_bandit(N, LEVELS, reward="advantage")
    for seed in range(3):
        state, drawn = _run(robust, rate_of, steps=120, seed=seed)
        _, by_advantage = _run(advantage, rate_of, steps=120, seed=seed)
        drawn = np.asarray(drawn)
        # while the climber climbs (steps 20-80), it gets the most draws
        climbing = drawn[20:80]
        assert np.mean(climbing == 3) > 2 * np.mean(climbing == 1)
        # after it is learned, the coin flip gets less than a category that never passes
        late = drawn[-30:]
        assert np.mean(late == 1) < np.mean(late == 0)
        assert np.mean(drawn == 1) < 0.5 * np.mean(np.asarray(by_advantage) == 1)
        # the diagnostic flags the coin flip and nothing else
        assert cx.samplers.noisy_categories(state).tolist() == [1]
        m = robust.metrics(state)
        assert float(m["noise/flagged"]) == 1.0 and float(m["noise/1"]) == 1.0


def test_advantage_progress_still_finds_a_learnable_category_among_dead_ones():
    # Where |advantage| wins (one learnable category among ones with no signal), the robust
    # reward wins too: the climbing category carries both the signal and the progress. It
    # concentrates later, as the reliability builds up (last 20 of 60 steps, seeds 0-2,
    # 2026-12-01: 0.64-0.71 on the climber against 0.90-0.92 for |advantage|).
    def rate_of(c, t):
        return jnp.where(c == 2, jnp.clip(0.1 + t / 100.0, 0.0, 0.9), 0.0)

    robust = cx.samplers.category_bandit(N, LEVELS, reward="advantage_progress")
    advantage = cx.samplers.category_bandit(N, LEVELS, reward="advantage")
    for seed in range(3):
        _, by_robust = _run(robust, rate_of, steps=60, seed=seed)
        _, by_advantage = _run(advantage, rate_of, steps=60, seed=seed)
        assert _share(by_robust, 2) > 0.6
        assert _share(by_advantage, 2) > 0.6


def test_noise_diagnostics_find_the_bandit_inside_any_state():
    """noisy_categories and category_reliability took only a bare CategoryBanditState: a
    curriculum's, a wrapper's or category_learnability's state failed with an AttributeError
    about a field. They find the bandit as noisy_tasks does, or say what they need."""
    s = cx.samplers
    bandit = s.category_bandit(N, LEVELS, reward="advantage_progress")
    trained, _ = _run(bandit, lambda c, t: jnp.where(c == 1, 0.5, 0.0), steps=30)
    flagged = s.noisy_categories(trained, noise_batches=2).tolist()
    assert flagged == [1]
    key = jax.random.key(0)
    cur = cx.curriculum(bandit).init(key)
    wrapped = s.reward_consistency(N, bandit).init(key)._replace(inner=trained)
    learnability = s.category_learnability(N, LEVELS).init(key)._replace(bandit=trained)
    for state in (cur._replace(sampler=trained), wrapped, learnability):
        assert s.noisy_categories(state, noise_batches=2).tolist() == flagged
        np.testing.assert_array_equal(
            s.category_reliability(state), s.category_reliability(trained)
        )
    for state, found in ((cx.curriculum(s.uniform(N)).init(key), 0), ((trained, trained), 2)):
        for fn in (s.noisy_categories, s.category_reliability):
            with pytest.raises(
                ValueError,
                match=rf"{fn.__name__} needs a state holding exactly "
                rf"one CategoryBanditState, found {found} in the",
            ):
                fn(state)


def test_numpy_numbers_are_numbers():
    """A numpy temperature was refused ("temperature must be a number"); it draws as the
    Python float does."""

    def draws(temperature):
        sampler = cx.samplers.category_bandit(N, LEVELS, temperature=temperature)
        return _run(sampler, lambda c, t: jnp.where(c == 2, 0.5, 0.0), steps=5)[1]

    np.testing.assert_array_equal(draws(np.float32(0.25)), draws(0.25))
    cx.samplers.category_bandit(N, LEVELS, temperature=np.int64(1), epsilon=np.float32(0.5))
    with pytest.raises(TypeError, match=r"temperature must be a number, got np.True_"):
        cx.samplers.category_bandit(N, LEVELS, temperature=np.bool_(True))


@pytest.mark.parametrize("temperature", [1e-45, 1e-50])
def test_a_tiny_temperature_draws_the_best_categories_not_nan(temperature):
    # q / temperature overflowed to inf in the two best categories: softmax gave NaN
    from curriculax.samplers.category_bandit import category_probabilities

    q = jnp.array([0.5, 0.5, 0.1, 0.0])
    p = np.asarray(category_probabilities(q, np.array([1, 1, 1, 0], bool), temperature, 0.1))
    np.testing.assert_allclose(p, [0.45 + 0.1 / 3, 0.45 + 0.1 / 3, 0.1 / 3, 0.0], rtol=1e-6)
    sampler = cx.samplers.category_bandit(N, LEVELS, temperature=temperature)
    _, drawn = _run(sampler, lambda cat, t: jnp.where(cat == 2, 0.5, 0.0), steps=10)
    assert np.isin(np.asarray(drawn), np.arange(CATS)).all()
