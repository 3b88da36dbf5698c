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
    "category_bandit_advantage": (  # the recommended default
        lambda: cx.samplers.category_bandit(32, np.arange(32) % 3, reward="advantage"),
        32,
        8,
    ),
    "category_learnability": (
        lambda: cx.samplers.category_learnability(32, np.arange(32) % 3),
        32,
        8,
    ),
    "category_learnability_repeated_entries_small_pool": (
        lambda: cx.samplers.category_learnability(
            12, np.arange(12) % 2, entry_task=np.arange(12) % 5
        ),
        12,
        8,
    ),
    "hierarchical_learnability": (
        lambda: cx.samplers.hierarchical_learnability(32, np.arange(32) % 3),
        32,
        8,
    ),
    "hierarchical_learnability_repeated_entries_warmup": (
        lambda: cx.samplers.hierarchical_learnability(
            12, np.arange(12) % 2, entry_task=np.arange(12) % 5, unseen_first=True
        ),
        12,
        8,
    ),
    "learning_progress": (lambda: cx.samplers.learning_progress(32, patience=2.0), 32, 8),
    "learning_progress_repeated_entries": (
        lambda: cx.samplers.learning_progress(32, patience=2.0, entry_task=np.arange(32) % 5),
        32,
        8,
    ),
    "category_bandit_advantage_progress": (
        lambda: cx.samplers.category_bandit(32, np.arange(32) % 3, reward="advantage_progress"),
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
    "skip_solved_repeated_entries": (
        lambda: cx.samplers.skip_zero_variance(
            32, cx.samplers.uniform(32), skip="solved", entry_task=np.arange(32) % 5
        ),
        32,
        8,
    ),
    "skip_solved_forgetting_replay": (
        lambda: cx.samplers.skip_zero_variance(
            32, cx.samplers.uniform(32), skip="solved", replay="forgetting"
        ),
        32,
        8,
    ),
    "skip_solved_forgetting_two_misses": (
        lambda: cx.samplers.skip_zero_variance(
            32, cx.samplers.uniform(32), skip="solved", replay="forgetting", forgotten_misses=2
        ),
        32,
        8,
    ),
    "skip_solved_inner_replacements": (
        lambda: cx.samplers.skip_zero_variance(
            32, cx.samplers.learnability(32), skip="solved", replace="inner"
        ),
        32,
        8,
    ),
    "reward_consistency_learnability": (
        lambda: cx.samplers.reward_consistency(32, cx.samplers.learnability(32)),
        32,
        8,
    ),
    "uniform": (lambda: cx.samplers.uniform(32), 32, 8),
    "uniform_small_pool": (lambda: cx.samplers.uniform(5), 5, 8),
    "uniform_distinct_tasks": (
        lambda: cx.samplers.uniform(32, distinct=True, entry_task=np.arange(32) % 5),
        32,
        8,
    ),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_builtin_sampler_conforms(name, tmp_path):
    make, num_tasks, num = SAMPLERS[name]
    check_sampler(make(), num_tasks=num_tasks, num=num, checkpoint_dir=str(tmp_path))


def test_builtin_gate_conforms(tmp_path):
    check_gate(cx.gates.advantage_range(0.0, 0.0), checkpoint_dir=str(tmp_path))
    check_gate(cx.gates.advantage_range(-0.5, 0.5), checkpoint_dir=str(tmp_path))
    check_gate(cx.gates.reward_consistency(1000), checkpoint_dir=str(tmp_path))
    check_gate(cx.gates.reward_consistency(16), checkpoint_dir=str(tmp_path))  # ids past N


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


# One deliberately broken component per conformance property: the checker must name it.
BASE = cx.samplers.sequential(8)


def _traced(results) -> bool:
    return isinstance(results.rewards, jax.core.Tracer)


def _breaks_from_trace(n: int) -> cx.TaskSampler:
    """A sampler whose observe adds 1 to the cursor from its ``n``-th traced call on (eager
    calls do not count): the checker traces the jitted step first, then the lax.scan body,
    then the vmapped scan, so ``n`` picks the property the program breaks."""
    traces = [0]

    def observe(state, results):
        state = BASE.observe(state, results)
        if _traced(results):
            traces[0] += 1
            if traces[0] >= n:
                state = state._replace(cursor=state.cursor + 1)
        return state

    return BASE._replace(observe=observe)


def _wrapped(extra, observe_extra=None) -> cx.TaskSampler:
    """sequential(8) with one more state leaf ``extra()``, updated by ``observe_extra``."""

    def init(key):
        return BASE.init(key), extra()

    def sample(state, key, num):
        ids, inner = BASE.sample(state[0], key, num)
        return ids, (inner, state[1])

    def observe(state, results):
        more = state[1] if observe_extra is None else observe_extra(state[1], results)
        return BASE.observe(state[0], results), more

    return cx.TaskSampler(init, sample, observe, lambda state: BASE.metrics(state[0]), 8)


def _count_valid_batch_unaware(count, results):
    """Adds the valid rollouts through a host callback that assumes one seed: under vmap it
    receives every seed's count at once and sums them (a callback that is not batch-aware)."""
    valid = jnp.sum(results.valid, dtype=jnp.int32)
    spec = jax.ShapeDtypeStruct((), jnp.int32)
    total = jax.pure_callback(
        lambda v: np.full_like(v, v.sum()), spec, valid, vmap_method="broadcast_all"
    )
    return count + total


def _weak_cursor_init(key):
    return BASE.init(key)._replace(cursor=jnp.asarray(0))  # weakly typed


def _counts_rows(count, results):
    return count + results.task_ids.shape[0]  # padding rows included: wrong


BROKEN_SAMPLERS = {
    "ids not int32[num]": (
        BASE._replace(
            sample=lambda s, k, n: (lambda o: (o[0].astype(jnp.float32), o[1]))(
                BASE.sample(s, k, n)
            )
        ),
        r"sample must return int32\[num=8\], got float32\[8\]",
    ),
    "ids outside the declared num_tasks": (
        BASE._replace(num_tasks=4),
        r"outside its declared range \[0, num_tasks=4\)",
    ),
    "eager differs from jit": (
        BASE._replace(
            observe=lambda s, r: (lambda t: t._replace(cursor=t.cursor + _traced(r)))(
                BASE.observe(s, r)
            )
        ),
        "eager vs jit (outputs|states): values differ",
    ),
    "a metric that is not a scalar": (
        BASE._replace(metrics=lambda s: {"cursors": jnp.stack([s.cursor, s.cursor])}),
        "metric 'cursors' must be a scalar, got \\(2,\\)",
    ),
    "a state that retraces (weak type)": (
        BASE._replace(init=_weak_cursor_init),
        "the jitted step was traced 2 times over 3 calls",
    ),
    "a state leaf that changes shape": (
        _wrapped(lambda: jnp.zeros((1,), jnp.float32), lambda x, r: jnp.zeros((2,), x.dtype)),
        "traced 2 times over 3 calls; a state leaf probably changes dtype, shape",
    ),
    "lax.scan differs from step by step": (
        _breaks_from_trace(2),
        "lax.scan vs step-by-step final state",
    ),
    "vmap over seeds differs from separate runs": (
        _wrapped(lambda: jnp.zeros((), jnp.int32), _count_valid_batch_unaware),
        "vmap over seeds, seed 0",
    ),
    "a state Orbax cannot round-trip": (
        _wrapped(lambda: jnp.zeros((0,), jnp.float32)),
        "Orbax could not save and restore the state",
    ),
    "padding rows that change the state": (
        _wrapped(lambda: jnp.zeros((), jnp.int32), _counts_rows),
        "padding rows .* changed the state",
    ),
}


@pytest.mark.parametrize("name", sorted(BROKEN_SAMPLERS))
def test_check_sampler_catches_each_property(name, tmp_path):
    broken, message = BROKEN_SAMPLERS[name]
    with pytest.raises(AssertionError, match=message):
        check_sampler(broken, num_tasks=8, checkpoint_dir=str(tmp_path))


def test_a_failed_orbax_save_is_reported_even_when_its_directory_cannot_be_removed(
    tmp_path, monkeypatch
):
    # Seen in a fresh-clone run: a failed save's background writes landed in the temporary
    # directory while it was removed, and "Directory not empty" replaced the Orbax message.
    import errno
    import os

    real_rmdir = os.rmdir

    def busy_rmdir(path, *args, **kwargs):
        if str(tmp_path) in os.fsdecode(path) or kwargs.get("dir_fd") is not None:
            raise OSError(errno.ENOTEMPTY, "Directory not empty", path)
        return real_rmdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "rmdir", busy_rmdir)
    broken, message = BROKEN_SAMPLERS["a state Orbax cannot round-trip"]
    with pytest.raises(AssertionError, match=message):
        check_sampler(broken, num_tasks=8, checkpoint_dir=str(tmp_path))


def test_the_unbroken_base_passes(tmp_path):
    check_sampler(BASE, num_tasks=8, checkpoint_dir=str(tmp_path))
    check_sampler(_breaks_from_trace(4), num_tasks=8, checkpoint_dir=str(tmp_path))
    check_sampler(_wrapped(lambda: jnp.zeros((), jnp.int32)), num_tasks=8)


GATE = cx.gates.advantage_range(0.0, 0.0)


def _gate_admit_counting_rows(state, results):
    vote, inner = GATE.admit(state[0], results)
    return vote, (inner, state[1] + results.task_ids.shape[0])


def _gate_vote_by_position(state, results):
    g = results.task_ids.shape[0]
    return jnp.arange(g) < g // 2, state


BROKEN_GATES = {
    "padding rows that change the state": (
        cx.AdmissionGate(
            lambda key: (GATE.init(key), jnp.zeros((), jnp.int32)),
            _gate_admit_counting_rows,
            lambda state: GATE.metrics(state[0]),
        ),
        "padding rows .* changed the state",
    ),
    "padding rows that change the real rows' votes": (
        cx.AdmissionGate(GATE.init, _gate_vote_by_position, GATE.metrics),
        "padding rows changed the votes on the real rows",
    ),
    "a vote that is not bool": (
        cx.AdmissionGate(
            GATE.init,
            lambda s, r: (lambda o: (o[0].astype(jnp.int32), o[1]))(GATE.admit(s, r)),
            GATE.metrics,
        ),
        r"admit must return bool\[G=8\], got int32\[8\]",
    ),
}


@pytest.mark.parametrize("name", sorted(BROKEN_GATES))
def test_check_gate_catches_each_property(name, tmp_path):
    broken, message = BROKEN_GATES[name]
    with pytest.raises(AssertionError, match=message):
        check_gate(broken, checkpoint_dir=str(tmp_path))
