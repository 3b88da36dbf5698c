"""Runs on two processes (one fake CPU device each, a mesh over both, collectives over gloo):
the engine's checkpoints, a resume, and self-play's challenger checkpoint, which every process
must take part in. Every process is a subprocess (tests/scale/_processes.py)."""

from tests.scale._processes import PREAMBLE, lines, run_processes

# Each script starts as one of 2 processes of 1 device: argv PROCESS_ID PORT RUN_DIR.

SCRIPT = (
    PREAMBLE
    + r"""

from curriculax.engine import make_mesh, run
from curriculax.selfplay import (
    curriculum_evolve,
    learned_config,
    learned_spec,
    restore_learned,
)
from curriculax.selfplay.toy import capped_solver, learned_level_challenger, level_tasks

cfg = learned_config({"width": 16}, num_levels=6, num_symbols=4)


def evolve(mesh, where):
    return curriculum_evolve(
        capped_solver(),
        level_tasks(levels=6),
        challenger=learned_level_challenger(cfg),
        spec=learned_spec(cfg),
        key=0,
        rounds=2,
        steps_per_round=4,
        generated_per_round=16,
        frontier_share=0.5,
        run_dir=where,
        progress=False,
        mesh=mesh,
    )


try:
    evolve(None, run_dir + "-no-mesh")
except ValueError as e:
    print("REFUSED", "needs an engine mesh over the devices of every process" in str(e))
result = evolve(make_mesh(2), run_dir)
print("UPDATES", int(result.state.counters.updates), "HELD_OUT", repr(result.final_reward))
restored = restore_learned(run_dir + "/challenger", cfg)
same = all(
    np.array_equal(np.asarray(a), np.asarray(b))
    for a, b in zip(jax.tree.leaves(result.spec["state"]), jax.tree.leaves(restored["state"]))
)
print("CHALLENGER", int(restored["state"].updates), same)
done = run(result.engine, steps=8, run_dir=run_dir, resume=True, progress=False)
# The solver and counters as saved (the frontier's judge changed its slots after the save).
same = all(
    np.array_equal(np.asarray(a), np.asarray(b))
    for a, b in zip(
        jax.tree.leaves((result.state.solver, result.state.counters)),
        jax.tree.leaves((done.state.solver, done.state.counters)),
    )
)
print("RESTORED", done.stopped, same)
again = run(result.engine, steps=10, run_dir=run_dir, resume=True, progress=False)
print("RESUMED", again.stopped, int(again.state.counters.updates))
"""
)


def test_self_play_and_the_engine_checkpoint_and_resume_on_two_processes(tmp_path):
    outs = run_processes(SCRIPT, str(tmp_path / "run"), timeout=300)
    for out in outs:
        # Without a mesh over both processes each holds a state of its own: refused up front,
        # not at the first save after training.
        assert lines(out, "REFUSED") == ["REFUSED True"], out[-3000:]
        # Two rounds of 4 updates, checkpointed (the engine's pool keys were a malformed
        # array on a mesh over processes, and the first save failed), with the challenger's
        # checkpoint saved by both processes (on process 0 alone it waited forever).
        assert lines(out, "UPDATES")[0].startswith("UPDATES 8 HELD_OUT"), out[-3000:]
        assert lines(out, "CHALLENGER") == ["CHALLENGER 2 True"], out[-3000:]
        # The saved state reads back whole on both processes, and the run trains on from it.
        assert lines(out, "RESTORED") == ["RESTORED already_complete True"], out[-3000:]
        assert lines(out, "RESUMED") == ["RESUMED completed 10"], out[-3000:]
    # Both processes ran one computation: the same held-out reward.
    assert lines(outs[0], "UPDATES") == lines(outs[1], "UPDATES")


STOPS = (
    PREAMBLE
    + r"""
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from curriculax.checkpoint import CheckpointStore
from curriculax.engine import Engine, EngineConfig, Env, make_mesh, run
from curriculax.engine.synthetic import synthetic_solver, synthetic_tasks

mesh = make_mesh(2)
engine = Engine(
    synthetic_solver(),
    [Env("steady", synthetic_tasks(48, seed=1), group_size=4)],
    EngineConfig(batch_groups=4, groups_per_generation=4, seed=3),
    mesh=mesh,
)


def terminate_process_1(state, record):
    if pid == 1 and record["step"] == 2:
        os.kill(os.getpid(), signal.SIGTERM)


r = run(engine, steps=8, run_dir=f"{run_dir}/signal", progress=False, on_update=terminate_process_1)
print("SIGNAL", r.stopped, int(r.state.counters.updates), flush=True)
r = run(
    engine,
    steps=8,
    run_dir=f"{run_dir}/until",
    progress=False,
    until=lambda record: pid == 1 and record["step"] >= 3,
)
print("UNTIL", r.stopped, int(r.state.counters.updates), flush=True)

# A step saved again (as when until stops a run on an update checkpoint_every saved).
x = jax.device_put(np.arange(16, dtype=np.float32), NamedSharding(mesh, P("data")))
store = CheckpointStore(f"{run_dir}/store", max_to_keep=3)
store.save(1, {"x": x}, {"i": -1})
store.wait()
for i in range(8):
    store.save(1, {"x": x + i}, {"i": i})
    store.wait()
store.close()
print("REPLACED", store.meta(1)["i"], flush=True)

import curriculax as cx

driver = cx.HostCurriculum(cx.curriculum(cx.samplers.uniform(8)))
driver.sample(4)
for method in (driver.save, driver.restore):
    try:
        method(f"{run_dir}/driver")
    except ValueError as e:
        print("DRIVER", method.__name__, "works in one process" in str(e), flush=True)
driver.load_state_dict(driver.state_dict())  # what a multi-process trainer keeps instead
"""
)


def test_processes_stop_together_and_save_a_step_again_together(tmp_path):
    outs = run_processes(STOPS, str(tmp_path), timeout=240)
    for out in outs:
        # SIGTERM reached process 1 only: both stop at its update, with a checkpoint (process
        # 0 had gone on generating while 1 saved, both waiting forever).
        assert lines(out, "SIGNAL") == ["SIGNAL SIGTERM 2"], out[-3000:]
        # `until` held on process 1 only (as a wall-clock one may): both stop there.
        assert lines(out, "UNTIL") == ["UNTIL until 3"], out[-3000:]
        # Process 1's check of the new copy raced process 0 moving it in: it raised alone and
        # process 0 waited forever (3 runs of 3 failed within 8 saves).
        assert lines(out, "REPLACED") == ["REPLACED 7"], out[-3000:]
        # A driver's save on several processes failed in Orbax (each holds its own state);
        # refused, pointing at state_dict.
        assert lines(out, "DRIVER") == ["DRIVER save True", "DRIVER restore True"], out[-3000:]
