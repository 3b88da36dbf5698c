"""The run directory's rules at their edges: what counts as a checkpoint is what Orbax lists, a
save killed mid-replacement is resumed rather than refused, ``overwrite`` deletes only what
runs write (through a linked ``checkpoints/`` too), a given state does not cut an earlier run's
logs unasked, and what stops a run stops it before it trains, with a message naming the path."""

import errno
import json
import os
import shutil

import pytest
from reliability_helpers import read_jsonl, snapshot

from curriculax.checkpoint import CheckpointStore
from curriculax.engine import RunDirError, _rundir, run
from curriculax.engine._logging import JsonlWriter, truncate_jsonl


@pytest.fixture
def used(engine, tmp_path):
    """A run directory holding a run of 2 updates, a checkpoint after each."""
    run(engine, steps=2, run_dir=tmp_path, checkpoint_every=1, progress=False)
    return tmp_path


def test_names_orbax_does_not_list_are_no_checkpoint_to_resume(engine, used):
    """A file ``7`` or a folder ``007`` is no step for Orbax: a resume once started fresh
    there and deleted the earlier run's logs."""
    ckpt = used / "checkpoints"
    for name in os.listdir(ckpt):
        os.rename(ckpt / name, used / f"moved-{name}")
    (ckpt / "007").mkdir()
    (ckpt / "7").write_text("a note")
    before = snapshot(used)
    with pytest.raises(RunDirError, match=rf"nothing to resume in {used}: {ckpt} holds no check"):
        run(engine, steps=3, run_dir=used, resume=True, progress=False)
    assert snapshot(used) == before


def test_a_resume_the_store_finds_nothing_for_keeps_the_logs(engine, used, monkeypatch):
    """Should the directory's rules and Orbax ever disagree on the steps, the resume is
    refused rather than started fresh over the earlier run's logs."""
    monkeypatch.setattr(CheckpointStore, "steps", lambda self: [])
    before = snapshot(used)
    with pytest.raises(RunDirError, match=r"nothing to resume in .*Orbax finds no checkpoint"):
        run(engine, steps=3, run_dir=used, resume=True, progress=False)
    assert snapshot(used) == before


def test_a_save_killed_between_the_renames_of_a_replacement_is_resumed(engine, tmp_path):
    """The state a kill leaves: step 2 (the only one) moved aside, its committed replacement
    not yet in. The resume was refused as having nothing to resume, and ``overwrite`` would
    have deleted the staged copy, the only one left."""
    run(engine, steps=2, run_dir=tmp_path, checkpoint_every=1, keep_checkpoints=1, progress=False)
    ckpt, staging = tmp_path / "checkpoints", tmp_path / ".checkpoints.replacing"
    staging.mkdir()
    shutil.copytree(ckpt / "2", staging / "2")
    os.rename(ckpt / "2", staging / "old-2")
    assert os.listdir(ckpt) == []
    result = run(engine, steps=3, run_dir=tmp_path, resume=True, progress=False)
    assert result.stopped == "completed" and result.summary["steps"] == 3
    assert [r["step"] for r in read_jsonl(tmp_path / "metrics.jsonl")] == [1, 2, 3]


def test_overwrite_deletes_only_what_runs_write_in_checkpoints(engine, used):
    ckpt = used / "checkpoints"
    (ckpt / "best").mkdir()
    (ckpt / "best" / "weights.npz").write_text("precious")
    (ckpt / "NOTES.md").write_text("step 2 was good")
    (ckpt / "3.orbax-checkpoint-tmp").mkdir()  # a save a kill cut short
    (ckpt / ".deleting").mkdir()
    run(engine, steps=1, run_dir=used, overwrite=True, progress=False)
    assert sorted(os.listdir(ckpt)) == ["1", "NOTES.md", "best"]
    assert (ckpt / "best" / "weights.npz").read_text() == "precious"


def test_overwrite_through_a_linked_checkpoints_folder_keeps_the_link(engine, tmp_path):
    run_dir, disk = tmp_path / "run", tmp_path / "disk"
    run_dir.mkdir()
    disk.mkdir()
    os.symlink(disk, run_dir / "checkpoints")
    run(engine, steps=2, run_dir=run_dir, checkpoint_every=1, progress=False)
    (disk / "NOTES.md").write_text("mine")
    run(engine, steps=1, run_dir=run_dir, overwrite=True, progress=False)
    assert os.path.islink(run_dir / "checkpoints")
    assert sorted(os.listdir(disk)) == ["1", "NOTES.md"]


def test_a_given_state_is_refused_where_the_logs_go_past_it(engine, used, capsys):
    """An earlier run's log lines past the given state would be cut, as its checkpoints past
    it would be deleted: refused, or cut with ``overwrite``."""
    shutil.rmtree(used / "checkpoints")  # say, killed before its first checkpoint
    before = snapshot(used)
    with pytest.raises(RunDirError) as e:
        run(engine, steps=1, run_dir=used, state=engine.init(), progress=False)
    assert str(e.value).startswith(
        f"{used / 'metrics.jsonl'} holds updates past the given state's update 0 (to update 2)"
    )
    assert "--overwrite" in str(e.value) and "--resume" not in str(e.value)
    assert snapshot(used) == before
    run(engine, steps=1, run_dir=used, state=engine.init(), overwrite=True, progress=False)
    assert "cutting the log lines past the given state's update 0" in capsys.readouterr().err
    assert [r["step"] for r in read_jsonl(used / "metrics.jsonl")] == [1]


def test_a_numbered_folder_that_is_no_checkpoint_stops_a_resume_before_it_trains(engine, used):
    (used / "checkpoints" / "100" / "notes").mkdir(parents=True)
    before, trained = snapshot(used), []
    refused = pytest.raises(RunDirError, match=r"checkpoints holds numbered folder\(s\) .*/100\)")
    with refused, pytest.warns(UserWarning, match="step 100"):  # the restore skips it first
        run(
            engine,
            steps=4,
            run_dir=used,
            resume=True,
            checkpoint_every=1,
            progress=False,
            on_update=lambda state, record: trained.append(record["step"]),
        )
    assert trained == []
    assert snapshot(used) == before


def test_a_record_that_lost_its_newline_keeps_a_line_of_its_own(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step":1}\n{"step":2}')  # the final "\n" never reached the disk
    truncate_jsonl(str(path), "step", 10)
    writer = JsonlWriter(str(path))
    writer.write({"step": 3})
    writer.close()
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 2, 3]


@pytest.mark.parametrize(
    ("code", "says"),
    [
        (errno.ENOLCK, r"cannot lock .*run\.lock: No locks available"),
        (errno.EWOULDBLOCK, r"is in use by another run"),
    ],
)
def test_only_a_held_lock_is_called_in_use(tmp_path, monkeypatch, code, says):
    def flock(file, operation):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(_rundir.fcntl, "flock", flock)
    with pytest.raises(RunDirError, match=says):
        _rundir.prepare(
            str(tmp_path), resume=False, overwrite=False, given_step=None, process_zero=True
        )


@pytest.mark.parametrize("how", ["fresh", "overwrite", "resume"])
def test_a_file_named_checkpoints_is_named_and_kept(engine, tmp_path, how):
    (tmp_path / "checkpoints").write_text("a user's file\n")
    with pytest.raises(RunDirError, match=r"checkpoints is a file, not a folder"):
        run(
            engine,
            steps=1,
            run_dir=tmp_path,
            resume=how == "resume",
            overwrite=how == "overwrite",
            progress=False,
        )
    assert (tmp_path / "checkpoints").read_text() == "a user's file\n"


def test_a_run_directory_orbax_reads_as_a_pattern_is_refused_before_anything(engine, tmp_path):
    with pytest.raises(RunDirError, match=r"its path holds '\['.*--run-dir"):
        run(engine, steps=1, run_dir=tmp_path / "exp[1]", progress=False)
    assert not (tmp_path / "exp[1]").exists()


def test_overwrite_beside_a_numbered_folder_no_run_wrote_deletes_nothing(engine, used):
    """--overwrite deleted the earlier run, kept the folder (not a run's), and then the run
    was refused for it: the earlier run was lost and nothing ran."""
    (used / "checkpoints" / "9").mkdir()
    (used / "checkpoints" / "9" / "notes.txt").write_text("mine")
    before = snapshot(used)
    with pytest.raises(RunDirError, match=r"checkpoints holds numbered folder\(s\) that are not"):
        run(engine, steps=1, run_dir=used, overwrite=True, progress=False)
    assert snapshot(used) == before
    with pytest.raises(RunDirError, match="Nothing was deleted"):
        run(engine, steps=1, run_dir=used, state=engine.init(), overwrite=True, progress=False)
    assert snapshot(used) == before


def test_overwrite_keeps_a_step_another_orbax_manager_wrote(engine, used):
    """A numbered folder with Orbax's files but not a run's items (a pretrained ``params``
    checkpoint) is what the store calls foreign; ``--overwrite`` deleted it as the run's own."""
    import jax.numpy as jnp
    import orbax.checkpoint as ocp

    ckpt = used / "checkpoints"
    manager = ocp.CheckpointManager(ckpt / "pretrained", item_names=("params",))
    manager.save(9, args=ocp.args.Composite(params=ocp.args.StandardSave({"w": jnp.ones(3)})))
    manager.wait_until_finished()
    manager.close()
    os.rename(ckpt / "pretrained" / "9", ckpt / "9")
    shutil.rmtree(ckpt / "pretrained")
    store = CheckpointStore(ckpt)
    try:
        assert store.foreign_steps() == [str(ckpt / "9")]
    finally:
        store.close()
    assert not _rundir._written_by_a_run(str(ckpt), "9")
    assert _rundir._written_by_a_run(str(ckpt), "2")
    before = snapshot(used)
    with pytest.raises(RunDirError, match=r"not checkpoints \(9\).*Nothing was deleted"):
        run(engine, steps=1, run_dir=used, overwrite=True, progress=False)
    assert snapshot(used) == before


def test_overwrite_deletes_what_a_cut_short_step_deletion_left(engine, used):
    """A step whose deletion an earlier version cut short (its meta/ left, or nothing) is the
    run's own, as before: --overwrite deletes it; a folder holding anything else is foreign."""
    ckpt = used / "checkpoints"
    shutil.copytree(ckpt / "2" / "meta", ckpt / "7" / "meta")
    os.makedirs(ckpt / "8")
    os.makedirs(ckpt / "11" / "meta")
    (ckpt / "11" / "notes.txt").write_text("mine")
    assert _rundir._written_by_a_run(str(ckpt), "7")
    assert _rundir._written_by_a_run(str(ckpt), "8")
    assert not _rundir._written_by_a_run(str(ckpt), "11")
    shutil.rmtree(ckpt / "11")
    run(engine, steps=1, run_dir=used, overwrite=True, progress=False)
    assert not (ckpt / "7").exists() and not (ckpt / "8").exists()
