"""Fault injection: the quick start is killed with SIGKILL again and again, right after a
checkpoint is committed and at random moments (times from a fixed RNG), and resumed each time;
its ``metrics.jsonl`` and ``traces.jsonl`` end up identical, line for line, to an uninterrupted
run's (wall time aside)."""

import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from reliability_helpers import REPO, quickstart_command, read_jsonl, subprocess_env, without_time

STEPS = 60
ARGS = ["--steps", STEPS, "--set", "checkpoint_every=1", "--set", "tasks_per_env=256"]
# What each start does: wait for a new checkpoint and kill at once, or kill at a random moment
# after one (a save, an update or a trace write may be cut in half). A checkpoint every update
# puts every kill close to a save, where buffered log lines were once lost.
PLAN = ["after checkpoint", "random", "after checkpoint", "random"]
TIMEOUT = 120


def _start(run_dir: Path, *extra) -> subprocess.Popen:
    log = open(f"{run_dir}.log", "a")  # noqa: SIM115 (closed with the process)
    return subprocess.Popen(
        quickstart_command(run_dir, *ARGS, *extra),
        cwd=REPO,
        env=subprocess_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _steps(run_dir: Path) -> list[int]:
    ckpt = run_dir / "checkpoints"
    return sorted(int(p.name) for p in ckpt.iterdir() if p.name.isdigit()) if ckpt.is_dir() else []


def _wait(condition, proc, what: str, deadline: float) -> bool:
    """Polls ``condition`` until it holds (True) or ``proc`` exits (False)."""
    while not condition():
        if proc.poll() is not None:
            return False
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no {what} within {TIMEOUT} s")
        time.sleep(0.002)
    return True


@pytest.mark.slow
def test_sigkill_at_random_moments_and_after_checkpoints_loses_nothing(tmp_path):
    rng = np.random.default_rng(20261201)
    whole_dir, killed_dir = tmp_path / "whole", tmp_path / "killed"
    whole = _start(whole_dir)  # alongside the interrupted runs
    kills = []
    try:
        for i, how in enumerate(PLAN):
            proc = _start(killed_dir, *(["--resume"] if i else []))
            deadline = time.monotonic() + TIMEOUT
            seen = _steps(killed_dir)[-1:] or [0]
            landed = _wait(
                lambda seen=seen: (_steps(killed_dir)[-1:] or [0]) > seen,
                proc,
                "checkpoint",
                deadline,
            )
            if landed and how == "random":
                time.sleep(rng.uniform(0.0, 0.4))
                landed = proc.poll() is None
            if landed:
                proc.send_signal(signal.SIGKILL)
            code = proc.wait()
            kills.append((how, _steps(killed_dir)[-1:], code))
        last = _start(killed_dir, "--resume")
        assert last.wait(TIMEOUT) == 0, Path(f"{killed_dir}.log").read_text()[-3000:]
        assert whole.wait(TIMEOUT) == 0, Path(f"{whole_dir}.log").read_text()[-3000:]
    finally:
        if whole.poll() is None:
            whole.kill()
    assert sum(code == -signal.SIGKILL for _, _, code in kills) >= 3, kills
    got = without_time(read_jsonl(killed_dir / "metrics.jsonl"))
    want = without_time(read_jsonl(whole_dir / "metrics.jsonl"))
    assert [r["step"] for r in got] == list(range(1, STEPS + 1)), kills
    assert got == want, kills
    assert (killed_dir / "traces.jsonl").read_text() == (whole_dir / "traces.jsonl").read_text()
