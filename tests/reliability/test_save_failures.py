"""A checkpoint that cannot be written stops the run at once with a clear message, and the
process exits: a ``checkpoints`` path that is a file or read-only, before or during the run, or
a save whose background commit fails. A ``checkpoints`` file there before the run is refused
by the run directory's rules, naming it."""

import subprocess
import threading
import time

import orbax.checkpoint as ocp
import orbax.checkpoint._src.path.async_path as orbax_async_path
import pytest

from curriculax.checkpoint import CheckpointSaveError
from curriculax.engine import RunDirError, run


def _lines(path) -> int:
    return path.read_text().count("\n") if path.exists() else 0


def _make_unwritable(path, how):
    if how == "a file":
        # Moved aside, as often as it takes: a save still in flight may be writing into it
        # and may make the directory again between the move and the write.
        for attempt in range(100):
            if path.is_dir():
                path.rename(path.with_name(f"moved-{attempt}"))
            try:
                path.write_text("not a directory")
                return
            except IsADirectoryError:
                continue
        raise AssertionError(f"{path} kept coming back as a directory")
    else:
        path.mkdir(exist_ok=True)
        path.chmod(0o555)


# As root, the read-only case runs in a child without CAP_DAC_OVERRIDE (see conftest.py).
HOW = ["a file", pytest.param("read-only", marks=pytest.mark.read_only_dirs)]


@pytest.fixture(params=HOW)
def how(request):
    return request.param


def test_an_unwritable_checkpoint_directory_stops_the_run_before_training(engine, tmp_path, how):
    _make_unwritable(tmp_path / "checkpoints", how)
    if how == "a file":
        refused = pytest.raises(RunDirError, match=r"checkpoints is a file, not a folder")
    else:
        refused = pytest.raises(CheckpointSaveError, match=r"could not save checkpoint in .*ts")
    with refused:
        run(engine, steps=6, run_dir=tmp_path, checkpoint_every=2, progress=False)
    assert _lines(tmp_path / "metrics.jsonl") == 0
    (tmp_path / "checkpoints").chmod(0o755)


def test_a_directory_made_unwritable_mid_run_stops_at_the_next_save(engine, tmp_path, how):
    def break_it(state, record):
        if record["step"] == 6:
            _make_unwritable(tmp_path / "checkpoints", how)

    with pytest.raises(CheckpointSaveError, match="could not save checkpoint") as e:
        run(
            engine,
            steps=12,
            run_dir=tmp_path,
            checkpoint_every=4,
            progress=False,
            on_update=break_it,
        )
    # At the save of update 8 at the latest: sooner if the save of update 4 was still being
    # written when the directory went (that save fails in the background, and the run stops at
    # the next update).
    stopped = _lines(tmp_path / "metrics.jsonl")
    assert 6 <= stopped <= 8
    assert f"The run stopped at update {stopped}" in str(e.value)
    (tmp_path / "checkpoints").chmod(0o755)


def test_a_failed_background_commit_stops_the_run_at_the_next_update(engine, tmp_path, monkeypatch):
    """The commit's rename fails after the save returned (a directory made read-only while
    Orbax writes, say): the run stops at the next update, not at the next save."""
    failed = threading.Event()

    async def denied(src, dst):
        failed.set()
        raise PermissionError(13, "Permission denied", str(src))

    def fail_commits(state, record):
        if record["step"] == 4:
            monkeypatch.setattr(orbax_async_path, "rename", denied)
        if record["step"] == 6:  # let the background commit of update 5 fail first
            assert failed.wait(60)
            time.sleep(0.5)

    with pytest.raises(CheckpointSaveError, match=r"checkpoint step 5 .*Permission denied") as e:
        run(
            engine,
            steps=12,
            run_dir=tmp_path,
            checkpoint_every=5,
            progress=False,
            on_update=fail_commits,
        )
    monkeypatch.undo()
    assert "The run stopped at update 6" in str(e.value)
    assert _lines(tmp_path / "metrics.jsonl") == 6


def test_the_cli_exits_with_the_message_and_no_traceback(tmp_path, quickstart):
    (tmp_path / "checkpoints").write_text("not a directory")
    try:
        out = quickstart(tmp_path, "--steps", 6, "--set", "checkpoint_every=2", timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail("the quick start hung after a failed checkpoint save")
    assert out.returncode != 0
    assert f"error: {tmp_path / 'checkpoints'} is a file, not a folder" in out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert len(out.stderr.splitlines()) <= 4, out.stderr


def test_a_save_that_fails_off_the_filesystem_is_not_put_down_to_the_disk(
    engine, tmp_path, monkeypatch
):
    # Orbax refusing an array (as it refused a malformed one on several processes) was
    # reported as "Free the disk or make the directory writable". Not every disk failure
    # reaches us as an OSError (TensorStore's are ValueErrors), so the advice is the cause's.
    def refuse(self, step, *args, **kwargs):
        raise ValueError("Cannot serialize host local jax.Array")

    monkeypatch.setattr(ocp.CheckpointManager, "save", refuse)
    with pytest.raises(CheckpointSaveError, match="Cannot serialize host local") as e:
        run(engine, steps=4, run_dir=tmp_path, checkpoint_every=2, progress=False)
    assert str(e.value).endswith(
        "Fix its cause (above; e.g. free the disk or make the directory writable), then resume "
        "(--resume)."
    )
