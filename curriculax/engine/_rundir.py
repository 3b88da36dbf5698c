"""The run directory's rules: one run at a time (a lock naming its holder), nothing an earlier
run wrote is deleted unless the caller says ``overwrite``, and a resume that finds nothing to
resume says so instead of starting over.

On several hosts every process runs the loop, but only process 0 takes the lock, inspects and
clears the directory; the others learn its verdict through one broadcast, so a refusal stops
every process at once and nobody waits on a lock.
"""

from __future__ import annotations

import dataclasses
import datetime
import errno
import json
import os
import shutil
import socket
import sys

from curriculax._processes import agree
from curriculax.checkpoint import (
    _DELETING,
    _PROBE,
    ITEMS,
    holds_items,
    is_step_name,
    recover_replacement,
    staging_dir,
    unfinished_save,
)

LOGS = ("metrics.jsonl", "traces.jsonl", "summary.json")
LOCK = "run.lock"
CHECKPOINTS = "checkpoints"

try:
    import fcntl
except ImportError:  # no advisory locks (Windows): runs are not protected from each other
    fcntl = None


class RunDirError(RuntimeError):
    """The run directory cannot be used as asked; the message says why and what to do."""


_REASONS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EACCES: "permission denied",
    errno.EPERM: "the operation is not permitted (an immutable or protected directory?)",
    errno.EROFS: "the file system is read-only",
    errno.ENOTDIR: "a file stands where a directory is needed",
    errno.EEXIST: "a file stands where a directory is needed",
}


# What a run that cannot write its directory meets (other OSErrors are not the directory's).
WRITE_ERRNOS = frozenset(_REASONS) | {errno.EIO, errno.EFBIG}


def os_error_text(e: OSError) -> str:
    """``<file>: <what went wrong, in words>`` for an OSError."""
    reason = _REASONS.get(e.errno) or e.strerror or str(e)
    return f"{e.filename}: {reason}" if e.filename else reason


def _step_folders(ckpt: str) -> list[int]:
    """The steps Orbax lists in ``ckpt``: folders named by a number without leading zeros
    (Orbax renames a step's folder so only once the step is complete), oldest first."""
    try:
        names = os.listdir(ckpt)
    except OSError:
        return []
    return sorted(int(n) for n in names if is_step_name(n) and os.path.isdir(os.path.join(ckpt, n)))


def committed_steps(run_dir: str | None) -> list[int]:
    """The checkpoints committed in ``run_dir``, oldest first."""
    return _step_folders(os.path.join(run_dir, CHECKPOINTS)) if run_dir else []


def saved_text(run_dir: str | None) -> str:
    """What a run stopped by a failed write leaves to resume from, in words."""
    steps = committed_steps(run_dir)
    if not steps:
        return "no checkpoint had been saved yet (a resume starts over)"
    return (
        f"checkpoint {steps[-1]} holds the newest saved state, and the logs are kept up to it "
        "(a resume continues from there)"
    )


def write_failure(e: OSError, updates: int, run_dir: str | None) -> RunDirError:
    """The error a run stopped by a failed write ends with: which file, why, what was saved,
    and what to do."""
    fix = (
        "free space on the disk"
        if e.errno in (errno.ENOSPC, errno.EDQUOT)
        else "make the run directory writable"
    )
    return RunDirError(
        f"writing {os_error_text(e)}. The run stopped at update {updates}; "
        f"{saved_text(run_dir)}. To continue, {fix}, then resume (--resume)."
    )


@dataclasses.dataclass(frozen=True)
class Contents:
    """What earlier runs left in a run directory.

    Attributes:
      steps: committed checkpoint steps, ascending.
      unfinished: names of checkpoint saves that never finished (``*.orbax-checkpoint-tmp*``).
      logs: names of non-empty logs (``metrics.jsonl``, ``traces.jsonl``, ``summary.json``,
        ``tensorboard/``).
    """

    steps: tuple[int, ...]
    unfinished: tuple[str, ...]
    logs: tuple[str, ...]

    def describe(self) -> str:
        parts = []
        if self.steps:
            parts.append(f"checkpoints up to step {self.steps[-1]}")
        if self.unfinished:
            parts.append(f"unfinished checkpoint saves {list(self.unfinished)}")
        return ", ".join(parts + list(self.logs))


def contents(run_dir: str) -> Contents:
    ckpt = os.path.join(run_dir, CHECKPOINTS)
    names = os.listdir(ckpt) if os.path.isdir(ckpt) else []
    steps = tuple(_step_folders(ckpt))
    unfinished = tuple(sorted(n for n in names if unfinished_save(n)))
    logs = [n for n in LOGS if os.path.isfile(p := os.path.join(run_dir, n)) and os.path.getsize(p)]
    tb = os.path.join(run_dir, "tensorboard")
    if os.path.isdir(tb) and os.listdir(tb):
        logs.append("tensorboard/")
    return Contents(steps, unfinished, tuple(logs))


# What a run's step folder holds: its items and Orbax's two marks.
_STEP_ENTRIES = frozenset((*ITEMS, "_CHECKPOINT_METADATA", "commit_success.txt"))


def _written_by_a_run(ckpt: str, name: str) -> bool:
    """Whether entry ``name`` of ``ckpt`` is one a run writes: a checkpoint step (a numbered
    folder holding a run's items, the rule of ``CheckpointStore.foreign_steps``), or what is
    left of one whose deletion was cut short (a numbered folder holding nothing but some of
    what a step holds); another Orbax manager's step (other items) is not one; an unfinished
    or deleted step, a write probe."""
    path = os.path.join(ckpt, name)
    if not os.path.isdir(path) or os.path.islink(path):
        return False
    if unfinished_save(name) or name == _DELETING or name.startswith(_PROBE):
        return True
    if not is_step_name(name):
        return False
    return holds_items(path) or set(os.listdir(path)) <= _STEP_ENTRIES


def _refuse_foreign(ckpt: str) -> None:
    """Raises :class:`RunDirError` if ``ckpt`` holds a numbered folder no run wrote: Orbax
    would take it for a step, and ``clear`` keeps it (a run would then be refused after the
    earlier run's files were deleted)."""
    try:
        names = sorted(os.listdir(ckpt))
    except OSError:
        return
    foreign = [
        n
        for n in names
        if is_step_name(n) and os.path.isdir(os.path.join(ckpt, n))
        if not _written_by_a_run(ckpt, n)
    ]
    if foreign:
        raise RunDirError(
            f"{ckpt} holds numbered folder(s) that are not checkpoints ({', '.join(foreign[:5])}"
            f"{' ...' if len(foreign) > 5 else ''}): Orbax would take them for steps, and "
            "--overwrite deletes only what runs write. Nothing was deleted; move them out of "
            "the folder, or choose another run directory (--run-dir)."
        )


def clear(run_dir: str) -> None:
    """Deletes what a run writes in ``run_dir`` (checkpoints, logs, summary), nothing else.

    In ``checkpoints/`` only what runs write goes (:func:`_written_by_a_run`); the folder
    itself goes if nothing else is left in it. A ``checkpoints/`` that links elsewhere keeps
    its link and the target folder, emptied of the run's steps."""
    ckpt = os.path.join(run_dir, CHECKPOINTS)
    if os.path.isdir(ckpt):
        for name in os.listdir(ckpt):
            if _written_by_a_run(ckpt, name):
                shutil.rmtree(os.path.join(ckpt, name))
        if not os.path.islink(ckpt) and not os.listdir(ckpt):
            os.rmdir(ckpt)
    staging = staging_dir(ckpt)
    if os.path.isdir(staging) and not os.path.islink(staging):
        shutil.rmtree(staging)
    tb = os.path.join(run_dir, "tensorboard")
    if os.path.isdir(tb):
        shutil.rmtree(tb)
    for name in LOGS:
        path = os.path.join(run_dir, name)
        if os.path.isfile(path):
            os.remove(path)


class RunLock:
    """An advisory lock (``flock``) on ``run_dir/run.lock``, released when the holder exits
    (even on SIGKILL); the file names the holder so a refused run can say who holds it."""

    def __init__(self, run_dir: str):
        self.path = os.path.join(run_dir, LOCK)
        self._file = None

    def acquire(self) -> None:
        """Takes the lock or raises :class:`RunDirError` naming the process that holds it. A
        lock whose holder died is taken over, with a note on stderr."""
        if fcntl is None:
            return
        f = open(self.path, "a+")  # noqa: SIM115 (held open for the run)
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                f.close()
                raise RunDirError(
                    f"cannot lock {self.path}: {e.strerror or e} (the file system may not "
                    "support file locks, as some network mounts do not); choose a run "
                    "directory on a local disk (--run-dir)"
                ) from None
            f.seek(0)
            holder = _holder(f.read())
            f.close()
            run_dir = os.path.dirname(self.path)
            raise RunDirError(
                f"{run_dir} is in use by another run ({holder}); wait for it to finish, stop "
                "it, or choose another run directory (--run-dir)"
            ) from None
        f.seek(0)
        previous = f.read().strip()
        if previous:  # a holder that did not release the lock: it was killed
            print(
                f"note: taking over the lock of {os.path.dirname(self.path)} from "
                f"{_holder(previous)}, which is no longer running",
                file=sys.stderr,
            )
        f.seek(0)
        f.truncate()
        f.write(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "started": datetime.datetime.now().isoformat(timespec="seconds"),
                }
            )
            + "\n"
        )
        f.flush()
        self._file = f

    def release(self) -> None:
        if self._file is None:
            return
        self._file.seek(0)
        self._file.truncate()  # an empty lock file: released cleanly
        self._file.close()  # closing drops the flock
        self._file = None


def _holder(text: str) -> str:
    try:
        info = json.loads(text)
        return f"process {info['pid']} on host {info['host']}, started {info['started']}"
    except (ValueError, KeyError, TypeError):
        return "a process that did not record itself"


def prepare(
    run_dir: str, *, resume: bool, overwrite: bool, given_step: int | None, process_zero: bool
) -> RunLock | None:
    """Locks ``run_dir`` and applies the rules; returns the held lock (``None`` on processes
    other than 0). Raises :class:`RunDirError` on every process when process 0 refuses.

    Args:
      run_dir: an absolute path.
      resume: the caller asked to resume.
      overwrite: the caller allows deleting an earlier run.
      given_step: the update count of the state the run was given (``state=``); ``None``
        for a fresh state.
      process_zero: this is process 0 (it alone takes the lock and applies the rules).
    """
    lock, error = None, None
    if process_zero:
        lock = RunLock(run_dir)
        try:
            os.makedirs(run_dir, exist_ok=True)
            lock.acquire()
            _apply_rules(run_dir, resume=resume, overwrite=overwrite, given_step=given_step)
        except Exception as e:  # every process must reach the broadcast below
            lock.release()
            error = e
            if isinstance(e, OSError):
                error = RunDirError(
                    f"cannot use {run_dir} as a run directory: {os_error_text(e)}; make it "
                    "writable or choose another run directory (--run-dir)"
                )
    if agree(error is not None):
        raise error or RunDirError(
            f"process 0 refused the run directory {run_dir}; its error says why"
        )
    return lock


def last_logged_step(path: str) -> int | None:
    """The highest ``step`` of the readable records of a JSON-lines log (``None``: none)."""
    last = None
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        for line in f:
            try:
                step = json.loads(line).get("step")
            except (ValueError, AttributeError):
                break  # a torn last line from a crash
            if isinstance(step, int) and (last is None or step > last):
                last = step
    return last


def _apply_rules(run_dir: str, *, resume: bool, overwrite: bool, given_step: int | None) -> None:
    ckpt = os.path.join(run_dir, CHECKPOINTS)
    if os.path.lexists(ckpt) and not os.path.isdir(ckpt):
        what = "a broken symbolic link" if os.path.islink(ckpt) else "a file"
        raise RunDirError(
            f"{ckpt} is {what}, not a folder: a run keeps its checkpoints there. Move it "
            "away, or choose another run directory (--run-dir)."
        )
    recover_replacement(ckpt)  # a save killed mid-replacement: its committed copy moves in
    found = contents(run_dir)
    if resume and found.steps:
        return  # resuming a checkpoint (it wins over a given state)
    if given_step is not None:  # continuing a given state: files are kept up to its step
        _keep_up_to(run_dir, found, given_step, overwrite=overwrite)
        return
    if not (found.steps or found.unfinished or found.logs):
        return
    if overwrite:
        _refuse_foreign(ckpt)  # before anything is deleted: the run could not start after it
        print(
            f"note: overwrite: deleting the earlier run in {run_dir} ({found.describe()})",
            file=sys.stderr,
        )
        clear(run_dir)
        return
    if resume:
        ckpt = os.path.join(run_dir, CHECKPOINTS)
        if found.unfinished:
            why = f"{ckpt} holds only unfinished saves {list(found.unfinished)}"
        elif os.path.isdir(ckpt):
            why = f"{ckpt} holds no checkpoint"
        else:
            why = f"there is no {ckpt}"
        raise RunDirError(
            f"nothing to resume in {run_dir}: {why}, but an earlier run left "
            f"{', '.join(found.logs) or 'its files'}. Pass overwrite=True (--overwrite) to "
            "delete them and start fresh, or choose another run directory (--run-dir)."
        )
    raise RunDirError(
        f"{run_dir} already holds a run ({found.describe()}). Pass resume=True (--resume) to "
        "continue it, overwrite=True (--overwrite) to delete it and start fresh, or choose "
        "another run directory (--run-dir)."
    )


def _keep_up_to(run_dir: str, found: Contents, given_step: int, *, overwrite: bool) -> None:
    """A run given a state at update ``given_step`` keeps the directory's files up to it: an
    earlier run's checkpoints past it (a resume would restore them over this run) and log
    lines past it (the run cuts them) are refused, or deleted with ``overwrite``."""
    ckpt = os.path.join(run_dir, CHECKPOINTS)
    metrics = os.path.join(run_dir, "metrics.jsonl")
    # A numbered folder that is no checkpoint is refused before training, not deleted here.
    later = [s for s in found.steps if s > given_step and _written_by_a_run(ckpt, str(s))]
    logged = last_logged_step(metrics)
    logged = logged if logged is not None and logged > given_step else None
    if not later and logged is None:
        return
    if overwrite:
        _refuse_foreign(ckpt)  # before anything is deleted, as for a fresh run
        if later:
            print(
                f"note: overwrite: deleting the checkpoints past the given state's update "
                f"{given_step} in {ckpt} (steps {later})",
                file=sys.stderr,
            )
            for s in later:
                shutil.rmtree(os.path.join(ckpt, str(s)))
        if logged is not None:
            print(
                f"note: overwrite: cutting the log lines past the given state's update "
                f"{given_step} in {run_dir} (metrics.jsonl reaches update {logged})",
                file=sys.stderr,
            )
        return
    past = []
    if later:
        past.append(
            f"{ckpt} holds checkpoints past the given state's update {given_step} "
            f"(steps {later}), from an earlier run; a resume would restore them over "
            "this run"
        )
    if logged is not None:
        past.append(
            f"{metrics} holds updates past the given state's update {given_step} (to "
            f"update {logged}), from an earlier run; this run would cut them"
        )
    instead = ", resume=True (--resume) to continue the latest checkpoint instead" if later else ""
    raise RunDirError(
        f"{'; '.join(past)}. Pass overwrite=True (--overwrite) to delete them{instead}, or "
        "choose another run directory (--run-dir)."
    )
