"""Env mixing: shares follow the weights, weight 0 never samples, group sizes are padded to the
run's largest, and pools of different structures mix when their rollouts share a layout."""

import math
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
import pytest
from engine_test_helpers import host, id_pool, id_solver, in_order, read_jsonl, trained

import curriculax as cx
from curriculax.engine import Engine, EngineConfig, Env, Rollouts, _mixer, run

N = 4096
STEPS = 1000
WEIGHTS = {"a": 1.0, "b": 3.0, "c": 0.0}
K = {"a": 2, "b": 4, "c": 3}


def _env(name):
    return Env(name, id_pool(N), cx.curriculum(in_order(N)), K[name], WEIGHTS[name])


@pytest.fixture(scope="module")
def engine():
    return Engine(id_solver(), [_env("a"), _env("b"), _env("c")], EngineConfig(batch_groups=4))


@pytest.fixture(scope="module")
def long_run(engine):
    """B = G = 4 and no gate: each generation batch trains as one update."""
    records = []
    result = run(
        engine, steps=STEPS, progress=False, traces=False, on_update=lambda s, m: records.append(m)
    )
    return host(result.state), records


def _tolerance(p, n):
    return 4 * math.sqrt(p * (1 - p) / n)  # 4 binomial standard deviations


def test_mixer_shares_match_weights(long_run):
    state, _ = long_run
    batches = state.mixer.batches
    n = int(state.counters.generations)
    assert n == STEPS and int(batches.sum()) == n
    total = sum(WEIGHTS.values())
    for i, name in enumerate(("a", "b")):
        p = WEIGHTS[name] / total
        assert abs(batches[i] / n - p) <= _tolerance(p, n), (name, batches[i] / n, p)
    assert state.mixer.groups.tolist() == (batches * 4).tolist()


def test_zero_weight_env_is_never_sampled(long_run):
    state, records = long_run
    assert int(state.mixer.batches[2]) == 0
    assert int(state.curricula["c"].sampler.cursor) == 0
    assert int(state.curricula["c"].groups) == 0
    assert all(r["batch/c"] == 0.0 for r in records)


def test_batch_share_metrics_match_weights_and_the_mixer(long_run):
    state, records = long_run
    for r in records:
        assert r["batch/a"] + r["batch/b"] + r["batch/c"] == 1.0
    share_b = np.mean([r["batch/b"] for r in records])
    assert abs(share_b - 0.75) <= _tolerance(0.75, STEPS)
    # Every group is admitted and trained: the logged shares add up to the mixer's counts.
    assert round(sum(r["batch/a"] for r in records) * 4) == int(state.mixer.groups[0])
    assert round(sum(r["batch/b"] for r in records) * 4) == int(state.mixer.groups[1])


def test_rollout_counter_sums_each_env_group_size(long_run):
    state, records = long_run
    groups = state.mixer.groups
    expected = int(groups[0]) * K["a"] + int(groups[1]) * K["b"]
    assert int(state.counters.rollouts) == expected == records[-1]["rollouts"]


def test_smaller_groups_are_padded_with_invalid_rollouts(engine, long_run):
    state, _ = long_run
    # Rows the solver trained on: K = max = 4, env a's groups carry 2 valid rollouts.
    envs = np.asarray(state.solver.envs)[: STEPS * 4]
    nvalid = np.asarray(state.solver.nvalid)[: STEPS * 4]
    assert set(nvalid[envs == 0].tolist()) == {2}
    assert set(nvalid[envs == 1].tolist()) == {4}

    s = engine.init()
    seen = set()
    for _ in range(50):
        s, gen = engine.generate(s)
        rows = host(s.pending.groups)
        env = int(gen.env)
        seen.add(env)
        assert rows.rollouts.valid.shape == (8, 4)  # capacity B + G, K = 4
        live = slice(0, 4)
        valid, mask = rows.rollouts.valid[live], rows.rollouts.token_mask[live]
        assert np.all(rows.env[live] == env)
        if env == 0:
            assert valid[:, :2].all() and not valid[:, 2:].any()
            assert mask[:, :2].all() and not mask[:, 2:].any()
            assert np.all(rows.advantages[live][:, 2:] == 0)
            assert np.all(rows.rollouts.rewards[live][:, 2:] == 0)
            assert np.all(rows.rollouts.data["task"][live][:, 2:] == 0)
            assert np.asarray(gen.valid)[:, 2:].sum() == 0
        else:
            assert valid.all() and mask.all()
        s, _ = engine.train(s)
        if seen == {0, 1}:
            break
    assert seen == {0, 1}


def test_negative_zero_and_nonfinite_weights():
    with pytest.raises(ValueError, match=r"env 'neg': weight must be >= 0, got -1"):
        Env("neg", id_pool(4), weight=-1.0)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="weight must be a finite number"):
            Env("bad", id_pool(4), weight=bad)
    envs = [Env("x", id_pool(4), weight=0.0), Env("y", id_pool(4), weight=0)]
    with pytest.raises(ValueError, match="at least one env needs a positive weight"):
        Engine(id_solver(), envs, EngineConfig(batch_groups=2))


class Puzzle(NamedTuple):
    id: jnp.ndarray  # i32[N]
    key: jnp.ndarray  # u32[N]: the pool's own stable keys
    extra: jnp.ndarray  # f32[N, 3]: reward of rollout k is extra[:, k % 3]


def _puzzle_rollout(solver_state, tasks, key, group_size):
    """Reads the NamedTuple pool; same rollout layout as the id solver's."""
    del solver_state, key
    ids = tasks.id.astype(jnp.int32)
    g = ids.shape[0]
    rewards = tasks.extra[:, jnp.arange(group_size) % 3]
    valid = jnp.ones((g, group_size), bool)
    data = {"task": jnp.broadcast_to(ids[:, None], (g, group_size))}
    return Rollouts(rewards, valid, valid[:, :, None], data)


def test_pools_with_different_structures_mix(tmp_path):
    n = 64
    ids = jnp.arange(n, dtype=jnp.int32)
    extra = jnp.stack([ids % 2, 1 - ids % 2, jnp.zeros(n, jnp.int32)], 1).astype(jnp.float32)
    puzzles = Puzzle(ids, (1000 + 7 * np.arange(n)).astype(np.uint32), extra)
    envs = [
        Env("plain", id_pool(n), cx.curriculum(in_order(n)), group_size=3),
        Env("rich", puzzles, cx.curriculum(in_order(n)), group_size=3, rollout=_puzzle_rollout),
    ]
    engine = Engine(id_solver(), envs, EngineConfig(batch_groups=4))
    assert engine.envs[1].keys.tolist() == (1000 + 7 * np.arange(n)).tolist()  # the pool's keys
    result = run(engine, steps=6, run_dir=tmp_path, progress=False)
    rows = trained(host(result.state.solver))
    assert {e for e, _ in rows} == {0, 1}
    for t in read_jsonl(tmp_path / "traces.jsonl"):
        task = t["task"]
        if t["env"] == "rich":
            assert t["key"] == 1000 + 7 * task
            assert t["rewards"] == [float(task % 2), float(1 - task % 2), 0.0]
        else:
            assert t["key"] == int(engine.envs[0].keys[task])
            assert t["rewards"] == [float((task + k) % 2) for k in range(3)]


def test_the_mixer_counts_saturate_instead_of_wrapping():
    top = jnp.iinfo(jnp.int32).max
    state = _mixer.MixerState(jnp.array([top, 5], jnp.int32), jnp.array([top - 3, 20], jnp.int32))
    state = _mixer.record(state, jnp.int32(0), 4)
    assert state.batches.tolist() == [top, 5] and state.groups.tolist() == [top, 20]
    state = _mixer.record(state, jnp.int32(1), 4)
    assert state.batches.tolist() == [top, 6] and state.groups.tolist() == [top, 24]
