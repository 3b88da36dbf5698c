"""A damaged newest checkpoint is skipped for the newest one that restores, with a few lines
naming the step and the cause, and the resumed run is still exact; if none restores, the error
lists every step and why, without a traceback from the storage layers."""

import os
import shutil
from pathlib import Path

import pytest
from reliability_helpers import read_jsonl, without_time

from curriculax.engine import CheckpointUnreadable, run

STEPS = 6


def damage(step_dir: Path, how: str) -> None:
    """Damages one checkpoint the ways a crash, a full disk or a bad copy would."""
    data = [p for p in (step_dir / "state").rglob("*") if p.is_file() and p.parent.name == "d"]
    assert data, f"no data files under {step_dir}"
    if how == "truncated data":
        for p in data:
            os.truncate(p, p.stat().st_size // 2)
    elif how == "garbage data":
        for p in data:
            p.write_bytes(b"\x00garbage" * (p.stat().st_size // 8 + 1))
    elif how == "missing metadata":
        (step_dir / "meta" / "metadata").unlink()
    elif how == "missing array metadata":
        (step_dir / "state" / "_METADATA").unlink()
    else:
        raise ValueError(how)


HOW = ["truncated data", "garbage data", "missing metadata", "missing array metadata"]


@pytest.fixture(scope="module")
def whole(engine, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("whole")
    run(engine, steps=STEPS, run_dir=run_dir, progress=False)
    return run_dir


@pytest.fixture(scope="module")
def saved(engine, tmp_path_factory):
    """Checkpoints at updates 2 and 4 of a run stopped at 4."""
    run_dir = tmp_path_factory.mktemp("saved")
    run(engine, steps=4, run_dir=run_dir, checkpoint_every=2, progress=False)
    assert sorted(os.listdir(run_dir / "checkpoints")) == ["2", "4"]
    return run_dir


@pytest.mark.parametrize("how", HOW)
def test_a_damaged_newest_checkpoint_falls_back_to_the_previous_one(
    engine, saved, whole, tmp_path, how
):
    run_dir = tmp_path / "run"
    shutil.copytree(saved, run_dir)
    damage(run_dir / "checkpoints" / "4", how)
    with pytest.warns(UserWarning) as record:
        result = run(engine, steps=STEPS, run_dir=run_dir, resume=True, progress=False)
    message = "\n".join(str(w.message) for w in record)
    assert message.startswith(f"resuming from checkpoint step 2 in {run_dir / 'checkpoints'}: ")
    assert "\n  - step 4: " in message
    assert len(message.splitlines()) == 2 and len(message) < 600, message
    assert result.stopped == "completed"
    # Still exact: the logs are cut back to update 2 and replayed from there.
    assert without_time(read_jsonl(run_dir / "metrics.jsonl")) == without_time(
        read_jsonl(whole / "metrics.jsonl")
    )
    assert (run_dir / "traces.jsonl").read_text() == (whole / "traces.jsonl").read_text()


def test_when_no_checkpoint_restores_the_error_lists_each_step(engine, saved, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(saved, run_dir)
    damage(run_dir / "checkpoints" / "4", "garbage data")
    damage(run_dir / "checkpoints" / "2", "missing metadata")
    with pytest.raises(CheckpointUnreadable) as e:
        run(engine, steps=STEPS, run_dir=run_dir, resume=True, progress=False)
    lines = str(e.value).splitlines()
    assert lines[0] == f"no checkpoint in {run_dir / 'checkpoints'} can be restored:"
    assert lines[1].startswith("  - step 4: ") and lines[2].startswith("  - step 2: ")
    assert "--overwrite" in lines[3] and len(lines) == 4


def test_the_cli_reports_a_skipped_checkpoint_in_a_few_lines(tmp_path, quickstart):
    first = quickstart(tmp_path, "--set", "checkpoint_every=2", "--steps", 4)
    assert first.returncode == 0, first.stderr
    damage(tmp_path / "checkpoints" / "4", "truncated data")
    resumed = quickstart(tmp_path, "--set", "checkpoint_every=2", "--steps", 6, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming from checkpoint step 2 in" in resumed.stderr
    assert "  - step 4: " in resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert len(resumed.stderr.splitlines()) <= 6, resumed.stderr
