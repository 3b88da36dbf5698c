"""cx.samplers.reward_consistency: one answer with two rewards proves a task's reward is noise.

The simulated pool's coin flips give answers drawn apart from their rewards; its real tasks'
answers are functions of the reward (simulated_pool._results). Measured with exactly the set-up
of ``noisy_runs`` (2026-12-02, 4 seeds, 50% coin flips, 600 steps of 16 groups of 8): the
wrapped learnability put 0.069-0.072 of its draws on coin flips (learnability alone
0.776-0.785, learning_progress 0.421-0.428), drew each open learning task 0.100-0.106 times per
step against 0.004 per coin flip, learned every learning task (by step 253-287; learnability
alone 0.29-0.41 of them in 600 steps), and marked every coin flip it drew and no other task.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curriculax as cx
from curriculax import simulated_pool as sp
from curriculax.testing import group_results

N, NUM, STEPS = 512, 16, 600


def _with_answers(results, answers):
    return results._replace(answers=jnp.asarray(answers, jnp.int32))


def test_a_group_contradicts_itself_only_with_one_answer_and_two_rewards():
    r = group_results(
        [0, 1, 2, 3, 4],
        [
            [1.0, 0.0, 1.0],  # answers 5, 5, 6: one answer, two rewards
            [1.0, 0.0, 1.0],  # answers 5, 6, 5: each answer one reward
            [0.3, 0.1 + 0.2, 0.0],  # one answer; 0.1 + 0.2 != 0.3 in float32 exactly
            [0.5, 0.5, 0.5],  # one answer, one reward
            [1.0, 0.0, 1.0],  # one answer, but the failure is not a valid rollout
        ],
        valid=[[1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 0, 1]],
    )
    r = _with_answers(r, [[5, 5, 6], [5, 6, 5], [7, 7, 8], [1, 1, 1], [3, 3, 3]])
    expected_third = np.float32(0.3) != np.float32(0.1) + np.float32(0.2)
    assert np.asarray(cx.samplers.contradicting_groups(r)).tolist() == [
        True,
        False,
        bool(expected_third),
        False,
        False,
    ]


def test_without_answers_it_says_what_it_needs():
    s = cx.samplers.reward_consistency(4, cx.samplers.uniform(4))
    with pytest.raises(ValueError, match=r"GroupResults\.answers"):
        s.observe(s.init(jax.random.key(0)), group_results([1], [[1.0, 0.0]]))
    with pytest.raises(ValueError, match=r"answers must be i32\[G=1, K=2\]"):
        cx.curriculum(s).observe(
            s.init(jax.random.key(0)),
            _with_answers(group_results([1], [[1.0, 0.0]]), [[1, 2, 3]]),
        )


def test_a_contradicted_task_reaches_the_inner_sampler_as_failures_from_then_on():
    inner = cx.samplers.learnability(4, half_life=None)
    s = cx.samplers.reward_consistency(4, inner)
    state = s.init(jax.random.key(0))
    # Task 1 contradicts itself; task 2 has the same rewards with distinct answers.
    first = _with_answers(group_results([1, 2], [[1.0, 0.0], [1.0, 0.0]]), [[4, 4], [4, 5]])
    state = s.observe(state, first)
    # Later, a group of task 1 that does not contradict itself is muted all the same.
    later = _with_answers(group_results([1, 2], [[1.0, 1.0], [1.0, 1.0]]), [[4, 4], [4, 4]])
    state = s.observe(state, later)
    ref = inner.init(jax.random.key(0))
    ref = inner.observe(ref, group_results([1, 2], [[0.0, 0.0], [1.0, 0.0]]))
    ref = inner.observe(ref, group_results([1, 2], [[0.0, 0.0], [1.0, 1.0]]))
    for a, b in zip(jax.tree.leaves(state.inner), jax.tree.leaves(ref), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert cx.samplers.contradicted_tasks(state).tolist() == [1]
    m = s.metrics(state)
    assert float(m["noise/contradicted"]) == 1.0
    assert float(m["noise/contradicting_groups"]) == 1.0
    assert "inner/pool/unseen" in m


def test_muted_groups_are_failures_for_rewards_of_minus_one_and_one():
    """With rewards in {-1, 1} and a success threshold of 0, a muted reward of 0 counted as a
    success (a proven coin flip read as solved); muted_reward=-1 makes it a failure."""
    inner = cx.samplers.learnability(4, success_threshold=0.0, half_life=None)
    coin = _with_answers(group_results([1], [[1.0, -1.0, 1.0, -1.0]]), [[7, 7, 7, 7]])
    for muted, successes, failures in ((0.0, 4.0, 0.0), (-1.0, 0.0, 4.0)):
        s = cx.samplers.reward_consistency(4, inner, muted_reward=muted)
        state = s.observe(s.init(jax.random.key(0)), coin)
        assert float(state.inner.successes[1]) == successes
        assert float(state.inner.failures[1]) == failures
    for bad, error in ((float("nan"), ValueError), (True, TypeError), ("0", TypeError)):
        with pytest.raises(error, match="muted_reward"):
            cx.samplers.reward_consistency(4, inner, muted_reward=bad)


@pytest.fixture(scope="module")
def noisy_runs():
    pool = sp.make_pool(
        N,
        trivial=0.2,
        informative=0.0,
        emerging=0.0,
        coin_flip=0.5,
        learning=0.1,
        learn_draws=20,
        seed=3,
    )
    keys = jax.random.split(jax.random.key(7), 4)
    out = {}
    for name, sampler in {
        "wrapped": cx.samplers.reward_consistency(N, cx.samplers.learnability(N)),
        "learnability": cx.samplers.learnability(N),
    }.items():
        trace = sp.run(sampler, pool, steps=STEPS, num=NUM, keys=keys)
        out[name] = (sp.summarize(pool, trace), trace)
    return pool, out


def test_a_coin_flip_is_never_preferred_over_a_task_the_policy_is_learning(noisy_runs):
    _, out = noisy_runs
    m, _ = out["wrapped"]
    lb, _ = out["learnability"]
    # every seed: an open learning task is drawn far more often than a coin flip ...
    assert np.all(m["learning_rate"] > 10 * m["coin_flip_rate"])
    # ... while the same sampler unwrapped does the opposite on the same pool
    assert np.all(lb["coin_flip_rate"] > lb["learning_rate"])
    # at most 30% of the draws on coin flips (issue 17's bar), against learnability's 78%
    assert np.all(m["coin_flip_share"] <= 0.3)
    assert np.all(lb["coin_flip_share"] >= 0.5)
    # every learning task gets learned; unwrapped, not all of them
    assert np.all(m["learned_share"] == 1.0)
    assert np.all(lb["learned_share"] < 1.0)


def test_the_marks_fall_on_coin_flips_only():
    pool = sp.make_pool(64, trivial=0.2, coin_flip=0.5, learning=0.2, learn_draws=5, seed=1)
    s = cx.samplers.reward_consistency(64, cx.samplers.uniform(64))
    keys = jax.random.split(jax.random.key(3), 2)
    # uniform draws every task; after 40 steps of 16 each coin flip has ~10 groups of 8
    trace = sp.run(s, pool, steps=40, num=16, keys=keys)
    flags = np.asarray(trace.state.contradicted)
    coin = np.asarray(pool.kind) == sp.COIN_FLIP
    assert flags[:, coin].all()
    assert not flags[:, ~coin].any()


def test_draws_of_a_marked_task_are_replaced_except_for_the_floor():
    n = 8
    s = cx.samplers.reward_consistency(n, cx.samplers.uniform(n), keep_share=0.0)
    state = s.init(jax.random.key(0))
    bad = _with_answers(group_results([0, 1, 2], [[1.0, 0.0]] * 3), [[3, 3]] * 3)
    state = s.observe(state, bad)
    assert cx.samplers.contradicted_tasks(state).tolist() == [0, 1, 2]
    step = jax.jit(lambda st, k: s.sample(st, k, 5))
    seen = set()
    for i in range(50):
        ids, state = step(state, jax.random.key(i))
        ids = np.asarray(ids).tolist()
        assert len(set(ids)) == 5 and not set(ids) & {0, 1, 2}
        seen |= set(ids)
    assert seen == {3, 4, 5, 6, 7}
    assert float(s.metrics(state)["noise/skipped"]) > 0
    # keep_share = 1: marked tasks are muted but still drawn as the inner sampler draws them
    s1 = cx.samplers.reward_consistency(n, cx.samplers.uniform(n), keep_share=1.0)
    state1 = s1.observe(s1.init(jax.random.key(0)), bad)
    ids1, _ = s1.sample(state1, jax.random.key(5), 8)
    assert sorted(np.asarray(ids1).tolist()) == list(range(8))


def test_on_a_pool_without_noise_nothing_is_marked_or_skipped():
    # Every real task's reward is a function of its answer: no group can contradict itself,
    # so the wrapper changes no draw's fate and the inner sampler sees every reward as it was.
    pool = sp.make_pool(128, trivial=0.2, informative=0.2, learning=0.2, learn_draws=5, seed=2)
    s = cx.samplers.reward_consistency(128, cx.samplers.learnability(128))
    trace = sp.run(s, pool, steps=60, num=16, keys=jax.random.split(jax.random.key(0), 2))
    assert not np.asarray(trace.state.contradicted).any()
    assert np.asarray(trace.state.groups).tolist() == [0, 0]
    assert np.asarray(trace.state.skipped).tolist() == [0, 0]


def test_a_proof_on_one_copy_mutes_and_skips_every_copy_of_its_task():
    """Entries 0-3 hold one task, 4-7 another: a contradicting group of entry 0 marks 0-3, so
    a group of entry 1 reaches the inner sampler as failures and no copy is drawn again
    (keep_share 0), as the gate of that name rejects every copy."""
    et = [0, 0, 0, 0, 1, 1, 1, 1]
    inner = cx.samplers.learnability(8, entry_task=et, draw="mean", uniform_share=0.0)
    s = cx.samplers.reward_consistency(8, inner, keep_share=0.0)
    state = s.init(jax.random.key(0))
    proof = group_results([0], [[1.0, 0.0, 1.0, 0.0]])._replace(answers=jnp.array([[7] * 4]))
    state = s.observe(state, proof)
    assert cx.samplers.contradicted_tasks(state).tolist() == [0, 1, 2, 3]
    other_copy = group_results([1], [[1.0, 0.0, 1.0, 0.0]])._replace(
        answers=jnp.array([[1, 2, 3, 4]])
    )
    state = s.observe(state, other_copy)
    assert float(state.inner.successes[0]) == 0.0  # muted: failures only
    drawn = np.concatenate(
        [np.asarray(s.sample(state, jax.random.key(i), 2)[0]) for i in range(100)]
    )
    assert set(drawn.tolist()) <= {4, 5, 6, 7}

    gate = cx.gates.reward_consistency(8, entry_task=et)
    g = gate.init(jax.random.key(0))
    vote, g = gate.admit(g, proof)
    vote2, g = gate.admit(g, other_copy._replace(task_ids=jnp.array([2])))
    assert vote.tolist() == [False] and vote2.tolist() == [False]
    assert cx.samplers.contradicted_tasks(g).tolist() == [0, 1, 2, 3]


def test_a_config_hands_the_copy_map_to_the_sampler_as_to_the_gate():
    """Entries 0 and 1 hold one task; the config passes ``entry_task`` as context. Before, the
    sampler learned the copies only from its inner sampler's ``entry_task`` and had no
    argument of its own, so with uniform inside (which advertises none) a proof on entry 0
    marked both copies in the gate but entry 0 alone in the sampler: entry 1 was still drawn
    (``keep_share=0``) and reached ``inner`` unmuted, and ``contradicted_tasks`` raised on the
    curriculum's state, whose two sets of marks disagreed."""
    et = np.array([0, 0, 1, 2])
    config = {
        "sampler": {"type": "reward_consistency", "keep_share": 0.0, "inner": {"type": "uniform"}},
        "gates": {"consistency": {"type": "reward_consistency"}},
    }
    cur = cx.curriculum_from_config(config, 4, entry_task=et)
    assert cur.sampler.entry_task is None  # uniform keeps no per-task state to place
    state = cur.init(jax.random.key(0))
    proof = group_results([0], [[1.0, 0.0]])._replace(answers=jnp.array([[7, 7]]))
    _, state = cur.observe(state, proof)
    assert np.asarray(state.sampler.contradicted).tolist() == [True, True, False, False]
    assert np.asarray(state.gates["consistency"].contradicted).tolist() == [
        True,
        True,
        False,
        False,
    ]
    assert cx.samplers.contradicted_tasks(state).tolist() == [0, 1]
    keys = jax.random.split(jax.random.key(1), 100)
    drawn = np.asarray(jax.vmap(lambda k: cur.sample(state, k, 2)[0])(keys))
    assert set(drawn.ravel().tolist()) == {2, 3}


def test_its_own_entry_task_must_group_entries_as_the_inner_samplers_does():
    """``entry_task`` given to both the wrapper and its inner sampler: the same grouping under
    other labels is fine (the wrapper still advertises the inner sampler's, which says where
    that state sits); another grouping is refused. Without its own, the inner one's holds."""
    inner = cx.samplers.learnability(4, entry_task=[0, 0, 1, 2])
    s = cx.samplers.reward_consistency(4, inner, entry_task=[9, 9, 3, 5])
    np.testing.assert_array_equal(s.entry_task, [0, 0, 2, 3])
    with pytest.raises(ValueError, match="reward_consistency: entry_task groups"):
        cx.samplers.reward_consistency(4, inner, entry_task=[0, 1, 1, 2])
    with pytest.raises(ValueError, match="reward_consistency: entry_task groups"):
        cx.samplers.reward_consistency(4, inner, entry_task=[0, 1, 2, 3])
    # Its own map where the inner sampler keeps per-entry state: marks every copy, and
    # advertises none (the inner state is per entry; its own marks are alike on all copies).
    s = cx.samplers.reward_consistency(4, cx.samplers.learnability(4), entry_task=[0, 0, 1, 2])
    assert s.entry_task is None
    proof = group_results([1], [[1.0, 0.0]])._replace(answers=jnp.array([[7, 7]]))
    state = s.observe(s.init(jax.random.key(0)), proof)
    assert cx.samplers.contradicted_tasks(state).tolist() == [0, 1]


def test_numpy_numbers_are_numbers():
    """numpy keep_share and muted_reward were refused ("must be a number"); they mute and
    draw as the Python numbers of the same value."""
    inner = cx.samplers.learnability(4, success_threshold=0.0, half_life=None)
    coin = _with_answers(group_results([1], [[1.0, -1.0, 1.0, -1.0]]), [[7, 7, 7, 7]])
    runs = []
    for keep_share, muted_reward in ((np.float32(0.5), np.int64(-1)), (0.5, -1.0)):
        s = cx.samplers.reward_consistency(
            4, inner, keep_share=keep_share, muted_reward=muted_reward
        )
        state = s.observe(s.init(jax.random.key(0)), coin)
        draws = [s.sample(state, jax.random.key(k), 2)[0] for k in range(20)]
        runs.append((float(state.inner.failures[1]), np.asarray(draws)))
    assert runs[0][0] == runs[1][0] == 4.0
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    with pytest.raises(TypeError, match=r"keep_share must be a number, got np.True_"):
        cx.samplers.reward_consistency(4, inner, keep_share=np.bool_(True))
    with pytest.raises(ValueError, match=r"keep_share must lie in \[0, 1\], got 2"):
        cx.samplers.reward_consistency(4, inner, keep_share=np.float32(2))
