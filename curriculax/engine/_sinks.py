"""Metric sinks: where a run's per-update metrics go besides ``metrics.jsonl``.

A sink is opened once the run knows its directory and first step, gets every update's
metrics (the names ``metrics.jsonl`` uses: ``curriculum/<env>/admission_rate``, ...), and
is closed at the end. Built in: :class:`TensorBoardSink` (tensorboardX, ``pip install
curriculax[tensorboard]``) and :class:`WandbSink` (Weights & Biases, ``pip install
curriculax[wandb]``). Anything with the three methods of :class:`MetricSink` works.

Example:
  >>> import os, tempfile
  >>> from curriculax.engine import Engine, EngineConfig, Env, TensorBoardSink, WandbSink, run
  >>> from curriculax.engine.synthetic import synthetic_solver, synthetic_tasks
  >>> engine = Engine(synthetic_solver(), [Env("a", synthetic_tasks(100))], EngineConfig(8))
  >>> with tempfile.TemporaryDirectory() as run_dir:
  ...     result = run(engine, steps=3, run_dir=run_dir, progress=False,
  ...                  sinks=[TensorBoardSink(), WandbSink("my-project", mode="offline")])
  ...     sorted(os.listdir(run_dir))
  ['checkpoints', 'metrics.jsonl', ..., 'tensorboard', 'traces.jsonl', 'wandb', 'wandb_run_id']
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["MetricSink", "TensorBoardSink", "WandbSink"]

# Record fields that are not metrics: the step is the x axis of every sink.
_NOT_METRICS = ("step",)


def scalars(record: Mapping[str, Any]) -> dict[str, float]:
    """The finite numeric entries of a metrics record, as floats (the step left out)."""
    out = {}
    for k, v in record.items():
        if k in _NOT_METRICS or isinstance(v, bool) or not isinstance(v, int | float):
            continue
        if math.isfinite(v):
            out[k] = float(v)
    return out


@runtime_checkable
class MetricSink(Protocol):
    """Receives a run's metrics. Only process 0 of a multi-host run opens sinks."""

    def open(self, run_dir: str | None, first_step: int, config: Mapping[str, Any]) -> None:
        """Called once before the first write. ``first_step`` is the first update this run
        will write (``1`` for a fresh run, ``n + 1`` when resuming from update ``n``)."""

    def write(self, step: int, metrics: Mapping[str, Any]) -> None:
        """One update's record (non-numeric and non-finite entries are the sink's to skip)."""

    def close(self) -> None:
        """Flushes and releases; called once, also when the run fails."""


class TensorBoardSink:
    """Scalars to TensorBoard event files through tensorboardX.

    Args:
      logdir: where the event files go (default: ``<run_dir>/tensorboard``).

    A resumed run purges the events at and after its first step (tensorboardX's
    ``purge_step``), so the steps replayed after a kill appear once.
    """

    def __init__(self, logdir: str | os.PathLike | None = None):
        try:
            import tensorboardX  # noqa: F401
        except ImportError as e:
            raise ImportError(
                "TensorBoardSink needs tensorboardX: pip install 'curriculax[tensorboard]'"
            ) from e
        self.logdir = None if logdir is None else os.fspath(logdir)
        self._writer = None

    def open(self, run_dir: str | None, first_step: int, config: Mapping[str, Any]) -> None:
        from tensorboardX import SummaryWriter

        del config
        logdir = self.logdir
        if logdir is None:
            if run_dir is None:
                raise ValueError("TensorBoardSink needs a logdir when the run has no run_dir")
            logdir = os.path.join(run_dir, "tensorboard")
        self._writer = SummaryWriter(logdir, purge_step=first_step)

    def write(self, step: int, metrics: Mapping[str, Any]) -> None:
        for k, v in scalars(metrics).items():
            self._writer.add_scalar(k, v, step)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class WandbSink:
    """Metrics to Weights & Biases (``wandb.log(metrics, step=update)``).

    The run's id is kept in ``<run_dir>/wandb_run_id``, so a resumed run continues the same
    W&B run; steps replayed after a kill are ones W&B already has (it keeps the first).

    Args:
      project: the W&B project (default: ``WANDB_PROJECT`` or W&B's default).
      mode: ``"online"``, ``"offline"`` (nothing leaves the machine; ``wandb sync`` later)
        or ``"disabled"``; default: ``WANDB_MODE`` or online.
      **init_kwargs: passed to ``wandb.init`` (``name``, ``entity``, ``tags``, ...).
    """

    def __init__(self, project: str | None = None, *, mode: str | None = None, **init_kwargs):
        try:
            import wandb  # noqa: F401
        except ImportError as e:
            raise ImportError("WandbSink needs wandb: pip install 'curriculax[wandb]'") from e
        if mode not in (None, "online", "offline", "disabled"):
            raise ValueError(
                f"mode must be 'online', 'offline' or 'disabled' (or None), got {mode!r}"
            )
        for key in ("dir", "id", "resume", "config", "project", "mode"):
            if key in init_kwargs:
                raise ValueError(f"WandbSink sets {key!r} itself; do not pass it in init_kwargs")
        self.project, self.mode, self.init_kwargs = project, mode, init_kwargs
        self.run = None

    def open(self, run_dir: str | None, first_step: int, config: Mapping[str, Any]) -> None:
        import wandb

        run_id = None
        id_path = None if run_dir is None else os.path.join(run_dir, "wandb_run_id")
        if id_path is not None and first_step > 1 and os.path.exists(id_path):
            with open(id_path) as f:
                run_id = f.read().strip() or None
        if run_id is None:
            run_id = uuid.uuid4().hex[:12]
        self.run = wandb.init(
            project=self.project,
            mode=self.mode,
            dir=run_dir,
            id=run_id,
            resume="allow",
            config=dict(config),
            **self.init_kwargs,
        )
        if id_path is not None:
            with open(id_path, "w") as f:
                f.write(run_id)

    def write(self, step: int, metrics: Mapping[str, Any]) -> None:
        self.run.log(scalars(metrics), step=step)

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None


def open_sinks(
    sinks, *, tensorboard: bool, run_dir: str | None, first_step: int, config: Mapping[str, Any]
) -> list:
    """Opens ``sinks`` (plus a :class:`TensorBoardSink` when ``tensorboard``); if one fails,
    closes those already open and re-raises."""
    sinks = [*sinks, *([TensorBoardSink()] if tensorboard else [])]
    for sink in sinks:
        if not isinstance(sink, MetricSink):
            raise TypeError(
                f"sinks must have open(run_dir, first_step, config), write(step, metrics) and "
                f"close(), got {type(sink).__name__}"
            )
    opened = []
    try:
        for sink in sinks:
            sink.open(run_dir, first_step, config)
            opened.append(sink)
    except BaseException:
        close_sinks(opened)
        raise
    return opened


def close_sinks(sinks) -> None:
    """Closes every sink, even when one of them fails (the first error is re-raised)."""
    error = None
    for sink in sinks:
        try:
            sink.close()
        except Exception as e:  # keep closing the others
            error = error or e
    if error is not None:
        raise error
