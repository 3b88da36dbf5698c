"""A run is complete when everything it promises is written. ``experiments.grpo`` killed right
after the engine wrote ``summary.json`` (before ``curves.png`` and ``summary.json["final_eval"]``)
is finished by ``--resume``: the curves and the final evaluation are written, and the final
evaluation is the one the killed process computed. A run killed before its summary gets the
summary written by the resume."""

import json
import subprocess
import sys

import reliability_helpers as helpers

from curriculax.engine import run

TINY = ["--steps", "2", "--no-progress", "--set", "model.width=16", "--set", "model.depth=1"]

# Runs experiments.grpo, records the final evaluation it computes, and SIGKILLs the process
# when it starts drawing curves.png: the engine's summary.json is written, nothing after it.
KILLED = """
import json, os, signal, sys
from experiments import grpo
report = grpo.held_out_report
def recording(*a, **k):
    out = report(*a, **k)
    with open(sys.argv[1], "w") as f:
        json.dump(out, f)
    return out
def killed(*a, **k):
    os.kill(os.getpid(), signal.SIGKILL)
grpo.held_out_report, grpo.plot_curves = recording, killed
grpo.main(sys.argv[2:])
"""


def _grpo(*args, code=None) -> subprocess.CompletedProcess:
    cmd = (
        [sys.executable, "-c", code, *args]
        if code
        else [sys.executable, "-m", "experiments.grpo", *args]
    )
    return subprocess.run(
        cmd,
        cwd=helpers.REPO,
        env=helpers.subprocess_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_grpo_run_killed_after_its_summary_is_finished_by_resume(tmp_path):
    run_dir, last_eval = tmp_path / "run", tmp_path / "last_eval.json"
    killed = _grpo(str(last_eval), "--run-dir", str(run_dir), *TINY, code=KILLED)
    assert killed.returncode == -9, killed.stderr[-2000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == 2 and "final_eval" not in summary
    assert not (run_dir / "curves.png").exists()

    resumed = _grpo("--run-dir", str(run_dir), *TINY, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "already complete" not in resumed.stdout
    assert 'before it wrote curves.png, summary.json["final_eval"]; writing them' in resumed.stdout
    assert (run_dir / "curves.png").stat().st_size > 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["final_eval"] == json.loads(last_eval.read_text())
    assert summary["steps"] == 2

    again = _grpo("--run-dir", str(run_dir), *TINY, "--resume")  # now it is complete
    assert again.returncode == 0 and "the run is already complete" in again.stdout


def test_a_resume_writes_a_summary_the_run_was_killed_before(engine, tmp_path):
    run(engine, steps=3, run_dir=tmp_path, progress=False)
    written = json.loads((tmp_path / "summary.json").read_text())
    (tmp_path / "summary.json").unlink()
    again = run(engine, steps=3, run_dir=tmp_path, resume=True, progress=False)
    assert again.stopped == "already_complete"
    restored = json.loads((tmp_path / "summary.json").read_text())
    same = ("steps", "rollouts", "groups", "admitted", "generations", "final_metrics")
    assert {k: restored[k] for k in same} == {k: written[k] for k in same}
