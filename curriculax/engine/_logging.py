"""Host-side outputs of a run: metrics lines, trace lines, a progress bar (metric sinks such
as TensorBoard and W&B live in :mod:`curriculax.engine._sinks`)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from curriculax._files import write_text_atomic


def _clean(value: Any) -> Any:
    """JSON-safe: numpy scalars to Python, non-finite floats to None."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, np.ndarray):
        return _clean(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def truncate_at(path: str, offset: int) -> bool:
    """Cuts a log back to ``offset`` bytes, the length it had when a checkpoint was saved.

    A resumed run replays everything after its checkpoint; cutting each log back to where it
    stood at that checkpoint keeps every record exactly once. Returns ``False`` (and changes
    nothing) when the file is shorter than ``offset``: lines the checkpoint counted on are gone.
    """
    size = os.path.getsize(path) if os.path.exists(path) else 0
    if size < offset:
        return False
    if size > offset:
        with open(path, "r+b") as f:
            f.truncate(offset)
            f.flush()
            os.fsync(f.fileno())
    return True


def truncate_jsonl(path: str, field: str, limit: int) -> None:
    """Keeps only the lines of a JSON-lines file whose ``field`` is below ``limit``.

    For logs whose checkpoint recorded no byte offset (:func:`truncate_at`): a resumed run
    replays everything after its checkpoint; dropping the lines written after that point keeps
    every record exactly once. A whole record that lost its newline (a crash between the two)
    is kept with one, so the next record starts on a line of its own.
    """
    if not os.path.exists(path):
        return
    kept = []
    with open(path) as f:
        for line in f:
            try:
                if json.loads(line).get(field, -1) < limit:
                    kept.append(line if line.endswith("\n") else line + "\n")
            except json.JSONDecodeError:
                break  # a torn last line from a crash
    write_text_atomic(path, "".join(kept))  # a kill mid-rewrite leaves the log whole


def last_record(path: str, field: str, limit: int) -> dict:
    """The last whole record of a JSON-lines file whose ``field`` is at most ``limit`` (``{}``
    if there is none), as the run held it: a ``null`` (a non-finite value, see ``_clean``)
    read back as NaN."""
    last: dict = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    break  # a torn last line from a crash
                if record.get(field, limit + 1) <= limit:
                    last = record
    return {k: float("nan") if v is None else v for k, v in last.items()}


class JsonlWriter:
    """Appends one JSON object per line (buffered; :meth:`flush` or :meth:`sync` to write).

    A failed write (a full disk, say) raises an ``OSError`` naming this file (a write to an
    open file names none)."""

    def __init__(self, path: str):
        self.path = path
        self._file = open(path, "a")  # noqa: SIM115 (kept open for the run)

    def write(self, record: Mapping[str, Any]) -> None:
        with self._naming():
            self._file.write(json.dumps(_clean(dict(record)), separators=(",", ":")) + "\n")

    def flush(self) -> None:
        with self._naming():
            self._file.flush()

    def sync(self) -> int:
        """Flushes to disk (``fsync``) and returns the file's length in bytes: every line
        written so far survives a crash from here on."""
        with self._naming():
            self._file.flush()
            os.fsync(self._file.fileno())
            return self._file.tell()

    def close(self) -> None:
        with self._naming():
            self._file.close()

    @contextlib.contextmanager
    def _naming(self):
        try:
            yield
        except OSError as e:
            if e.filename is not None:
                raise
            raise OSError(e.errno, e.strerror, self.path) from e


class ProgressBar:
    """A one-line progress bar on stderr: step, mean reward, admission rate, groups/s.

    An update that finalized no group reports a NaN admission rate; the bar then shows the
    last known one (``--`` before there is one).
    """

    def __init__(self, total: int, start: int = 0, stream=None, width: int = 24):
        self.total, self.start = total, start
        self.stream = stream or sys.stderr
        self.width = width
        self.t0 = time.perf_counter()
        self.interactive = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last = 0.0
        self._admission = float("nan")

    def update(self, step: int, reward: float, admission: float, groups_done: int) -> None:
        if math.isfinite(admission):
            self._admission = admission
        now = time.perf_counter()
        if not self.interactive and now - self._last < 5.0 and step < self.total:
            return
        self._last = now
        frac = min(1.0, step / max(self.total, 1))
        filled = round(frac * self.width)
        rate = groups_done / max(now - self.t0, 1e-9)
        admit = f"{self._admission:.2f}" if math.isfinite(self._admission) else "--"
        line = (
            f"[{'#' * filled}{'.' * (self.width - filled)}] step {step}/{self.total} "
            f"| reward {reward:.3f} | admit {admit} | {rate:,.0f} groups/s"
        )
        end = "\r" if self.interactive and step < self.total else "\n"
        self.stream.write(line + end)
        self.stream.flush()

    def close(self) -> None:
        if self.interactive:
            self.stream.write("\n")
            self.stream.flush()
