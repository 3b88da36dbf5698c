"""A checkpoint saved on a mesh of 2 devices resumes in a process of 1 device also where the
restore reads the saved arrays as saved: onto a reordered pool, with ``allow_partial``, and for
a strict resume that names what differs. Orbax refused the saved 2-device sharding there
("Topology mismatch"), and the resume took every checkpoint for damaged, advising
``--overwrite``. Every run is a subprocess (the device count is fixed when JAX starts)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = r"""
import shutil
import sys
import warnings

import jax

mode, run_dir = sys.argv[1], sys.argv[2]
jax.config.update("jax_num_cpu_devices", 2 if mode == "save" else 1)
import numpy as np

import curriculax as cx
from curriculax.engine import Engine, EngineConfig, Env, make_mesh, run
from curriculax.engine.synthetic import synthetic_solver, synthetic_tasks

N = 64


def engine(change=None):
    tasks = synthetic_tasks(N, seed=2)
    if change == "reorder":
        tasks = {"difficulty": tasks["difficulty"][np.random.default_rng(0).permutation(N)]}
    gates = {"z": cx.gates.advantage_range(0.0, 0.0)}
    if change in ("partial", "strict"):
        gates["z2"] = cx.gates.advantage_range(0.0, 0.0)
    cur = cx.curriculum(cx.samplers.difficulty_pools(N), gates)
    env = Env("e", tasks, cur, group_size=4)
    config = EngineConfig(batch_groups=4, groups_per_generation=4, seed=1)
    return Engine(synthetic_solver(), [env], config, mesh=make_mesh(2) if change is None else None)


if mode == "save":
    run(engine(), steps=4, run_dir=run_dir, checkpoint_every=2, progress=False)
    print("saved", jax.device_count())
    sys.exit()
for change in ("reorder", "partial", "strict"):
    copy = f"{run_dir}-{change}"
    shutil.copytree(run_dir, copy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = run(
                engine(change), steps=6, run_dir=copy, resume=True, progress=False,
                allow_partial=change == "partial",
            )
            print(change, result.stopped, result.summary["steps"])
        except Exception as e:
            print(change, type(e).__name__, str(e).splitlines()[1].strip())
"""


def _run(mode, run_dir):
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode, str(run_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": ROOT},
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout.splitlines()


def test_a_checkpoint_of_2_devices_resumes_changed_on_1_device(tmp_path):
    run_dir = tmp_path / "run"
    assert _run("save", run_dir) == ["saved 2"]
    assert _run("resume", run_dir) == [
        "reorder completed 6",
        "partial completed 6",
        "strict CheckpointMismatch - env 'e': gates ['z2'] are in this run but not in the "
        "checkpoint",
    ]
