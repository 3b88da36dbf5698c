"""Every built-in sampler and gate goes through the public conformance suite."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curriculax as cx
from curriculax.testing import check_gate, check_sampler

SAMPLERS = {
    "sequential": (lambda: cx.samplers.sequential(32), 32, 8),
    "sequential_small_pool": (lambda: cx.samplers.sequential(5, seed=3), 5, 8),
    "sequential_source_order": (lambda: cx.samplers.sequential(32, shuffle=False), 32, 8),
    "sequential_infinite": (lambda: cx.samplers.sequential(None), 2**20, 8),
    "difficulty_pools": (lambda: cx.samplers.difficulty_pools(32), 32, 8),
    "difficulty_pools_small_pool": (lambda: cx.samplers.difficulty_pools(5), 5, 8),
    "learnability": (lambda: cx.samplers.learnability(32), 32, 8),
    "learnability_small_pool_mean_no_warmup": (
        lambda: cx.samplers.learnability(5, draw="mean", unseen_first=False, half_life=None),
        5,
        8,
    ),
    "learnability_repeated_entries": (
        lambda: cx.samplers.learnability(32, entry_task=np.arange(32) % 5),
        32,
        8,
    ),
    "category_bandit_progress": (
        lambda: cx.samplers.category_bandit(32, np.arange(32) % 3, reward="progress"),
        32,
        8,
    ),
    "floor_learnability": (
        lambda: cx.samplers.floor(
            32, cx.samplers.learnability(32), uniform_share=0.2, staleness_share=0.2
        ),
        32,
        8,
    ),
    "skip_zero_variance": (
        lambda: cx.samplers.skip_zero_variance(32, cx.samplers.uniform(32), initial_p=0.0),
        32,
        8,
    ),
    "uniform": (lambda: cx.samplers.uniform(32), 32, 8),
    "uniform_small_pool": (lambda: cx.samplers.uniform(5), 5, 8),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_builtin_sampler_conforms(name, tmp_path):
    make, num_tasks, num = SAMPLERS[name]
    check_sampler(make(), num_tasks=num_tasks, num=num, checkpoint_dir=str(tmp_path))


def test_builtin_gate_conforms(tmp_path):
    check_gate(cx.gates.advantage_range(0.0, 0.0), checkpoint_dir=str(tmp_path))
    check_gate(cx.gates.advantage_range(-0.5, 0.5), checkpoint_dir=str(tmp_path))


def test_check_sampler_catches_a_state_that_changes_dtype(tmp_path):
    base = cx.samplers.sequential(8)

    def observe(state, results):
        return state._replace(cursor=state.cursor.astype(jnp.float32))

    broken = cx.TaskSampler(base.init, base.sample, observe, base.metrics)
    with pytest.raises(AssertionError, match=r"dtype|structure|traced"):
        check_sampler(broken, num_tasks=8, checkpoint_dir=str(tmp_path))


def test_check_sampler_catches_a_state_holding_one_array_twice(tmp_path):
    base = cx.samplers.sequential(8)

    def init(key):
        zero = jnp.zeros((), jnp.int32)
        return base.init(key)._replace(epoch=zero, cursor=zero)

    broken = cx.TaskSampler(init, base.sample, base.observe, base.metrics)
    with pytest.raises(AssertionError, match="two leaves are the same array"):
        check_sampler(broken, num_tasks=8, checkpoint_dir=str(tmp_path))


def test_check_gate_catches_a_vote_of_the_wrong_shape(tmp_path):
    base = cx.gates.advantage_range()

    def admit(state, results):
        vote, state = base.admit(state, results)
        return jnp.stack([vote, vote]), state

    broken = cx.AdmissionGate(base.init, admit, base.metrics)
    with pytest.raises(AssertionError, match=r"bool\[G=8\]"):
        check_gate(broken, checkpoint_dir=str(tmp_path))


def test_check_sampler_catches_ids_out_of_range(tmp_path):
    base = cx.samplers.sequential(8)

    def sample(state, key, num):
        ids, state = base.sample(state, key, num)
        return ids + 100, state

    broken = cx.TaskSampler(base.init, sample, base.observe, base.metrics)
    with pytest.raises(AssertionError, match="outside"):
        check_sampler(broken, num_tasks=8, checkpoint_dir=str(tmp_path))


def test_synthetic_results_are_a_pure_function_of_their_inputs():
    from curriculax.testing import synthetic_results

    ids = jnp.arange(4)
    b = synthetic_results(jax.random.key(0), ids)
    c = synthetic_results(jax.random.key(0), ids)
    for x, y in zip(b, c):
        assert jnp.array_equal(x, y)
