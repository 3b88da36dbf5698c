"""cx.samplers.floor: the uniform share and the staleness sweep bound any sampler's worst case."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curriculax as cx

N = 64


def _stubborn(n):
    """A sampler that always hands out tasks 0, 1, ..., num - 1 (the worst case)."""

    def sample(state, key, num):
        return jnp.arange(num, dtype=jnp.int32) % n, state

    return cx.TaskSampler(
        lambda key: cx.EmptyState(), sample, lambda s, r: s, lambda s: {"calls": jnp.float32(0)}
    )


def _calls(sampler, calls, num):
    """Scans ``calls`` sample calls; returns (final state, ``i32[calls, num]`` ids)."""

    def step(state, key):
        ids, state = sampler.sample(state, key, num)
        return state, ids

    keys = jax.random.split(jax.random.key(0), calls)
    return jax.jit(lambda s: jax.lax.scan(step, s, keys))(sampler.init(jax.random.key(1)))


@pytest.mark.parametrize("num", [1, 8])
def test_the_uniform_share_holds_for_any_num_and_reaches_every_task(num):
    s = cx.samplers.floor(N, _stubborn(N), uniform_share=0.25)
    calls = 3000 // num
    state, ids = _calls(s, calls, num)
    total = calls * num
    share = float(state.uniform_draws) / total
    assert abs(share - 0.25) < 5 * np.sqrt(0.25 * 0.75 / total) + 1 / num / calls
    counts = np.bincount(np.asarray(ids).ravel(), minlength=N)
    assert counts.min() > 0  # the stubborn sampler alone would never leave its first tasks
    if num == 8:
        assert all(len(set(row)) == num for row in np.asarray(ids).tolist())


def test_the_staleness_share_sweeps_the_pool():
    # One position in eight goes to the stalest task: every task is drawn within N calls.
    s = cx.samplers.floor(N, _stubborn(N), uniform_share=0.0, staleness_share=1 / 8)
    state, ids = _calls(s, 3 * N, 8)
    ids = np.asarray(ids)
    assert set(ids[:N].ravel().tolist()) == set(range(N))
    m = {k: float(v) for k, v in s.metrics(state).items()}
    assert m["max_staleness"] <= N
    assert m["stale_draws"] == 3 * N
    assert "inner/calls" in m


def test_shares_summing_to_one_hold_in_expectation_and_leave_the_inner_sampler_none():
    """Half uniform, half stale, one draw a call: each share is 0.5 and no draw is the inner
    sampler's (rounded apart, the two counts lost half the stale draws to it)."""
    s = cx.samplers.floor(16, _stubborn(16), uniform_share=0.5, staleness_share=0.5)
    calls = 4000
    state, _ = _calls(s, calls, 1)
    uniform, stale = float(state.uniform_draws) / calls, float(state.stale_draws) / calls
    assert abs(uniform - 0.5) < 5 * np.sqrt(0.25 / calls)
    assert uniform + stale == pytest.approx(1.0)


def test_shares_of_zero_pass_the_inner_sampler_through():
    inner = cx.samplers.sequential(N, shuffle=False)
    s = cx.samplers.floor(N, inner, uniform_share=0.0)
    _, ids = _calls(s, 4, 16)
    assert np.asarray(ids).ravel().tolist() == list(range(N))


def test_nested_config_and_errors():
    spec = {
        "type": "floor",
        "inner": {"type": "learnability", "uniform_share": 0.0},
        "uniform_share": 0.1,
        "staleness_share": 0.1,
    }
    cur = cx.curriculum_from_config({"sampler": spec}, N)
    _, state = jax.jit(cur.sample, static_argnums=2)(
        cur.init(jax.random.key(0)), jax.random.key(1), 8
    )
    assert "sampler/inner/pool/unseen" in jax.jit(cur.metrics)(state)
    with pytest.raises(ValueError, match=r"sampler \(type 'floor'\): missing \['inner'\]"):
        cx.sampler_from_config({"type": "floor"}, N)
    with pytest.raises(ValueError, match=r"sampler\.inner \(type 'nope'\): unknown sampler"):
        cx.sampler_from_config({"type": "floor", "inner": {"type": "nope"}}, N)
    with pytest.raises(ValueError, match=r"uniform_share \(0.6\) \+ staleness_share \(0.5\)"):
        cx.samplers.floor(N, _stubborn(N), uniform_share=0.6, staleness_share=0.5)
    with pytest.raises(ValueError, match=r"inner sampler is built for num_tasks=10, the"):
        cx.samplers.floor(N, cx.samplers.uniform(10))
    with pytest.raises(TypeError, match=r"floor: inner must be a TaskSampler"):
        cx.samplers.floor(N, "uniform")
    frontier_like = _stubborn(N)._replace(
        sample=lambda s, k, num: (
            cx.TaskDraw(jnp.zeros(num, jnp.int32), jnp.ones(num, bool), None, None),
            s,
        )
    )
    with pytest.raises(TypeError, match=r"floor wraps samplers that return pool task ids"):
        wrapped = cx.samplers.floor(N, frontier_like)
        wrapped.sample(wrapped.init(jax.random.key(0)), jax.random.key(0), 4)


def test_equal_ages_late_in_a_run_are_drawn_from_the_whole_pool():
    # after 2**22 calls float32 keeps none of the keys' noise: every never-drawn task ties,
    # and the stale positions must not all go to the lowest ids
    n = 4096
    s = cx.samplers.floor(n, _stubborn(n), uniform_share=0.0, staleness_share=1.0)
    state = s.init(jax.random.key(0))._replace(calls=jnp.int32(2**22))
    sample = jax.jit(s.sample, static_argnums=2)
    keys = jax.random.split(jax.random.key(1), 100)
    got = np.concatenate([np.asarray(sample(state, key, 16)[0]) for key in keys])
    assert 0.09 < np.mean(got < n // 8) < 0.16
