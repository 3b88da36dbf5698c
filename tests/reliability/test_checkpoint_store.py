"""The checkpoint store never loses a committed checkpoint: a replacement of an existing step is
committed before the old one goes (and a crash between the two renames is recovered), and a
directory it cannot write to fails the save at once instead of leaving Orbax threads waiting."""

import os
from pathlib import Path

import jax.numpy as jnp
import orbax.checkpoint as ocp
import pytest

from curriculax.checkpoint import CheckpointSaveError, CheckpointStore


def tree(value: float):
    return {"x": jnp.full((3,), value, jnp.float32)}


def restored(directory, step: int) -> float:
    store = CheckpointStore(directory)
    try:
        assert store.steps() == [step]
        return float(store.restore(step, tree(0.0))["x"][0])
    finally:
        store.close()


def test_replacing_a_step_keeps_the_new_one(tmp_path):
    store = CheckpointStore(tmp_path / "ckpt")
    store.save(5, tree(1.0), {"v": 1})
    store.save(5, tree(2.0), {"v": 2})
    assert store.meta(5) == {"v": 2}
    store.close()
    assert restored(tmp_path / "ckpt", 5) == 2.0
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]  # no staging left behind


def test_a_failed_replacement_keeps_the_committed_checkpoint(tmp_path, monkeypatch):
    store = CheckpointStore(tmp_path / "ckpt")
    store.save(5, tree(1.0), {})
    store.wait()

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ocp.CheckpointManager, "save", disk_full)
    with pytest.raises(Exception, match="No space left on device"):
        store.save(5, tree(2.0), {})
    monkeypatch.undo()
    store.close()
    assert restored(tmp_path / "ckpt", 5) == 1.0


def test_a_replacement_cut_between_its_renames_is_finished_on_open(tmp_path):
    """The crash window: the old step moved aside, the committed new one not yet moved in."""
    directory, staging = tmp_path / "ckpt", tmp_path / ".ckpt.replacing"
    for where, value in ((directory, 1.0), (staging, 2.0)):  # one after the other, as a run
        store = CheckpointStore(where)
        store.save(5, tree(value), {})
        store.close()
    os.rename(directory / "5", staging / "old-5")
    assert restored(directory, 5) == 2.0
    assert sorted(os.listdir(staging)) == ["old-5"]  # a reader deletes nothing
    store = CheckpointStore(directory)
    store.save(6, tree(3.0), {})
    store.close()
    assert not staging.exists()


def test_a_reader_opened_inside_a_live_replacement_breaks_nothing(tmp_path, monkeypatch):
    """A store opened (to look) while a run is between its replacement's two renames moves the
    new copy in, as after a crash; the run's own second rename then finds it done."""
    directory = tmp_path / "ckpt"
    store = CheckpointStore(directory)
    store.save(5, tree(1.0), {})
    store.wait()
    rename, target = os.rename, str(directory / "5")

    def rename_then_look(src, dst):
        rename(src, dst)
        if os.fspath(src) == target:
            monkeypatch.setattr(os, "rename", rename)
            assert restored(directory, 5) == 2.0

    monkeypatch.setattr(os, "rename", rename_then_look)
    store.save(5, tree(2.0), {})
    store.close()
    assert os.rename is rename  # the look happened
    assert restored(directory, 5) == 2.0


@pytest.mark.parametrize(
    "how", ["a file", pytest.param("read-only", marks=pytest.mark.read_only_dirs)]
)
def test_an_unwritable_directory_fails_the_save_at_once(tmp_path, how):
    """As root, the read-only case runs in a child without CAP_DAC_OVERRIDE (conftest.py)."""
    directory = tmp_path / "ckpt"
    if how == "a file":
        directory.write_text("not a directory")
    else:
        directory.mkdir()
        directory.chmod(0o555)
        with pytest.raises(PermissionError):  # the premise: this process cannot write here
            (directory / "probe").mkdir()
    store = CheckpointStore(directory)
    with pytest.raises(CheckpointSaveError, match=r"could not save checkpoint in .*ckpt: ") as e:
        store.save(1, tree(1.0), {})
    assert len(str(e.value).splitlines()) == 1
    store.close()  # returns: no save was started, so no thread waits for one


def test_a_save_refuses_numbered_folders_that_are_not_its_checkpoints(tmp_path):
    """Orbax takes every numbered folder for a step and would delete the old ones beyond
    max_to_keep: a user's ``2/`` stops the save, untouched; its own steps do not."""
    directory = tmp_path / "ckpt"
    (directory / "2").mkdir(parents=True)
    (directory / "2" / "results.csv").write_text("keep me")
    store = CheckpointStore(directory, max_to_keep=1)
    try:
        assert store.foreign_steps() == [str(directory / "2")]
        with pytest.raises(ValueError, match=r"refusing to save .*1 numbered folder\(s\).*/2\)"):
            store.save(5, tree(1.0), {"v": 1})
    finally:
        store.close()
    assert sorted(os.listdir(directory)) == ["2"]
    assert (directory / "2" / "results.csv").read_text() == "keep me"
    os.rename(directory / "2", tmp_path / "moved")
    store = CheckpointStore(directory, max_to_keep=1)
    try:
        store.save(5, tree(1.0), {"v": 1})
        store.save(6, tree(2.0), {"v": 2})
        store.wait()
        assert store.foreign_steps() == [] and store.steps() == [6]
    finally:
        store.close()


def test_old_steps_leave_whole_through_a_hidden_folder(tmp_path, monkeypatch):
    """Orbax deletes a step file by file: a process killed in between once left a half-deleted
    numbered folder that stopped every later save. Old steps are renamed, whole, into
    ``.deleting`` first (shown here with its removal held back) and removed from there by the
    next store that saves; one that only reads leaves them."""
    directory = tmp_path / "ckpt"
    monkeypatch.setattr(CheckpointStore, "_remove_leftovers", lambda self: None)
    store = CheckpointStore(directory, max_to_keep=1)
    for step in (1, 2, 3):
        store.save(step, tree(float(step)), {"v": step})
    store.close()
    assert sorted(os.listdir(directory)) == [".deleting", "3"]
    for step in ("1", "2"):
        held = directory / ".deleting" / step
        assert {"state", "meta", "_CHECKPOINT_METADATA"} <= set(os.listdir(held))
    monkeypatch.undo()
    assert restored(directory, 3) == 3.0
    assert sorted(os.listdir(directory)) == [".deleting", "3"]  # a reader deletes nothing
    store = CheckpointStore(directory, max_to_keep=1)
    store.save(4, tree(4.0), {"v": 4})
    store.close()
    assert sorted(os.listdir(directory)) == ["4"]


def test_a_removal_cut_short_is_finished_and_the_next_save_runs(tmp_path):
    """A kill while removing ``.deleting`` leaves part of a step there, out of Orbax's sight;
    a kill while writing a step leaves its unfinished folder: the next save removes both."""
    directory = tmp_path / "ckpt"
    store = CheckpointStore(directory, max_to_keep=1)
    store.save(1, tree(1.0), {"v": 1})
    store.close()
    (directory / ".deleting" / "0" / "state").mkdir(parents=True)
    (directory / ".deleting" / "0" / "state" / "_METADATA").write_text("{}")
    (directory / "7.orbax-checkpoint-tmp" / "state").mkdir(parents=True)
    store = CheckpointStore(directory, max_to_keep=1)
    try:
        assert store.foreign_steps() == [] and store.steps() == [1]
        assert (directory / ".deleting").exists()  # opening deletes nothing
        store.save(2, tree(2.0), {"v": 2})
        store.wait()
        assert sorted(os.listdir(directory)) == ["2"]
    finally:
        store.close()
    assert restored(directory, 2) == 2.0


@pytest.mark.read_only_dirs
def test_a_read_only_directory_with_old_steps_held_back_still_restores(tmp_path, monkeypatch):
    """A read-only copy of a directory holding old steps in ``.deleting`` opens and restores
    (a store that only reads deletes nothing; one that saves ignores what it cannot remove).
    As root this runs in a child without CAP_DAC_OVERRIDE (conftest.py)."""
    directory = tmp_path / "ckpt"
    with monkeypatch.context() as held:
        held.setattr(CheckpointStore, "_remove_leftovers", lambda self: None)
        store = CheckpointStore(directory, max_to_keep=1)
        store.save(1, tree(1.0), {"v": 1})
        store.save(2, tree(2.0), {"v": 2})
        store.close()
    folders = [Path(root) for root, _, _ in os.walk(directory)]
    for folder in reversed(folders):
        folder.chmod(0o555)
    with pytest.raises(PermissionError):  # the premise: this process cannot delete there
        (directory / ".deleting" / "1" / "probe").mkdir()
    try:
        assert restored(directory, 2) == 2.0
        assert (directory / ".deleting" / "1" / "state").is_dir()
    finally:
        for folder in folders:
            folder.chmod(0o755)


def test_a_replacement_that_failed_between_its_renames_is_finished_by_the_next_save(
    tmp_path, monkeypatch
):
    """The second rename fails (the first moved the old copy aside): the next save of the same
    store moves the committed new copy in before it clears the staging folder."""
    directory = tmp_path / "ckpt"
    store = CheckpointStore(directory)
    store.save(5, tree(1.0), {})
    store.wait()
    rename, staged = os.rename, str(tmp_path / ".ckpt.replacing" / "5")

    def refuse_the_swap(src, dst):
        if os.fspath(src) == staged:
            raise PermissionError(13, "Permission denied", src)
        rename(src, dst)

    monkeypatch.setattr(os, "rename", refuse_the_swap)
    with pytest.raises(CheckpointSaveError, match=r"step 5 .*Permission denied"):
        store.save(5, tree(2.0), {})
    monkeypatch.undo()
    store.save(6, tree(3.0), {})
    store.close()
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]
    for step, value in ((5, 2.0), (6, 3.0)):
        store = CheckpointStore(directory)
        assert store.steps() == [5, 6]
        assert float(store.restore(step, tree(0.0))["x"][0]) == value
        store.close()
