"""Every log line written before a checkpoint survives a SIGKILL right after it: the logs are
flushed and synced before the checkpoint is committed, the checkpoint records where each log
ended, and a resume cuts each log back to exactly there."""

import subprocess
import sys
from pathlib import Path

import pytest
from reliability_helpers import REPO, read_jsonl, subprocess_env, without_time

from curriculax.checkpoint import CheckpointStore
from curriculax.engine import run

STEPS = 12


@pytest.fixture(scope="module")
def whole(engine, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("whole")
    run(engine, steps=STEPS, run_dir=run_dir, progress=False)
    return run_dir


@pytest.mark.parametrize("kill_after", [5])
def test_sigkill_right_after_a_checkpoint_loses_no_log_line(engine, whole, tmp_path, kill_after):
    script = Path(__file__).with_name("_helpers.py")
    killed = subprocess.run(
        [sys.executable, str(script), str(tmp_path), str(STEPS), "1", str(kill_after)],
        cwd=REPO,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -9, killed.stderr

    run(engine, steps=STEPS, run_dir=tmp_path, resume=True, progress=False)
    assert without_time(read_jsonl(tmp_path / "metrics.jsonl")) == without_time(
        read_jsonl(whole / "metrics.jsonl")
    )
    assert (tmp_path / "traces.jsonl").read_text() == (whole / "traces.jsonl").read_text()
    # The final checkpoint records where each log ended: their whole length.
    store = CheckpointStore(tmp_path / "checkpoints")
    try:
        logs = store.meta(STEPS).get("logs")
    finally:
        store.close()
    sizes = {n: (tmp_path / n).stat().st_size for n in ("metrics.jsonl", "traces.jsonl")}
    assert logs == sizes
