"""cx.samplers.learning_progress: seeks tasks the policy learns, not reward variance.

The simulated pools below hold coin flips (rate 0.5 whatever the policy does) and learning
tasks (each draw raises the rate by 1/20 from 0.1-0.3), the rest impossible or trivial.
Measured with exactly this set-up (2026-12-01, 4 seeds): at 50% coin flips learning_progress
drew each open learning task 0.051-0.056 times per step against 0.026-0.027 per coin flip
(learnability: 0.024-0.027 against 0.048-0.049), put 0.42-0.43 of its draws on coin flips
(uniform 0.49-0.51, learnability 0.78), learned 0.98-1.0 of the learning tasks (uniform
0.65-0.80), and flagged 99.6-100% of the coin flips as noise against 0-0.4% of the other tasks.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curriculax as cx
from curriculax import simulated_pool as sp
from curriculax.samplers.learning_progress import reliability
from curriculax.testing import group_results

N, NUM, STEPS = 512, 16, 600


def _pool(coin_flip):
    return sp.make_pool(
        N,
        trivial=0.2,
        informative=0.0,
        emerging=0.0,
        coin_flip=coin_flip,
        learning=0.1,
        learn_draws=20,
        seed=3,
    )


@pytest.fixture(scope="module")
def noisy_runs():
    pool = _pool(0.5)
    keys = jax.random.split(jax.random.key(7), 4)
    out = {}
    for name, sampler in {
        "learning_progress": cx.samplers.learning_progress(N),
        "learnability": cx.samplers.learnability(N),
    }.items():
        trace = sp.run(sampler, pool, steps=STEPS, num=NUM, keys=keys)
        out[name] = (sp.summarize(pool, trace), trace)
    return pool, out


def test_a_coin_flip_is_never_preferred_over_a_task_the_policy_is_learning(noisy_runs):
    _, out = noisy_runs
    m, _ = out["learning_progress"]
    # every seed: an open learning task is drawn more often than a coin flip
    assert np.all(m["learning_rate"] > 1.5 * m["coin_flip_rate"])
    # learnability, which seeks variance, does the opposite on the same pool
    lb, _ = out["learnability"]
    assert np.all(lb["coin_flip_rate"] > lb["learning_rate"])
    assert np.all(m["coin_flip_share"] < lb["coin_flip_share"] - 0.2)
    assert np.min(m["learned_share"]) > np.max(lb["learned_share"])


def test_the_noise_diagnostic_flags_coin_flips_and_not_real_tasks(noisy_runs):
    pool, out = noisy_runs
    _, trace = out["learning_progress"]
    flags = np.asarray(jax.vmap(cx.samplers.looks_like_noise)(trace.state))
    coin = np.asarray(pool.kind) == sp.COIN_FLIP
    assert np.all(flags[:, coin].mean(1) >= 0.9)
    assert np.all(flags[:, ~coin].mean(1) < 0.05)
    # the metric counts them, and the host function lists them
    one = jax.tree.map(lambda x: x[0], trace.state)
    sampler = cx.samplers.learning_progress(N)
    assert float(sampler.metrics(one)["noise/flagged"]) == flags[0].sum()
    ids = cx.samplers.noisy_tasks(
        cx.curriculum(sampler).init(jax.random.key(0))._replace(sampler=one)
    )
    assert ids.tolist() == np.flatnonzero(flags[0]).tolist()


def _feed(sampler, state, task, rates, key, k=8):
    """Observes one group per rate for ``task`` (Bernoulli(rate) rewards)."""
    for i, rate in enumerate(rates):
        rewards = jax.random.uniform(jax.random.fold_in(key, i), (1, k)) < rate
        state = sampler.observe(state, group_results([task], rewards.astype(jnp.float32)))
    return state


def test_split_half_reliability_is_low_for_noise_and_high_for_progress():
    s = cx.samplers.learning_progress(4)
    state = s.init(jax.random.key(0))
    visits = 40
    state = _feed(s, state, 0, [0.5] * visits, jax.random.key(1))  # a coin flip
    state = _feed(s, state, 1, np.linspace(0.0, 1.0, visits), jax.random.key(2))  # learning
    rho = np.asarray(reliability(state))
    assert rho[0] < 0.3 and rho[1] > 0.6
    assert rho[2] == 0.0 and rho[3] == 0.0  # never observed
    flags = np.asarray(cx.samplers.looks_like_noise(state))
    assert flags.tolist() == [True, False, False, False]
    assert int(state.mixed[0]) > 30 and int(state.visits[0]) == visits


def test_a_task_with_variance_and_no_progress_fades_out_of_the_draws():
    # Task 0 is a coin flip, seen many times; tasks 1-3 are fresh informative tasks
    # (one group at p = 0.5 each). With no floor, the coin flip ranks below them.
    s = cx.samplers.learning_progress(4, uniform_share=0.0, draw="mean")
    state = s.init(jax.random.key(0))
    state = _feed(s, state, 0, [0.5] * 40, jax.random.key(1))
    for t in (1, 2, 3):
        state = s.observe(state, group_results([t], [[1, 0, 1, 0, 1, 0, 1, 0]]))
    ids, _ = s.sample(state, jax.random.key(3), 4)
    assert np.asarray(ids).tolist()[-1] == 0  # ranked last
    # with a rising task among them instead, the coin flip still ranks below it
    state = _feed(s, state, 1, np.linspace(0.1, 0.9, 20), jax.random.key(2))
    ids, _ = s.sample(state, jax.random.key(4), 4)
    order = np.asarray(ids).tolist()
    assert order.index(1) < order.index(0)


def test_repeated_entries_share_one_state_and_calls_draw_distinct_tasks():
    # 12 entries holding 4 tasks (entry i holds task i % 4), as study pools repeat the tasks
    # of a small level.
    n, entry_task = 12, np.arange(12) % 4
    s = cx.samplers.learning_progress(
        n, entry_task=entry_task, uniform_share=0.0, patience=1.0, noise_visits=2
    )
    sample = jax.jit(s.sample, static_argnums=2)
    state = s.init(jax.random.key(0))
    # The warm-up visits each distinct task once.
    ids, state = sample(state, jax.random.key(1), 4)
    assert sorted(entry_task[np.asarray(ids)].tolist()) == [0, 1, 2, 3]
    assert float(s.metrics(state)["pool/unseen"]) == 0
    # Copies 5 and 9 of task 1 in one batch: both groups' evidence lands at entry 1, and the
    # progress averages take one update (the batch's last group of the task).
    state = s.observe(state, group_results([5, 9], [[1, 1, 0, 0], [1, 0, 0, 0]]))
    assert state.successes.tolist()[1] == 3.0 and state.failures.tolist()[1] == 5.0
    assert state.visits.tolist() == [0, 1] + [0] * 10
    # A coin flip fed through its copies in turn is flagged once, at its first entry.
    coin = np.tile([[1, 0, 0, 1, 1, 0, 1, 0], [0, 1, 1, 0, 0, 1, 0, 1]], (10, 1))
    for i, row in enumerate(coin):
        state = s.observe(state, group_results([2 + 4 * (i % 3)], [row]))
    assert state.visits.tolist()[2] == 20 and int(state.visits[6]) == int(state.visits[10]) == 0
    assert cx.samplers.noisy_tasks(state, noise_visits=2).tolist() == [2]
    assert float(s.metrics(state)["noise/flagged"]) == 1.0
    # State left on a copy's slots (a per-entry state from before entry_task, or a pool
    # reordered on restore) is not read, so the metrics do not count it either.
    on_copies = state._replace(
        **{f: getattr(state, f).at[6].set(getattr(state, f)[2]) for f in state.PER_TASK}
    )
    metrics = s.metrics(on_copies)
    assert float(metrics["noise/flagged"]) == 1.0
    assert float(metrics["progress/learning"]) == float(s.metrics(state)["progress/learning"])
    # Scored draws stay distinct tasks.
    for k in range(5):
        ids, _ = sample(state, jax.random.key(10 + k), 4)
        assert sorted(entry_task[np.asarray(ids)].tolist()) == [0, 1, 2, 3]


def test_repeated_entries_without_entry_task_split_the_evidence():
    # Task 0 has 20 copies, one group of 1 hit in 8 each: with entry_task the task holds 160
    # rollouts of evidence and 20 progress visits; per entry, each copy 8 and 1.
    n, entry_task = 24, np.where(np.arange(24) < 20, 0, np.arange(24))
    results = group_results(list(range(20)), [[1, 0, 0, 0, 0, 0, 0, 0]] * 20)
    shared = cx.samplers.learning_progress(n, entry_task=entry_task, half_life=None)
    apart = cx.samplers.learning_progress(n, half_life=None)
    st, sa = shared.init(jax.random.key(0)), apart.init(jax.random.key(0))
    for g in range(20):  # one group a batch, so each counts as a progress visit
        one = jax.tree.map(lambda x, g=g: x[g : g + 1], results)
        st, sa = shared.observe(st, one), apart.observe(sa, one)
    assert float(st.successes[0] + st.failures[0]) == 160.0 and int(st.visits[0]) == 20
    assert float(jnp.max(sa.successes + sa.failures)) == 8.0 and int(jnp.max(sa.visits)) == 1
    with pytest.raises(ValueError, match=r"learning_progress: entry_task must be an integer"):
        cx.samplers.learning_progress(10, entry_task=np.arange(9))


def test_config_registration_and_argument_errors():
    s = cx.sampler_from_config({"type": "learning_progress", "patience": 2.0}, 16)
    assert s.num_tasks == 16
    with pytest.raises(ValueError, match="patience"):
        cx.samplers.learning_progress(8, patience=0.0)
    with pytest.raises(ValueError, match=r"slow \(0.6\) must be below fast \(0.5\)"):
        cx.samplers.learning_progress(8, slow=0.6)
    with pytest.raises(ValueError, match="noise_visits"):
        cx.samplers.learning_progress(8, noise_visits=0)
    with pytest.raises(ValueError, match="exactly one LearningProgressState"):
        cx.samplers.noisy_tasks(cx.samplers.learnability(8).init(jax.random.key(0)))


def test_a_batch_pools_a_tasks_groups_into_one_progress_visit():
    # Two copies of task 2 (entries 2 and 6) in one batch, one group all wins, one all
    # losses, then a third group of rollouts: the same state as one group of the rollouts
    # of all three (even positions stay even), a single visit that carried variance. Before,
    # only the task's last group in the batch counted (8 of its 24 rollouts).
    entry_task = np.array([0, 1, 2, 3, 4, 5, 2, 7])
    s = cx.samplers.learning_progress(8, entry_task=entry_task, half_life=None)
    st = s.init(jax.random.key(0))
    wins, losses = [1.0] * 8, [0.0] * 8
    mixed = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    split = s.observe(st, group_results([2, 0, 6, 2], [wins, mixed, losses, mixed]))
    whole = s.observe(
        st,
        group_results(
            [2, 0],
            [wins + losses + mixed, mixed + [0.0] * 16],
            [[True] * 24, [True] * 8 + [False] * 16],
        ),
    )
    for field in split._fields:
        if field not in ("updated", "clock"):  # the clock counts groups: 4 against 2
            np.testing.assert_array_equal(getattr(split, field), getattr(whole, field), field)
    assert int(split.visits[2]) == 1 and int(split.mixed[2]) == 1
    assert float(split.fast_a[2]) == pytest.approx(7 / 12)  # even wins: 4 + 0 + 3 of 12
    assert int(split.visits[6]) == 0  # the copy's slot is not written


def test_sum_by_id_matches_a_loop():
    from curriculax.samplers.difficulty_pools import sum_by_id

    rng = np.random.default_rng(0)
    for g in (1, 7, 40):
        ids = rng.integers(-2, 5, g).astype(np.int32)
        use = rng.random(g) < 0.7
        values = rng.normal(size=(g, 3)).astype(np.float32)
        want = np.array(
            [values[use & (ids == ids[i])].sum(0) if use[i] else np.zeros(3) for i in range(g)]
        )
        got, last = sum_by_id(jnp.asarray(ids), jnp.asarray(use), jnp.asarray(values))
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
        later = [use[i] and not (use[i + 1 :] & (ids[i + 1 :] == ids[i])).any() for i in range(g)]
        assert np.asarray(last).tolist() == later


def test_equal_partial_rewards_carry_no_variance_and_are_not_noise():
    """A group of 0.5s has no reward variance (zero GRPO advantage): it is not a mixed visit
    and never looks like noise; a group of a success and a failure is."""
    s = cx.samplers.learning_progress(2)
    state = s.init(jax.random.key(0))
    for _ in range(10):
        state = s.observe(state, group_results([0, 1], [[0.5] * 4, [1.0, 0.0, 1.0, 0.0]]))
    assert state.mixed.tolist() == [0, 10]
