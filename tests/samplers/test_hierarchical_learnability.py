"""cx.samplers.hierarchical_learnability and the robust preset: a task nobody has measured is
scored by its category's pass rate, a measured one by its own evidence; without categories
the pool is one category; inside reward_consistency a coin flip is not preferred."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curriculax as cx
from curriculax import simulated_pool as sp
from curriculax.samplers import LearnabilityState, RewardConsistencyState

N = 32
CATS = np.repeat(np.arange(2), N // 2)  # tasks 0-15 in category 0, 16-31 in category 1


def _with_evidence(sampler, successes, failures, seen):
    state = sampler.init(jax.random.key(0))
    return LearnabilityState(
        successes=jnp.asarray(successes, jnp.float32),
        failures=jnp.asarray(failures, jnp.float32),
        updated=jnp.zeros((N,), jnp.int32),
        seen=jnp.asarray(seen, bool),
        clock=state.clock,
    )


def _draws(sampler, state, num, calls=20):
    keys = jax.random.split(jax.random.key(1), calls)
    return np.asarray(jax.jit(jax.vmap(lambda k: sampler.sample(state, k, num)[0]))(keys))


def test_an_unseen_task_is_scored_by_its_categorys_pass_rate():
    # Half of each category measured: category 0's tasks pass half the time, category 1's
    # never. Its unseen tasks (8-15, 24-31) take their category's rate: those of category 0
    # sit at the target, those of category 1 near 0, so no draw goes to category 1. Plain
    # learnability's warm-up hands the unseen tasks of both out first.
    wins = np.where(CATS == 0, 4.0, 0.0) * (np.arange(N) % 16 < 8)
    losses = np.where(CATS == 0, 4.0, 8.0) * (np.arange(N) % 16 < 8)
    seen = np.arange(N) % 16 < 8
    ours = cx.samplers.hierarchical_learnability(N, CATS, draw="mean", uniform_share=0.0)
    drawn = _draws(ours, _with_evidence(ours, wins, losses, seen), 8)
    assert np.all(drawn < 16)
    plain = cx.samplers.learnability(N, draw="mean", uniform_share=0.0)
    plain_drawn = _draws(plain, _with_evidence(plain, wins, losses, seen), 8)
    assert np.mean(plain_drawn >= 16) > 0.4
    rates = ours.metrics(_with_evidence(ours, wins, losses, seen))
    assert float(rates["category_pass_rate/0"]) == pytest.approx(33 / 66)
    assert float(rates["category_pass_rate/1"]) == pytest.approx(1 / 66)


def test_a_measured_task_is_ranked_by_its_own_evidence():
    # Category 1's rate is near 0, but its task 16 was measured at 0.5 over 100 rollouts: it
    # is the best task of the pool; category 0's measured tasks all pass 95% of the time.
    wins = np.where(CATS == 0, 95.0, 0.0)
    losses = np.where(CATS == 0, 5.0, 100.0)
    wins[16], losses[16] = 50.0, 50.0
    s = cx.samplers.hierarchical_learnability(N, CATS, draw="mean", uniform_share=0.0)
    drawn = _draws(s, _with_evidence(s, wins, losses, np.ones(N, bool)), 1)
    assert np.all(drawn == 16)


def test_without_categories_the_pool_is_one_category():
    rng = np.random.default_rng(0)
    wins, losses = rng.integers(0, 9, N), rng.integers(0, 9, N)
    seen = rng.random(N) < 0.5
    none = cx.samplers.hierarchical_learnability(N)
    zeros = cx.samplers.hierarchical_learnability(N, np.zeros(N, int))
    for s in (none, zeros):
        assert "category_pass_rate/0" in s.metrics(s.init(jax.random.key(0)))
    np.testing.assert_array_equal(
        _draws(none, _with_evidence(none, wins, losses, seen), 8),
        _draws(zeros, _with_evidence(zeros, wins, losses, seen), 8),
    )


def test_copies_of_a_task_count_once_in_their_category():
    # Entries 0-3 hold one task (its evidence at entry 0), filed under category 0 at entry 0
    # and under category 1 at the copies: it counts in category 0 only.
    cats = np.array([0, 1, 1, 1] + [1] * (N - 4))
    entry_task = np.array([0, 0, 0, 0, *range(1, N - 3)])
    s = cx.samplers.hierarchical_learnability(N, cats, entry_task=entry_task)
    wins, losses = np.zeros(N), np.zeros(N)
    wins[0], losses[0] = 6.0, 2.0
    m = s.metrics(_with_evidence(s, wins, losses, np.zeros(N, bool)))
    assert float(m["category_pass_rate/0"]) == pytest.approx(7 / 10)
    assert float(m["category_pass_rate/1"]) == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"strength": 0.0}, ValueError, "strength must be a finite number > 0"),
        ({"strength": "8"}, TypeError, "strength must be a number"),
        ({"categories": np.arange(3)}, ValueError, r"categories must have shape \[num_tasks=32\]"),
        ({"categories": -np.ones(N, int)}, ValueError, "categories must be >= 0"),
        ({"target": 1.0}, ValueError, "target must lie strictly between 0 and 1"),
    ],
)
def test_bad_arguments_name_the_argument_and_value(kwargs, error, match):
    with pytest.raises(error, match=match):
        cx.samplers.hierarchical_learnability(N, **kwargs)


def test_a_coin_flip_is_never_preferred_over_a_task_the_policy_is_learning():
    # The simulated pool of tests/samplers/test_reward_consistency.py (half coin flips, a
    # tenth learned by training, no categories), 4 seeds: inside reward_consistency, an open
    # learning task is drawn far more often than a coin flip, at most 30% of the draws go to
    # coin flips, and every learning task is learned.
    n = 512
    pool = sp.make_pool(
        n,
        trivial=0.2,
        informative=0.0,
        emerging=0.0,
        coin_flip=0.5,
        learning=0.1,
        learn_draws=20,
        seed=3,
    )
    keys = jax.random.split(jax.random.key(7), 4)
    wrapped = cx.samplers.reward_consistency(n, cx.samplers.hierarchical_learnability(n))
    m = sp.summarize(pool, sp.run(wrapped, pool, steps=600, num=16, keys=keys))
    assert np.all(m["learning_rate"] > 10 * m["coin_flip_rate"])
    assert np.all(m["coin_flip_share"] <= 0.3)
    assert np.all(m["learned_share"] == 1.0)


def test_the_robust_preset_is_the_sampler_inside_reward_consistency_with_its_gate():
    cur = cx.robust_curriculum(N, CATS, entry_task=np.arange(N))
    assert sorted(cur.gates) == ["consistency"]
    state = cur.init(jax.random.key(0))
    assert isinstance(state.sampler, RewardConsistencyState)
    assert isinstance(state.sampler.inner, LearnabilityState)
    assert {"sampler/inner/category_pass_rate/1", "gate/consistency/rejected"} <= set(
        cur.metrics(state)
    )
    from_config = cx.curriculum_from_config({"preset": "robust"}, N, categories=CATS)
    for a, b in zip(
        jax.tree.leaves(from_config.init(jax.random.key(0))),
        jax.tree.leaves(state),
        strict=True,
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    cx.robust_curriculum(N)  # no categories: one


def test_a_preset_is_named_and_given_alone():
    with pytest.raises(ValueError, match=r"unknown preset 'best'; presets are \['robust'\]"):
        cx.curriculum_from_config({"preset": "best"}, N)
    with pytest.raises(ValueError, match=r"give it alone \(got \['gates'\] beside it\)"):
        cx.curriculum_from_config({"preset": "robust", "gates": {}}, N)
    with pytest.raises(ValueError, match=r"accepted keys are \['gates', 'preset', 'sampler'\]"):
        cx.curriculum_from_config({"sampler": {"type": "uniform"}, "gate": {}}, N)


def test_the_robust_preset_through_the_host_driver_rejects_a_noisy_prompt():
    # A user's loop: task 3's verifier gave one answer two rewards, so its group (and any
    # later one) does not train and it is marked; task 5's group, answers apart, trains.
    host = cx.HostCurriculum(cx.robust_curriculum(N, CATS))
    assert host.sample(4).shape == (4,)
    rewards = [[1.0, 0.0, 1.0, 0.0], [1.0, 0.0, 1.0, 0.0]]
    admitted = host.observe([3, 5], rewards, answers=[[7, 7, 8, 9], [1, 2, 3, 4]])
    assert admitted.tolist() == [False, True]
    admitted = host.observe([3], [[1.0, 1.0, 0.0, 0.0]], answers=[[1, 1, 2, 2]])
    assert admitted.tolist() == [False]
    metrics = host.metrics()
    assert metrics["sampler/noise/contradicted"] == 1.0
    assert metrics["gate/consistency/contradicted"] == 1.0
