"""A progress line for one compiled program that runs many seeds (a study's arm).

The program calls :meth:`StudyProgress.tick` through ``jax.debug.callback`` once per seed at
each evaluation or round (under ``vmap`` the callback runs once per seed), so the line moves
while the program runs instead of after it. Nothing is read back into the program: the
callback returns nothing and changes no number the program computes.
"""

from __future__ import annotations

import sys
import threading
import time


class StudyProgress:
    """``label [####....] 12/40 evaluations (seeds x evaluations) | 35 s, about 80 s left``.

    On a terminal the line is redrawn in place; otherwise (a log file) a line is written at
    most every ``every`` seconds and at the end.

    Args:
      label: what runs (e.g. the arm's name).
      total: ticks expected (seeds x evaluations).
      unit: what one tick is, per seed ("evaluations", "rounds").
      stream: where the line goes (stderr by default).
      every: seconds between lines when the stream is not a terminal.
    """

    def __init__(
        self,
        label: str,
        total: int,
        stream=None,
        every: float = 30.0,
        width: int = 24,
        unit: str = "evaluations",
    ):
        self.label, self.total, self.width, self.every = label, max(int(total), 1), width, every
        self.unit = unit
        self.stream = stream or sys.stderr
        self.interactive = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.done = 0
        self.t0 = time.perf_counter()
        self._last = self.t0
        self._lock = threading.Lock()  # callbacks may arrive from the runtime's threads

    def tick(self, *_ignored) -> None:
        """One seed finished one evaluation (arguments, if any, are ignored)."""
        with self._lock:
            self.done += 1
            now = time.perf_counter()
            last = self.done >= self.total
            if not (self.interactive or last or now - self._last >= self.every):
                return
            self._last = now
            self._write(now, last)

    def _write(self, now: float, last: bool) -> None:
        frac = min(self.done / self.total, 1.0)
        filled = round(frac * self.width)
        spent = now - self.t0
        left = f", about {spent / frac - spent:.0f} s left" if 0 < frac < 1 else ""
        line = (
            f"{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {self.done}/"
            f"{self.total} {self.unit} (seeds x {self.unit}) | {spent:.0f} s{left}"
        )
        end = "\r" if self.interactive and not last else "\n"
        self.stream.write(line + end)
        self.stream.flush()
