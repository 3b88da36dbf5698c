"""cx.gates.reward_consistency: no group of a task whose reward contradicted itself trains."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curriculax as cx
from curriculax.testing import group_results


def _batch(ids, rewards, answers, valid=None):
    r = group_results(ids, rewards, valid=valid)
    return r._replace(answers=jnp.asarray(answers, jnp.int32))


def _admit(gate, state, results):
    vote, state = jax.jit(gate.admit)(state, results)
    assert vote.dtype == jnp.bool_ and vote.shape == results.task_ids.shape
    return vote.tolist(), state


def test_it_rejects_a_contradicting_group_and_every_later_group_of_its_task():
    gate = cx.gates.reward_consistency(4)
    state = gate.init(jax.random.key(0))
    # Task 1: one answer, two rewards. Task 2: the same rewards, answers apart. Task 3: a
    # second group of task 1's in the batch is not contradicting but is rejected with it.
    first = _batch([1, 2, 1], [[1.0, 0.0], [1.0, 0.0], [1.0, 1.0]], [[4, 4], [4, 5], [6, 6]])
    vote, state = _admit(gate, state, first)
    assert vote == [False, True, False]
    assert cx.samplers.contradicted_tasks(state).tolist() == [1]
    # Later groups of task 1 are rejected whatever their answers; task 2 still trains.
    later = _batch([1, 2, 0], [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]], [[4, 5], [7, 8], [2, 3]])
    vote, state = _admit(gate, state, later)
    assert vote == [False, True, True]
    m = gate.metrics(state)
    assert float(m["rejected"]) == 3.0
    assert float(m["contradicted"]) == 1.0
    assert float(m["admit_rate"]) == pytest.approx(2 / 3)


def test_equal_answers_with_an_invalid_rollout_or_equal_rewards_pass():
    gate = cx.gates.reward_consistency(4)
    r = _batch(
        [0, 1, 2],
        [[1.0, 0.0], [0.5, 0.5], [1.0, 0.0]],
        [[3, 3], [3, 3], [3, 3]],
        valid=[[1, 0], [1, 1], [1, 1]],
    )
    vote, state = _admit(gate, gate.init(jax.random.key(0)), r)
    assert vote == [True, True, False]
    assert cx.samplers.contradicted_tasks(state).tolist() == [2]


def test_a_nan_reward_proves_nothing_even_outside_a_curriculum():
    """A rollout is not compared with itself (NaN != NaN), nor a non-finite reward at all:
    the gate used alone (a curriculum makes such rollouts invalid first) once marked task 1
    for good from one valid rollout whose reward was NaN."""
    gate = cx.gates.reward_consistency(4)
    state = gate.init(jax.random.key(0))
    nan = float("nan")
    batch = _batch(
        [1, 2], [[nan, 0.0], [nan, nan]], [[3, 4], [5, 5]], valid=[[True, False], [True, True]]
    )
    vote, state = _admit(gate, state, batch)
    assert vote == [True, True]
    assert cx.samplers.contradicted_tasks(state).tolist() == []


def test_a_task_id_past_the_pool_is_judged_by_its_own_answers():
    gate = cx.gates.reward_consistency(2)
    r = _batch([5, 5], [[1.0, 0.0], [1.0, 0.0]], [[1, 1], [1, 2]])
    vote, state = _admit(gate, gate.init(jax.random.key(0)), r)
    assert vote == [False, True]
    assert not np.asarray(state.contradicted).any()


def test_without_answers_it_says_what_it_needs():
    gate = cx.gates.reward_consistency(4)
    with pytest.raises(ValueError, match=r"GroupResults\.answers"):
        gate.admit(gate.init(jax.random.key(0)), group_results([1], [[1.0, 0.0]]))


def test_in_a_curriculum_a_rejected_group_is_not_admitted_and_the_config_builds_it():
    config = {
        "sampler": {"type": "reward_consistency", "inner": {"type": "uniform"}},
        "gates": {"consistency": {"type": "reward_consistency"}},
    }
    cur = cx.curriculum_from_config(config, 4)
    state = cur.init(jax.random.key(0))
    admission, state = cur.observe(
        state, _batch([1, 2], [[1.0, 0.0], [1.0, 0.0]], [[4, 4], [4, 5]])
    )
    assert admission.admitted.tolist() == [False, True]
    assert admission.by_gate["consistency"].tolist() == [False, True]
    m = cur.metrics(state)
    assert float(m["gate/consistency/rejected"]) == 1.0
    assert float(m["sampler/noise/contradicted"]) == 1.0
    # The sampler and the gate saw the same groups: their marks agree, so one call reads both.
    assert cx.samplers.contradicted_tasks(state).tolist() == [1]
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['patience'\]"):
        cx.curriculum_from_config(
            {"gates": {"c": {"type": "reward_consistency", "patience": 2}}}, 4
        )


def test_a_curriculum_refuses_a_gate_built_for_another_pool_size():
    """A gate for 10 tasks over a pool of 100 never marked task 50: its proven-noisy groups
    went on training, and nothing said the gate was smaller than the pool."""
    gate = cx.gates.reward_consistency(10)
    assert gate.num_tasks == 10
    with pytest.raises(ValueError, match=r"gate 'consistency' was built for 10 tasks .* 100"):
        cx.curriculum(cx.samplers.uniform(100), gates={"consistency": gate})
    cx.curriculum(cx.samplers.uniform(10), gates={"consistency": gate})
    # A sampler that declares no pool size is not checked (nothing to compare).
    bare = cx.samplers.uniform(100)._replace(num_tasks=None)
    cx.curriculum(bare, gates={"consistency": gate})


def test_contradicted_tasks_refuses_marks_that_disagree():
    gate = cx.gates.reward_consistency(4)
    a = gate.init(jax.random.key(0))
    _, b = gate.admit(a, _batch([1], [[1.0, 0.0]], [[4, 4]]))
    with pytest.raises(ValueError, match="disagree"):
        cx.samplers.contradicted_tasks({"x": a, "y": b})
    with pytest.raises(ValueError, match="found 0"):
        cx.samplers.contradicted_tasks({"x": 1})


def test_built_alone_from_a_config_it_asks_for_the_pool_size():
    with pytest.raises(
        ValueError,
        match=r"missing \['num_tasks'\].*cx\.gate_from_config\(spec, 'consistency', num_tasks=",
    ):
        cx.gate_from_config({"type": "reward_consistency"}, "consistency")
    gate = cx.gate_from_config({"type": "reward_consistency"}, "consistency", num_tasks=3)
    assert gate.init(jax.random.key(0)).contradicted.shape == (3,)
