"""Exact resume: a run of 2n updates and a run of n updates resumed to 2n agree bitwise (metrics
but wall time, traces, parameters, the whole engine state), also across a SIGINT
or SIGTERM (the latter through the quick start in a subprocess)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from engine_test_helpers import (
    assert_trees_equal,
    host,
    read_jsonl,
    two_env_engine,
    without_time,
)

from curriculax.engine import run

REPO = Path(__file__).resolve().parents[2]
N = 15


@pytest.fixture(scope="module")
def engine():
    return two_env_engine()


@pytest.fixture(scope="module")
def whole(engine, tmp_path_factory):
    """The uninterrupted run of 2n updates, saving every 4 updates and keeping 2."""
    run_dir = tmp_path_factory.mktemp("whole")
    result = run(
        engine,
        steps=2 * N,
        run_dir=run_dir,
        progress=False,
        checkpoint_every=4,
        keep_checkpoints=2,
    )
    return run_dir, host(result.state)


def _assert_same_run(run_dir, state, whole):
    whole_dir, whole_state = whole
    metrics = read_jsonl(whole_dir / "metrics.jsonl")
    assert [m["step"] for m in metrics] == list(range(1, 2 * N + 1))
    assert without_time(read_jsonl(run_dir / "metrics.jsonl")) == without_time(metrics)
    assert (run_dir / "traces.jsonl").read_text() == (whole_dir / "traces.jsonl").read_text()
    assert_trees_equal(state.solver, whole_state.solver, "solver")
    assert_trees_equal(state, whole_state, "state")


def test_checkpoints_every_n_updates_and_at_the_end_keeping_the_last_k(whole):
    steps = sorted(int(p.name) for p in (whole[0] / "checkpoints").iterdir() if p.name.isdigit())
    assert steps == [28, 2 * N]  # saved at 4, 8, ..., 28 and at the end (30); 2 kept


def test_resumed_run_matches_the_uninterrupted_one(engine, whole, tmp_path):
    first = run(engine, steps=N, run_dir=tmp_path, progress=False)
    assert int(first.state.counters.updates) == N
    resumed = run(engine, steps=2 * N, run_dir=tmp_path, resume=True, progress=False)
    _assert_same_run(tmp_path, host(resumed.state), whole)


def test_resume_after_sigint_in_process_matches(engine, whole, tmp_path):
    """SIGINT during an update: the run stops after it, saves, and resumes exactly."""

    def interrupt(state, record):
        if record["step"] == 7:
            os.kill(os.getpid(), signal.SIGINT)

    first = run(engine, steps=2 * N, run_dir=tmp_path, progress=False, on_update=interrupt)
    assert first.stopped == "SIGINT"
    assert int(first.state.counters.updates) == 7
    steps = sorted(int(p.name) for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit())
    assert steps == [7]
    resumed = run(engine, steps=2 * N, run_dir=tmp_path, resume=True, progress=False)
    assert resumed.stopped == "completed"
    _assert_same_run(tmp_path, host(resumed.state), whole)


def test_the_pending_surplus_is_part_of_the_resume(engine, tmp_path):
    """Stop at an update that leaves admitted groups waiting: they are saved and trained next."""
    steps = 1
    while True:  # the first stop point with a non-empty pending batch
        result = run(engine, steps=steps, progress=False, traces=False)
        if int(result.state.pending.count) > 0:
            break
        steps += 1
        assert steps <= N, "no update left groups waiting; change the test's configuration"
    run(engine, steps=steps, run_dir=tmp_path, progress=False, traces=False)
    again = run(engine, steps=steps, run_dir=tmp_path, resume=True, progress=False, traces=False)
    assert_trees_equal(host(again.state.pending), host(result.state.pending), "pending")


class _Quickstart:
    """``python -m experiments.quickstart`` in a subprocess, output to a log file."""

    def __init__(self, run_dir, steps, *extra):
        cmd = [sys.executable, "-m", "experiments.quickstart", "--run-dir", str(run_dir)]
        cmd += ["--steps", str(steps), "--no-progress", *extra]
        self.log = Path(f"{run_dir}.log")
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(
                cmd,
                cwd=REPO,
                env={**os.environ, "JAX_PLATFORMS": "cpu"},
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.log.read_text()

    def wait(self, timeout=180) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"quickstart did not finish in {timeout}s:\n{self.output()}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _lines(path) -> int:
    try:
        return path.read_text().count("\n")
    except FileNotFoundError:
        return 0


@pytest.mark.slow
def test_resume_after_sigterm_matches_the_uninterrupted_run(tmp_path):
    steps = 200
    stopped_dir, whole_dir = tmp_path / "stopped", tmp_path / "whole"
    whole = _Quickstart(whole_dir, steps)  # runs alongside the interrupted one
    stopped = _Quickstart(stopped_dir, steps)
    try:
        deadline = time.monotonic() + 180
        while _lines(stopped_dir / "metrics.jsonl") < 3:
            if stopped.proc.poll() is not None:
                pytest.fail(f"quickstart exited early:\n{stopped.output()}")
            if time.monotonic() > deadline:
                pytest.fail(f"quickstart wrote no metrics in 180s:\n{stopped.output()}")
            time.sleep(0.005)
        stopped.proc.send_signal(signal.SIGTERM)
        code = stopped.wait()
        assert code == 128 + signal.SIGTERM, stopped.output()
        assert "stopped by SIGTERM" in stopped.output()
        metrics = read_jsonl(stopped_dir / "metrics.jsonl")
        assert 3 <= len(metrics) < steps, "the run finished before SIGTERM arrived"
        summary = json.loads((stopped_dir / "summary.json").read_text())
        assert summary["stopped"] == "SIGTERM" and summary["steps"] == len(metrics)
        saved = sorted(
            int(p.name) for p in (stopped_dir / "checkpoints").iterdir() if p.name.isdigit()
        )
        assert saved[-1] == len(metrics), "no checkpoint at the step where SIGTERM stopped"

        resumed = _Quickstart(stopped_dir, steps, "--resume")
        assert resumed.wait() == 0, resumed.output()
        assert whole.wait() == 0, whole.output()
    finally:
        stopped.kill()
        whole.kill()
    resumed_metrics = without_time(read_jsonl(stopped_dir / "metrics.jsonl"))
    whole_metrics = without_time(read_jsonl(whole_dir / "metrics.jsonl"))
    assert [m["step"] for m in resumed_metrics] == list(range(1, steps + 1))
    assert resumed_metrics == whole_metrics
    traces = (stopped_dir / "traces.jsonl").read_text()
    assert traces == (whole_dir / "traces.jsonl").read_text()


def test_until_ends_the_run_after_the_update_that_asks(engine, tmp_path, whole):
    """``until`` stops like ``steps`` would: the updates so far match the full run's, a
    checkpoint is saved, and ``stopped`` says why."""
    result = run(
        engine,
        steps=2 * N,
        run_dir=tmp_path,
        progress=False,
        until=lambda record: record["step"] == 5,
    )
    assert result.stopped == "until" and result.summary["steps"] == 5
    metrics = read_jsonl(tmp_path / "metrics.jsonl")
    assert without_time(metrics) == without_time(read_jsonl(whole[0] / "metrics.jsonl")[:5])
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["5"]
    # a resume with the same condition finds the run complete and changes nothing (it does
    # not train on to the next point where ``until`` would hold again)
    before = (tmp_path / "metrics.jsonl").read_text()
    again = run(
        engine,
        steps=2 * N,
        run_dir=tmp_path,
        resume=True,
        progress=False,
        until=lambda record: record["step"] == 5,
    )
    assert again.stopped == "already_complete" and again.summary["steps"] == 5
    assert (tmp_path / "metrics.jsonl").read_text() == before
