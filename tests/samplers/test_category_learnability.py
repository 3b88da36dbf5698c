"""cx.samplers.category_learnability: the bandit decides how many per category, learnability
which; copies share a posterior; coin flips in their own category lose their draws."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curriculax as cx
from curriculax.samplers import CategoryLearnabilityState, LearnabilityState
from curriculax.testing import group_results

N, CATS = 64, 4
LEVELS = np.repeat(np.arange(CATS), N // CATS)  # tasks 0-15 in category 0, 16-31 in 1, ...


def _with_evidence(sampler, successes, failures, q=None):
    """The sampler's initial state with every task seen and the given evidence (and bandit
    values ``q``)."""
    state = sampler.init(jax.random.key(0))
    n = state.tasks.seen.shape[0]
    tasks = LearnabilityState(
        successes=jnp.asarray(successes, jnp.float32),
        failures=jnp.asarray(failures, jnp.float32),
        updated=jnp.zeros((n,), jnp.int32),
        seen=jnp.ones((n,), bool),
        clock=jnp.int32(0),
    )
    bandit = state.bandit if q is None else state.bandit._replace(q=jnp.asarray(q, jnp.float32))
    return CategoryLearnabilityState(bandit, tasks)


def test_the_bandit_sets_the_counts_and_learnability_picks_the_tasks():
    # Category 2 is worth far more than the others (q), so with epsilon = 0 a call of 4 goes
    # there; inside it, the posterior means are 0.1, 0.2, ..., and the 4 drawn are the ones
    # nearest 0.5 (draw="mean": no Thompson noise), not 4 at random.
    s = cx.samplers.category_learnability(N, LEVELS, epsilon=0.0, draw="mean", half_life=None)
    rate = np.tile(np.linspace(0.05, 0.95, 16), CATS)
    state = _with_evidence(s, 100 * rate, 100 * (1 - rate), q=[0.0, 0.0, 2.0, 0.0])
    sample = jax.jit(s.sample, static_argnums=2)
    expect = sorted(32 + np.argsort(np.abs(rate[32:48] - 0.5), kind="stable")[:4])
    for k in range(5):
        ids, _ = sample(state, jax.random.key(k), 4)
        assert sorted(np.asarray(ids).tolist()) == expect


def test_a_category_spanning_several_rows_gives_its_best_tasks():
    # Uneven categories (50, 3, 3, 8 tasks): the largest spans several rows of the sampler's
    # table. Whatever count the bandit gives a category, its drawn tasks are its best (the
    # posterior means nearest 0.5; draw="mean"), as a per-category sort would pick them.
    cats = np.repeat(np.arange(4), [50, 3, 3, 8])
    rng = np.random.default_rng(1)
    rate = rng.permutation(np.linspace(0.02, 0.48, cats.size))  # distinct distances to 0.5
    s = cx.samplers.category_learnability(cats.size, cats, draw="mean", half_life=None)
    keys = jax.random.split(jax.random.key(0), 50)
    draws = np.concatenate(
        [
            np.asarray(jax.jit(jax.vmap(lambda k, st=st: s.sample(st, k, 20)[0]))(keys))
            for st in (
                _with_evidence(s, 100 * rate, 100 * (1 - rate)),
                _with_evidence(s, 100 * rate, 100 * (1 - rate), q=[1.0, 0.0, 0.0, 0.0]),
            )
        ]
    )
    distance = np.abs(rate - 0.5)
    for ids in draws:
        assert len(set(ids.tolist())) == 20
        for c in range(4):
            mine = ids[cats[ids] == c]
            members = np.flatnonzero(cats == c)
            best = members[np.argsort(distance[members], kind="stable")[: mine.size]]
            assert sorted(mine.tolist()) == sorted(best.tolist())
    # The large category did get more than one row's worth in some calls.
    assert max(np.sum(cats[ids] == 0) for ids in draws) > 16


def test_counts_follow_the_bandits_probabilities():
    # Equal values and epsilon 0: each category is equally likely; 400 calls of 4.
    s = cx.samplers.category_learnability(N, LEVELS, epsilon=0.0)
    state = _with_evidence(s, np.ones(N), np.ones(N), q=[0.0, 0.0, 0.0, 0.0])
    keys = jax.random.split(jax.random.key(0), 400)
    ids = np.asarray(jax.jit(jax.vmap(lambda k: s.sample(state, k, 4)[0]))(keys))
    share = np.bincount(LEVELS[ids.ravel()], minlength=CATS) / ids.size
    assert np.all(np.abs(share - 0.25) < 0.03), share
    # A category valued 1 above the rest at temperature 0.2: e^5 times likelier.
    state = _with_evidence(s, np.ones(N), np.ones(N), q=[1.0, 0.0, 0.0, 0.0])
    ids = np.asarray(jax.jit(jax.vmap(lambda k: s.sample(state, k, 1)[0]))(keys))
    p0 = np.exp(5) / (np.exp(5) + 3)
    assert abs(np.mean(LEVELS[ids.ravel()] == 0) - p0) < 0.03


def test_unseen_tasks_of_a_category_come_first_and_calls_are_distinct():
    # Inside each category the draws take its unseen tasks first: a category given m draws
    # with u unseen tasks left hands out min(m, u) of them.
    s = cx.samplers.category_learnability(N, LEVELS)
    sample = jax.jit(s.sample, static_argnums=2)
    state = s.init(jax.random.key(0))
    for k in range(8):
        seen = np.asarray(state.tasks.seen)
        ids, state = sample(state, jax.random.key(k), 16)
        ids = np.asarray(ids)
        assert len(set(ids.tolist())) == 16
        for c in range(CATS):
            mine = ids[LEVELS[ids] == c]
            unseen_left = int(np.sum(~seen[np.equal(LEVELS, c)]))
            assert int(np.sum(~seen[mine])) == min(mine.size, unseen_left)
    assert float(s.metrics(state)["pool/unseen"]) == np.sum(~np.asarray(state.tasks.seen))


def test_one_category_is_learnability_without_its_uniform_share():
    # No labels (one category): the same tasks as learnability with uniform_share=0 where the
    # scores are distinct (draw="mean").
    n = 40
    rate = np.linspace(0.02, 0.98, n)
    rng = np.random.default_rng(0)
    perm = rng.permutation(n)
    rate = rate[perm]
    ours = cx.samplers.category_learnability(n, np.zeros(n, int), draw="mean", half_life=None)
    theirs = cx.samplers.learnability(n, draw="mean", half_life=None, uniform_share=0.0)
    state = _with_evidence(ours, 50 * rate, 50 * (1 - rate))
    ids, _ = ours.sample(state, jax.random.key(3), 6)
    ref, _ = theirs.sample(state.tasks, jax.random.key(3), 6)
    assert sorted(np.asarray(ids).tolist()) == sorted(np.asarray(ref).tolist())


def test_copies_share_one_posterior_and_a_call_draws_distinct_tasks():
    # 12 entries holding 4 tasks in 2 categories (tasks 0, 2 in category 0; 1, 3 in 1).
    n, entry_task = 12, np.arange(12) % 4
    cats = entry_task % 2
    s = cx.samplers.category_learnability(n, cats, entry_task=entry_task)
    sample = jax.jit(s.sample, static_argnums=2)
    state = s.init(jax.random.key(0))
    ids, state = sample(state, jax.random.key(1), 4)
    assert sorted(entry_task[np.asarray(ids)].tolist()) == [0, 1, 2, 3]
    state = s.observe(state, group_results([5, 9], [[1, 1, 0, 0], [1, 0, 0, 0]]))
    assert state.tasks.successes.tolist()[1] == 3.0 and state.tasks.failures.tolist()[1] == 5.0
    for k in range(5):
        ids, _ = sample(state, jax.random.key(10 + k), 4)
        assert sorted(entry_task[np.asarray(ids)].tolist()) == [0, 1, 2, 3]


def _run(sampler, rate_of, steps, num=16, seed=0):
    """Scans ``steps`` steps of ``num`` groups of 8 Bernoulli rollouts at ``rate_of(task, t)``
    with GRPO advantages; returns (final state, ``i32[steps, num]`` ids drawn)."""

    def step(state, t):
        k_s, k_r = jax.random.split(jax.random.fold_in(jax.random.key(seed), t))
        ids, state = sampler.sample(state, k_s, num)
        rates = rate_of(ids, t)
        rewards = (jax.random.uniform(k_r, (num, 8)) < rates[:, None]).astype(jnp.float32)
        centred = rewards - rewards.mean(1, keepdims=True)
        std = rewards.std(1, keepdims=True)
        adv = jnp.where(std > 0, centred / jnp.maximum(std, 1e-6), 0.0)
        ones = jnp.ones(rewards.shape, bool)
        res = cx.GroupResults(ids, rewards, ones, adv[:, :, None], ones[:, :, None])
        return sampler.observe(state, res), ids

    run = jax.jit(lambda s: jax.lax.scan(step, s, jnp.arange(steps)))
    return run(sampler.init(jax.random.key(seed)))


def test_a_coin_flip_category_loses_to_the_category_being_learned():
    # Category 1 is a coin flip under a frozen policy (p = 0.5 whatever it does), category 3
    # is being learned (its tasks' rates climb from 0 to 1 over 80 steps), the others never
    # pass. Learnability alone is drawn into the coin flips (p(1 - p) is largest at 0.5);
    # here the robust bandit moves the draws to the learned category.
    def rate_of(ids, t):
        c = jnp.asarray(LEVELS)[ids]
        climbing = jnp.clip(t / 80.0, 0.0, 1.0)
        return jnp.where(c == 1, 0.5, jnp.where(c == 3, climbing, 0.0))

    ours = cx.samplers.category_learnability(N, LEVELS)
    plain = cx.samplers.learnability(N)
    for seed in range(3):
        state, ids = _run(ours, rate_of, steps=120, seed=seed)
        _, plain_ids = _run(plain, rate_of, steps=120, seed=seed)
        drawn = LEVELS[np.asarray(ids)]
        plain_drawn = LEVELS[np.asarray(plain_ids)]
        climbing = drawn[20:80]
        assert np.mean(climbing == 3) > 2 * np.mean(climbing == 1)
        assert np.mean(drawn == 1) < 0.5 * np.mean(plain_drawn == 1)
        assert cx.samplers.noisy_categories(state.bandit).tolist() == [1]


def test_it_is_registered_and_takes_its_context_from_a_config():
    cur = cx.curriculum_from_config(
        {"sampler": {"type": "category_learnability", "epsilon": 0.2}},
        N,
        categories=LEVELS,
        entry_task=np.arange(N),
    )
    state = cur.sampler.init(jax.random.key(0))
    assert isinstance(state, CategoryLearnabilityState)
    metrics = cur.sampler.metrics(state)
    assert {"entropy", "prob/3", "noise/flagged", "pool/unseen", "clock"} <= set(metrics)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"reward": "variance"}, ValueError, "reward must be one of"),
        ({"target": 1.5}, ValueError, "target must lie strictly between 0 and 1"),
        ({"epsilon": -0.1}, ValueError, "epsilon must lie in"),
        ({"entry_task": np.arange(3)}, ValueError, "entry_task must be an integer array"),
        ({"categories": None}, ValueError, "category_bandit needs categories"),
    ],
)
def test_bad_arguments_name_the_argument_and_value(kwargs, error, match):
    args = {"categories": LEVELS, **kwargs}
    with pytest.raises(error, match=match):
        cx.samplers.category_learnability(N, **args)


def test_a_split_per_task_state_is_refused():
    s = cx.samplers.category_learnability(N, LEVELS)
    state = s.init(jax.random.key(0))
    half = state._replace(tasks=jax.tree.map(lambda x: x[: N // 2] if x.ndim else x, state.tasks))
    with pytest.raises(ValueError, match="does not split over devices"):
        s.sample(half, jax.random.key(1), 4)


def test_the_posterior_mean_draws_tied_tasks_from_the_whole_category():
    # one category, every task observed alike: the posterior means tie, and the draws must
    # not gather at the category's first tasks
    n, k = 8_192, 16
    s = cx.samplers.category_learnability(n, np.zeros(n, int), draw="mean", half_life=None)
    rewards = jnp.tile((jnp.arange(8) < 4).astype(jnp.float32), (n, 1))
    state = jax.jit(s.observe)(s.init(jax.random.key(1)), group_results(jnp.arange(n), rewards))
    sample = jax.jit(s.sample, static_argnums=2)
    keys = jax.random.split(jax.random.key(2), 200)
    got = np.concatenate([np.asarray(sample(state, key, k)[0]) for key in keys])
    assert 0.09 < np.mean(got < n // 8) < 0.16


def test_ties_across_the_rows_of_a_large_category_are_settled_at_random():
    """A category larger than the row width spans several rows; the rows' candidates were
    merged by key with row order among equal keys, so a tie went to the first row: with
    every task tied, 16% of the large category's picks came from its second half."""
    n = 2_001
    cats = np.array([0] * 2_000 + [1])  # rows of ceil(2001 / 2) = 1001: category 0 spans two
    s = cx.samplers.category_learnability(n, cats, draw="mean", half_life=None, epsilon=0.0)
    state = s.init(jax.random.key(0))
    rewards = jnp.zeros((n, 8), jnp.float32)  # 0 of 8 everywhere: every posterior mean ties
    state = jax.jit(s.observe)(state, group_results(jnp.arange(n), rewards))
    sample = jax.jit(s.sample, static_argnums=2)
    keys = jax.random.split(jax.random.key(1), 200)
    got = np.concatenate([np.asarray(sample(state, key, 4)[0]) for key in keys])
    big = got[got < 2_000]
    assert big.size > 300
    assert 0.4 < np.mean(big >= 1_001) < 0.6
