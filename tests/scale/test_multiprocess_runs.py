"""Runs on two processes (one fake CPU device each, a mesh over both, collectives over gloo):
the engine's checkpoints, a resume, and self-play's challenger checkpoint, which every process
must take part in. Every process is a subprocess (tests/scale/_processes.py)."""

from tests.scale._processes import lines, run_processes

SCRIPT = r"""
import faulthandler
import sys

faulthandler.dump_traceback_later(200, exit=True)  # a hang shows where it waits

import jax

jax.config.update("jax_num_cpu_devices", 1)
jax.config.update("jax_cpu_collectives_implementation", "gloo")
pid, port, run_dir = int(sys.argv[1]), sys.argv[2], sys.argv[3]
jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=pid)

import numpy as np

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
