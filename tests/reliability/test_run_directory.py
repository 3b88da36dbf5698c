"""A run directory is never emptied behind the user's back: a fresh run in a used directory,
or a resume with nothing to resume, is refused (naming ``--resume`` and ``--overwrite``) and
changes nothing; ``overwrite`` deletes the earlier run. One run at a time: a second process is
refused at once, naming the holder, and a dead holder's lock is taken over."""

import os
import signal
import subprocess
import time

import pytest
from reliability_helpers import REPO, quickstart_command, snapshot, subprocess_env

from curriculax.engine import RunDirError, run
from experiments import quickstart as quickstart_script


@pytest.fixture
def used(engine, tmp_path):
    """A run directory holding a finished run of 3 updates."""
    run(engine, steps=3, run_dir=tmp_path, progress=False)
    return tmp_path


def test_a_fresh_run_in_a_used_directory_is_refused_and_changes_nothing(engine, used):
    before = snapshot(used)
    with pytest.raises(RunDirError) as e:
        run(engine, steps=5, run_dir=used, progress=False)
    message = str(e.value)
    assert f"{used} already holds a run (checkpoints up to step 3, metrics.jsonl" in message
    assert "--resume" in message and "--overwrite" in message
    assert snapshot(used) == before


def test_overwrite_deletes_the_earlier_run(engine, used, capsys):
    result = run(engine, steps=2, run_dir=used, overwrite=True, progress=False)
    assert "note: overwrite: deleting the earlier run in" in capsys.readouterr().err
    assert result.summary["steps"] == 2
    assert sorted(os.listdir(used / "checkpoints")) == ["2"]
    assert (used / "metrics.jsonl").read_text().count("\n") == 2


@pytest.mark.parametrize("left", ["no checkpoints", "only an unfinished save"])
def test_resume_with_nothing_to_resume_is_refused_when_logs_exist(engine, used, left):
    ckpt = used / "checkpoints"
    if left == "no checkpoints":
        for name in os.listdir(ckpt):
            os.rename(ckpt / name, used / f"moved-{name}")  # kept, out of the run's way
        ckpt.rmdir()
        why = f"there is no {ckpt}"
    else:
        os.rename(ckpt / "3", ckpt / "3.orbax-checkpoint-tmp-1234")
        why = f"{ckpt} holds only unfinished saves ['3.orbax-checkpoint-tmp-1234']"
    before = snapshot(used)
    with pytest.raises(RunDirError) as e:
        run(engine, steps=5, run_dir=used, resume=True, progress=False)
    message = str(e.value)
    assert message.startswith(f"nothing to resume in {used}: {why}, but an earlier run left ")
    assert "metrics.jsonl" in message and "--overwrite" in message
    assert snapshot(used) == before
    # An empty directory is no earlier run: resume starts fresh.
    fresh = used / "empty"
    assert run(engine, steps=1, run_dir=fresh, resume=True, progress=False).summary["steps"] == 1


def test_a_given_state_is_refused_where_an_earlier_run_saved_past_it(engine, used, capsys):
    """``state=`` continues a run from that state: an earlier run's checkpoints past its step
    would be restored over the new run by its next resume, so they are refused (unchanged), or
    deleted with ``overwrite``."""
    before = snapshot(used)
    start = engine.init()  # update 0, e.g. a warm start
    with pytest.raises(RunDirError) as e:
        run(engine, steps=2, run_dir=used, state=start, progress=False)
    past = "holds checkpoints past the given state's update 0 (steps [3])"
    assert f"{used / 'checkpoints'} {past}" in str(e.value)
    assert snapshot(used) == before
    result = run(engine, steps=2, run_dir=used, state=start, overwrite=True, progress=False)
    assert "deleting the checkpoints past the given state's update 0" in capsys.readouterr().err
    assert result.summary["steps"] == 2
    assert sorted(os.listdir(used / "checkpoints")) == ["2"]
    again = run(engine, steps=2, run_dir=used, resume=True, progress=False)
    assert again.stopped == "already_complete" and again.summary["steps"] == 2


def test_the_cli_refuses_a_used_directory(used):
    with pytest.raises(SystemExit) as e:
        quickstart_script.main(["--run-dir", str(used), "--steps", "3", "--no-progress"])
    assert str(e.value).startswith(f"error: {used} already holds a run (")
    assert "--resume" in str(e.value) and "--overwrite" in str(e.value)


def test_a_second_run_is_refused_naming_the_holder_and_a_dead_holders_lock_is_taken_over(
    tmp_path, capsys
):
    holder = subprocess.Popen(
        quickstart_command(tmp_path, "--steps", 100_000, "--set", "checkpoint_every=4"),
        cwd=REPO,
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "checkpoints" / "4").is_dir():
            assert holder.poll() is None, "the first run exited early"
            assert time.monotonic() < deadline, "the first run saved no checkpoint in 120 s"
            time.sleep(0.05)
        # Paused, still holding the lock: running on, it would delete step 4 itself once it
        # keeps three later checkpoints (under load that raced the check below).
        holder.send_signal(signal.SIGSTOP)
        args = ["--run-dir", str(tmp_path), "--steps", "6", "--no-progress"]
        for extra in ([], ["--resume"], ["--overwrite"]):
            with pytest.raises(SystemExit) as e:
                quickstart_script.main([*args, *extra])
            assert str(e.value).startswith(
                f"error: {tmp_path} is in use by another run (process {holder.pid} on host "
            ), str(e.value)
        assert (tmp_path / "checkpoints" / "4").is_dir()  # nothing was deleted
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The holder died holding the lock: the next run takes it over.
    quickstart_script.main([*args, "--resume"])
    err = capsys.readouterr().err
    assert f"note: taking over the lock of {tmp_path} from process {holder.pid}" in err
    assert "which is no longer running" in err


def test_on_finish_runs_while_the_run_directory_is_still_held(engine, tmp_path):
    # What a script writes after training (a final evaluation, curves.png) used to be written
    # after the lock was released, so a second run could start in between and interleave.
    seen = []

    def on_finish(result):
        seen.append(result.stopped)
        with pytest.raises(RunDirError, match="is in use by another run"):
            run(engine, steps=4, run_dir=tmp_path, resume=True, progress=False)

    result = run(engine, steps=2, run_dir=tmp_path, progress=False, on_finish=on_finish)
    assert seen == ["completed"] and result.stopped == "completed"
    again = run(
        engine, steps=2, run_dir=tmp_path, resume=True, progress=False, on_finish=seen.append
    )
    assert [r.stopped for r in seen[1:]] == ["already_complete"] and again.stopped == seen[
        1
    ].stopped
