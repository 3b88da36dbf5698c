"""Backfill: every update trains on exactly ``batch_groups`` admitted groups; surplus admitted
groups wait in order (across checkpoints too); rejected and non-finite groups never train."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from engine_test_helpers import (
    assert_trees_equal,
    host,
    id_pool,
    id_solver,
    in_order,
    mod_gate,
    read_jsonl,
    trained,
)

import curriculax as cx
from curriculax.checkpoint import CheckpointStore
from curriculax.engine import Engine, EngineConfig, Env, run
from curriculax.engine._restore import restore

N = 256


@pytest.fixture(scope="module")
def one_in_four():
    """B = G = 4, ids in order, a gate admitting only multiples of 4: 1 group in 4 admitted."""
    env = Env("a", id_pool(N), cx.curriculum(in_order(N), {"mod4": mod_gate(4)}), group_size=2)
    return Engine(id_solver(), [env], EngineConfig(batch_groups=4))


@pytest.fixture(scope="module")
def evens():
    """B = 3, G = 8 (G does not divide B), a gate admitting even ids: 4 admitted per batch."""
    env = Env("a", id_pool(N), cx.curriculum(in_order(N), {"even": mod_gate(2)}), group_size=2)
    return Engine(id_solver(), [env], EngineConfig(batch_groups=3, groups_per_generation=8))


def test_batch_is_full_when_three_groups_in_four_are_rejected(one_in_four):
    result = run(one_in_four, steps=3, progress=False, traces=False)
    s = host(result.state)
    # Exactly the admitted groups, 4 per update, in arrival order; nothing rejected.
    assert trained(s.solver) == [(0, i) for i in range(0, 48, 4)]
    assert np.asarray(s.solver.data_ids)[:12].tolist() == list(range(0, 48, 4))
    assert np.all(np.asarray(s.solver.nvalid)[:12] == 2)  # every row a real group
    c = s.counters
    assert (int(c.updates), int(c.generations), int(c.groups), int(c.admitted)) == (3, 12, 48, 12)
    assert int(s.pending.count) == 0
    assert result.metrics["batch/admission_rate"] == 0.25
    assert result.metrics["batch/finalized_groups"] == 16


def test_generate_appends_admitted_rows_in_order_and_train_keeps_the_surplus(evens):
    state = evens.init()
    state, gen = evens.generate(state)
    assert np.asarray(gen.task_ids).tolist() == list(range(8))
    assert np.asarray(gen.admitted).tolist() == [True, False] * 4
    assert int(gen.pending) == 4
    assert np.asarray(state.pending.groups.task_ids)[:4].tolist() == [0, 2, 4, 6]

    state, _ = evens.train(state)
    p = host(state.pending)
    assert int(p.count) == 1
    assert int(p.groups.task_ids[0]) == 6
    assert p.groups.rollouts.data["task"][0].tolist() == [6, 6]
    assert not p.groups.rollouts.valid[1:].any()  # rows past the live ones are cleared
    assert trained(host(state.solver)) == [(0, 0), (0, 2), (0, 4)]

    state, gen = evens.generate(state)
    assert int(gen.pending) == 5
    assert np.asarray(state.pending.groups.task_ids)[:5].tolist() == [6, 8, 10, 12, 14]


def test_surplus_survives_a_checkpoint_and_trains_next(evens, tmp_path):
    run_dir = tmp_path / "run"
    result = run(evens, steps=3, run_dir=run_dir, progress=False, traces=False)
    final = host(result.state)
    # 3 generations of 8 ids: admitted evens 0..22; 9 trained, 18, 20, 22 wait.
    assert trained(final.solver) == [(0, i) for i in range(0, 18, 2)]
    assert int(final.pending.count) == 3
    assert final.pending.groups.task_ids[:3].tolist() == [18, 20, 22]

    store = CheckpointStore(run_dir / "checkpoints")
    try:
        assert store.latest_step() == 3
        restored = host(restore(store, evens))
    finally:
        store.close()
    assert_trees_equal(restored.pending, final.pending, "pending")
    assert_trees_equal(restored, final, "state")

    resumed = run(evens, steps=5, run_dir=run_dir, resume=True, progress=False, traces=False)
    # The waiting groups train first, then the next generation's: nothing lost, order kept.
    assert trained(host(resumed.state.solver)) == [(0, i) for i in range(0, 30, 2)]


def _all_nonfinite(ids, k):
    """id % 4: 1 -> every reward NaN; 3 -> every reward +inf; else alternating."""
    base = ((ids[:, None] + jnp.arange(k)[None, :]) % 2).astype(jnp.float32)
    r = jnp.broadcast_to(ids[:, None] % 4, base.shape)
    return jnp.where(r == 1, jnp.nan, jnp.where(r == 3, jnp.inf, base))


def test_nonfinite_groups_are_counted_failed_and_never_trained(tmp_path):
    env = Env("a", id_pool(N), cx.curriculum(in_order(N)), group_size=4)
    engine = Engine(id_solver(_all_nonfinite), [env], EngineConfig(batch_groups=4))

    state, gen = engine.generate(engine.init())
    assert np.asarray(gen.admitted).tolist() == [True, False, True, False]
    assert np.asarray(gen.valid).tolist() == [[True] * 4, [False] * 4] * 2
    pending = host(state.pending.groups)
    assert np.all(np.isfinite(pending.rollouts.rewards))
    assert np.all(np.isfinite(pending.advantages))

    records = []
    result = run(
        engine, steps=2, run_dir=tmp_path, progress=False, on_update=lambda s, m: records.append(m)
    )
    s = host(result.state)
    # 4 generations of ids 0..15: the even ids are admitted, 8 rows trained.
    assert trained(s.solver) == [(0, i) for i in range(0, 16, 2)]
    assert np.asarray(s.solver.nvalid)[:8].tolist() == [4] * 8
    assert float(s.solver.reward_sum) == 16.0  # 2 per group; NaN/inf never reached it
    assert np.all(np.isfinite(s.pending.groups.rollouts.rewards))
    assert records[-1]["curriculum/a/nonfinite"] == 8 * 4  # 8 groups x 4 rollouts
    assert records[-1]["curriculum/a/failed_groups"] == 8
    traces = read_jsonl(tmp_path / "traces.jsonl")
    bad = [t for t in traces if t["task"] % 2 == 1]
    assert len(bad) == 8
    assert all(not t["admitted"] and t["valid"] == [False] * 4 for t in bad)


def _one_nan(ids, k):
    """Odd ids: rollout 0 gets a NaN reward, the others alternate; even ids alternate."""
    base = ((ids[:, None] + jnp.arange(k)[None, :]) % 2).astype(jnp.float32)
    first = jnp.arange(k)[None, :] == 0
    return jnp.where((ids[:, None] % 2 == 1) & first, jnp.nan, base)


def test_a_nan_reward_invalidates_only_its_rollout():
    """A NaN reward makes that rollout invalid (and counts 1 in ``nonfinite``); the group's
    other rollouts are clean and keep training. Credit must therefore be computed over the
    rollouts with finite rewards, not poisoned by the NaN."""
    env = Env("a", id_pool(N), cx.curriculum(in_order(N)), group_size=4)
    engine = Engine(id_solver(_one_nan), [env], EngineConfig(batch_groups=4))
    state, gen = engine.generate(engine.init())
    assert np.asarray(gen.valid).tolist() == [[True] * 4, [False, True, True, True]] * 2
    assert np.asarray(gen.admitted).tolist() == [True] * 4
    assert int(state.curricula["a"].nonfinite) == 2
    adv = np.asarray(state.pending.groups.advantages)[:4, :, 0]
    # id 1, rollouts 1..3 score 0, 1, 0: centred on their own mean 1/3.
    np.testing.assert_allclose(adv[1], [0.0, -1 / 3, 2 / 3, -1 / 3], atol=1e-6)


def test_the_pure_fused_step_matches_the_host_loop_and_vmaps_over_seeds():
    from curriculax.engine import synthetic_solver, synthetic_tasks

    env = Env(
        "a",
        synthetic_tasks(64),
        cx.curriculum(cx.samplers.difficulty_pools(64), {"z": cx.gates.advantage_range()}),
        group_size=4,
    )
    engine = Engine(
        synthetic_solver(), [env], EngineConfig(batch_groups=8, groups_per_generation=4)
    )

    def scan(state, steps):
        return jax.lax.scan(lambda s, _: engine.step(s), state, None, length=steps)

    final, reports = jax.jit(scan, static_argnums=1)(engine.init(jax.random.key(0)), 30)
    updates = int(final.counters.updates)
    assert int(reports.updates.sum()) == updates > 0
    # The host loop from the same seed, run to the same number of generation batches.
    host = run(engine, steps=updates, state=engine.init(jax.random.key(0)), progress=False)
    assert int(host.state.counters.generations) <= 30
    np.testing.assert_array_equal(host.state.solver.skill, final.solver.skill)
    # Four seeds as one program: each equals its own single-seed scan.
    keys = jax.random.split(jax.random.key(1), 4)
    batched, _ = jax.jit(jax.vmap(lambda k: scan(engine.init(k), 10)))(keys)
    single, _ = jax.jit(lambda k: scan(engine.init(k), 10))(keys[2])
    np.testing.assert_array_equal(batched.solver.skill[2], single.solver.skill)
    assert int(batched.counters.generations[2]) == 10
