"""``Engine.init`` rolls nothing out, and ``generate``/``train`` compile once per engine,
across a resume in the same process too."""

import jax
from engine_test_helpers import id_pool, id_solver, in_order

import curriculax as cx
from curriculax.engine import Engine, EngineConfig, Env, run


def test_init_runs_no_rollout():
    """The pending batch's layout comes from shapes alone: a rollout with a side effect (a host
    callback here; a generation server in practice) runs only for charged batches."""
    calls = []
    solver = id_solver()

    def rollout(state, tasks, key, k):
        jax.debug.callback(lambda ids: calls.append(ids.tolist()), tasks["id"])
        return solver.rollout(state, tasks, key, k)

    env = Env("e", id_pool(8), cx.curriculum(in_order(8)), group_size=2, rollout=rollout)
    engine = Engine(solver, [env], EngineConfig(batch_groups=4))
    state = engine.init()
    jax.block_until_ready(state)
    jax.effects_barrier()
    assert calls == []
    state, _ = engine.generate(state)
    jax.block_until_ready(state)
    jax.effects_barrier()
    assert calls == [[0, 1, 2, 3]]


def test_generate_and_train_compile_once_across_a_resume(tmp_path):
    env = Env("e", id_pool(32), cx.curriculum(in_order(32)), group_size=2)
    engine = Engine(id_solver(), [env], EngineConfig(batch_groups=4, groups_per_generation=2))
    run(engine, steps=2, run_dir=tmp_path, progress=False)
    result = run(engine, steps=4, run_dir=tmp_path, resume=True, progress=False)
    assert int(result.state.counters.updates) == 4
    state = engine.init()  # and a fresh state driven by hand
    state, _ = engine.generate(state)
    state, _ = engine.generate(state)
    state, _ = engine.train(state)
    assert engine._generate._cache_size() == 1
    assert engine._train._cache_size() == 1
