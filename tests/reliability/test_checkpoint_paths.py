"""Where a checkpoint store may write: a path Orbax reads as a ``glob`` pattern is refused before
anything is made there (and a step committed without its data fails the save), and a
replacement is staged beside the directory's real path, so a ``checkpoints/`` linked onto
another file system can still swap a step in."""

import errno
import os

import jax.numpy as jnp
import pytest

import curriculax as cx
import curriculax.checkpoint as checkpoint
from curriculax.checkpoint import CheckpointSaveError, CheckpointStore


def tree(value: float):
    return {"x": jnp.full((3,), value, jnp.float32)}


@pytest.mark.parametrize("name", ["exp[1]", "lr=1e-3,bs=[8]", "a\\b", "a*b", "a?b"])
def test_a_path_orbax_reads_as_a_pattern_is_refused_before_anything_is_made(tmp_path, name):
    """Orbax finds a step's data with glob on the path: under ``exp[1]`` or ``a\\b`` it
    committed every step without ``state/manifest.ocdbt`` and the run reported success."""
    directory = tmp_path / name / "ckpt"
    with pytest.raises(ValueError, match=r"cannot keep checkpoints in .*: its path holds '") as e:
        CheckpointStore(directory)
    assert str(directory) in str(e.value) and "Choose a path without" in str(e.value)
    assert not (tmp_path / name).exists()


def test_a_host_curriculum_save_into_such_a_path_is_refused(tmp_path):
    host = cx.HostCurriculum(cx.curriculum(cx.samplers.uniform(8)), seed=1)
    with pytest.raises(ValueError, match=r"holds '\['"):
        host.save(tmp_path / "run[1]" / "host")
    assert not (tmp_path / "run[1]").exists()


def test_a_step_committed_without_its_data_fails_the_save(tmp_path, monkeypatch):
    """Past the up-front refusal (switched off here), the commit itself is checked."""
    monkeypatch.setattr(checkpoint, "unsafe_path", lambda directory: None, raising=False)
    store = CheckpointStore(tmp_path / "exp[1]" / "ckpt")
    store.save(1, tree(1.0), {"v": 1})
    with pytest.raises(CheckpointSaveError, match=r"committed without .*state/manifest\.ocdbt"):
        store.wait()
    store.close()


def test_a_replacement_committed_without_its_data_leaves_the_old_step(tmp_path, monkeypatch):
    """``ckpt`` links to a folder whose real path holds '[': steps save fine through the link,
    but a replacement, staged beside the real path, loses its data and must not swap in."""
    monkeypatch.setattr(checkpoint, "unsafe_path", lambda directory: None, raising=False)
    real = tmp_path / "disk[1]" / "ckpt"
    real.mkdir(parents=True)
    os.symlink(real, tmp_path / "ckpt")
    store = CheckpointStore(tmp_path / "ckpt")
    store.save(5, tree(1.0), {"v": 1})
    store.wait()
    with pytest.raises(CheckpointSaveError, match=r"step 5 .*committed without .*manifest"):
        store.save(5, tree(2.0), {"v": 2})
    store.close()
    store = CheckpointStore(tmp_path / "ckpt")
    assert store.meta(5) == {"v": 1}
    assert float(store.restore(5, tree(0.0))["x"][0]) == 1.0
    store.close()


def test_a_replacement_through_a_link_onto_another_file_system_swaps_in(tmp_path, monkeypatch):
    """``checkpoints/`` linked onto another disk: a rename between the link's folder and the
    target's fails with EXDEV (simulated: ``here/`` and ``there/`` are two file systems)."""
    here, there = tmp_path / "here", tmp_path / "there" / "ckpt"
    here.mkdir()
    there.mkdir(parents=True)
    os.symlink(there, here / "ckpt")
    rename = os.rename

    def disk(path) -> str:
        real = os.path.realpath(os.path.join(os.path.realpath(os.path.dirname(path)), "x"))
        return "there" if real.startswith(str(tmp_path / "there")) else "here"

    def rename_on_one_disk(src, dst):
        if disk(src) != disk(dst):
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), src, None, dst)
        rename(src, dst)

    monkeypatch.setattr(os, "rename", rename_on_one_disk)
    store = CheckpointStore(here / "ckpt")
    store.save(5, tree(1.0), {"v": 1})
    store.save(5, tree(2.0), {"v": 2})
    store.close()
    store = CheckpointStore(here / "ckpt")
    assert store.steps() == [5] and store.meta(5) == {"v": 2}
    store.close()
    assert sorted(os.listdir(here)) == ["ckpt"] and sorted(os.listdir(there.parent)) == ["ckpt"]
