"""The host loop: drives the compiled engine, logs, traces, checkpoints and raises."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from curriculax._checks import int_at_least
from curriculax.checkpoint import CheckpointSaveError, CheckpointStore
from curriculax.engine import _restore, _rundir
from curriculax.engine._engine import Engine, EngineState, Generation
from curriculax.engine._env import key_ints
from curriculax.engine._guard import CurriculumStalled, stall_message
from curriculax.engine._logging import (
    JsonlWriter,
    ProgressBar,
    last_record,
    truncate_at,
    truncate_jsonl,
)
from curriculax.engine._sinks import MetricSink, close_sinks, open_sinks

OnUpdate = Callable[[EngineState, dict[str, float]], dict[str, float] | None]


@dataclasses.dataclass
class RunResult:
    """What :func:`run` returns.

    Attributes:
      state: the final engine state.
      metrics: the last update's metrics (host floats).
      summary: what ``summary.json`` holds.
      stopped: ``"completed"``; ``"until"`` (the ``until`` callback ended it); the signal
        that stopped the run (``"SIGTERM"``, ``"SIGINT"``) after it saved a checkpoint; or
        ``"already_complete"``: a resume found the run already at ``steps`` updates (or more),
        or ended by ``until``, and changed nothing (``metrics`` is then the last logged
        update's, ``summary`` the one on disk).
    """

    state: EngineState
    metrics: dict[str, float]
    summary: dict[str, Any]
    stopped: str


def _trace_keep(generation: int, index: np.ndarray, rate: float) -> np.ndarray:
    """Deterministic sampling of trace lines (the same groups on a resumed run)."""
    if rate >= 1.0:
        return np.ones(index.shape, bool)
    g = np.full(index.shape, generation, np.uint64)  # arrays wrap silently; scalars warn
    h = (g * np.uint64(0x9E3779B97F4A7C15) + index.astype(np.uint64)) & (np.uint64(0xFFFFFFFF))
    h = (h * np.uint64(0x85EBCA6B)) & np.uint64(0xFFFFFFFF)
    return (h % np.uint64(1_000_000)).astype(np.float64) < rate * 1_000_000


def _trace_rate(traces: bool | float | str) -> float:
    if traces is True or traces == "all":
        return 1.0
    if traces is False or traces is None or traces == "off":
        return 0.0
    rate = float(traces)
    if not 0.0 <= rate <= 1.0:
        raise ValueError(
            f"traces must be True/False, 'all'/'off' or a rate in [0, 1], got {traces!r}"
        )
    return rate


class _Signals:
    """Turns SIGTERM/SIGINT into a flag the loop checks between compiled calls."""

    def __init__(self, enabled: bool):
        self.received: str | None = None
        self._old = {}
        self.enabled = enabled and threading.current_thread() is threading.main_thread()

    def __enter__(self):
        if self.enabled:
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        self.received = signal.Signals(signum).name

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)


def _write_traces(writer: JsonlWriter, engine: Engine, gen: Generation, rate: float) -> None:
    """One JSON line per sampled group of a generation batch already read to the host."""
    env = engine.envs[int(gen.env)]
    k = env.group_size
    gates = list(env.curriculum.gates)
    keep = _trace_keep(int(gen.generation), np.arange(len(gen.task_ids)), rate)
    for i in np.flatnonzero(keep):
        writer.write(
            {
                "generation": int(gen.generation),
                "step": int(gen.updates),
                "env": env.name,
                "task": int(gen.task_ids[i]),
                "key": int(key_ints(gen.task_keys[i])),
                "rewards": gen.rewards[i, :k].astype(float).tolist(),
                "valid": gen.valid[i, :k].tolist(),
                "admitted": bool(gen.admitted[i]),
                "votes": {name: bool(gen.votes[f"{env.name}/{name}"][i]) for name in gates},
            }
        )


def _stall_text(engine: Engine, state: EngineState, windows: int, votes: dict) -> str:
    since = np.asarray(jax.device_get(state.since_progress))
    metrics = {
        e.name: {
            k: float(v)
            for k, v in jax.device_get(
                engine.curricula[e.name].metrics(state.curricula[e.name])
            ).items()
        }
        for e in engine.envs
    }
    return stall_message(
        windows=windows,
        batch_groups=engine.config.batch_groups,
        since_progress={e.name: int(since[i]) for i, e in enumerate(engine.envs)},
        gate_votes=votes,
        curriculum_metrics=metrics,
    )


def _count_votes(votes: dict, engine: Engine, gen: Generation) -> None:
    """Accumulates each gate's votes since the last admitted group (reset on progress).
    ``gen`` is already on the host."""
    env_index, admitted, by_gate = gen.env, gen.admitted, gen.votes
    if admitted.any():
        votes.clear()
        return
    env = engine.envs[int(env_index)]
    counts = votes.setdefault(env.name, {g: (0, 0) for g in env.curriculum.gates})
    for g in env.curriculum.gates:
        a, t = counts[g]
        vote = by_gate[f"{env.name}/{g}"]
        counts[g] = (a + int(vote.sum()), t + int(vote.size))


def _cut_logs(offsets: dict, fields: dict[str, tuple[str, int]]) -> None:
    """Cuts each log back to the checkpoint being resumed: to the byte offset the checkpoint
    recorded, else (older checkpoints, logs the earlier run did not write, a ``state=`` given)
    to the records whose ``field`` is below the limit."""
    for path, (field, limit) in fields.items():
        offset = offsets.get(os.path.basename(path))
        if offset is not None:
            if truncate_at(path, offset):
                continue
            warnings.warn(
                f"{path} is shorter than when the checkpoint was saved ({offset} bytes): lines "
                f"were removed outside the run; keeping the records with {field} < {limit}",
                stacklevel=3,
            )
        truncate_jsonl(path, field, limit)


def run(
    engine: Engine,
    *,
    steps: int,
    run_dir: str | os.PathLike | None = None,
    resume: bool = False,
    overwrite: bool = False,
    allow_partial: bool = False,
    state: EngineState | None = None,
    checkpoint_every: int = 0,
    keep_checkpoints: int = 3,
    traces: bool | float | str = True,
    progress: bool = True,
    tensorboard: bool = False,
    sinks: Sequence[MetricSink] = (),
    on_update: OnUpdate | None = None,
    until: Callable[[dict], bool] | None = None,
    config: dict | None = None,
    handle_signals: bool = True,
) -> RunResult:
    """Trains until ``steps`` updates are done.

    Per generation batch the compiled ``engine.generate`` runs; whenever at least
    ``batch_groups`` admitted groups wait, the compiled ``engine.train`` runs. The host only
    logs, traces, checkpoints and raises.

    Args:
      engine: the :class:`Engine`.
      steps: total updates of the run (a resumed run continues up to this number).
      run_dir: where ``metrics.jsonl``, ``traces.jsonl``, ``checkpoints/`` and
        ``summary.json`` go; ``None`` writes nothing and never checkpoints.
      resume: continue from the latest checkpoint in ``run_dir``. Without one, a directory
        an earlier run left files in is refused (:class:`RunDirError`) unless ``overwrite``;
        an empty one starts fresh.
      overwrite: a fresh run (or a resume with nothing to resume) may delete what an earlier
        run left in ``run_dir``; without it such a directory is refused.
      allow_partial: on resume, start new envs/gates fresh, drop removed ones and accept a
        changed ``config`` (with a warning) instead of raising :class:`CheckpointMismatch`.
      state: continue from this state instead of a fresh one (ignored when resuming from a
        checkpoint); files in ``run_dir`` are kept up to this state's step.
      checkpoint_every: save every this many updates (0: only at the end and on SIGTERM/SIGINT).
      keep_checkpoints: how many checkpoints to keep.
      traces: trace every finalized group (``True``), none (``False``), or a sampled share.
      progress: show a progress bar on stderr.
      tensorboard: also log scalars to ``run_dir/tensorboard`` (needs ``tensorboardX``).
      sinks: more places for each update's metrics (:class:`TensorBoardSink`,
        :class:`WandbSink`, or anything with ``open``/``write``/``close``).
      on_update: ``(state, metrics) -> extra metrics`` called on the host after each update
        (e.g. a held-out evaluation every n steps); its metrics are logged too.
      until: ``(record) -> bool`` called on each update's logged record (after
        ``on_update``): ``True`` ends the run after that update, as if ``steps`` were reached
        (a checkpoint is saved; ``stopped`` is ``"until"``). E.g. stop at a held-out target.
      config: a JSON-able description of the run, saved in checkpoints and the summary. On
        resume it must equal the checkpoint's but for ``steps`` and ``checkpoint_every`` (how
        long to run, how often to save): a change is a :class:`CheckpointMismatch` naming each
        key, ``old -> new``, unless ``allow_partial``, which records every accepted change as
        ``config_changes`` (``[{"step": s, "changes": {key: [old, new]}}]``) in later
        checkpoints and ``summary.json``.
      handle_signals: save a checkpoint and stop cleanly on SIGTERM/SIGINT.

    Returns:
      A :class:`RunResult`.

    Raises:
      CurriculumStalled: ``stall_windows`` batch-equivalents in a row admitted nothing (with
        ``stall_policy="raise"``).
      CheckpointMismatch: a strict resume found a checkpoint that does not fit.
      CheckpointUnreadable: a resume found checkpoints but none reads back (a damaged one
        is skipped for the next older one, with a warning).
      RunDirError: another run holds ``run_dir``, or it holds an earlier run that this one
        would delete (see ``resume`` and ``overwrite``).
      CheckpointSaveError: a checkpoint could not be written; the run stopped at once.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an int >= 0, got {steps!r}")
    int_at_least(checkpoint_every, "checkpoint_every", 0)
    int_at_least(keep_checkpoints, "keep_checkpoints", 1)
    rate = _trace_rate(traces)
    # On several hosts every process runs the loop and saves checkpoints (Orbax needs all of
    # them); only process 0 takes the run directory's lock and writes the logs.
    writer = jax.process_index() == 0
    lock = None
    if run_dir is not None:
        run_dir = os.path.abspath(os.fspath(run_dir))
        lock = _rundir.prepare(
            run_dir, resume=resume, overwrite=overwrite, fresh=state is None, writer=writer
        )
    try:
        return _run(
            engine,
            steps=steps,
            run_dir=run_dir,
            resume=resume,
            allow_partial=allow_partial,
            state=state,
            checkpoint_every=checkpoint_every,
            keep_checkpoints=keep_checkpoints,
            rate=rate,
            progress=progress and writer,
            tensorboard=tensorboard,
            sinks=sinks,
            on_update=on_update,
            until=until,
            config=config,
            handle_signals=handle_signals,
            writer=writer,
        )
    finally:
        if lock is not None:
            lock.release()


ALREADY_COMPLETE = "already_complete"


def _settle(store: CheckpointStore | None) -> None:
    """Waits for a save in flight, so an error can say which checkpoints were committed."""
    if store is not None:
        with contextlib.suppress(Exception):  # a failed save is reported by the caller
            store.wait()


def _already_complete(
    run_dir: str, state: EngineState, config: dict | None, writer: bool = True
) -> RunResult:
    """A resume that finds nothing left to train: reads what the run left, and writes only
    what it lacks (``summary.json``, when the run was killed between its last checkpoint and
    the summary)."""
    c = jax.device_get(state.counters)
    updates = int(c.updates)
    last = last_record(os.path.join(run_dir, "metrics.jsonl"), "step", updates)
    path = os.path.join(run_dir, "summary.json")
    try:
        with open(path) as f:
            summary = json.load(f)
    except (OSError, json.JSONDecodeError):  # killed between the last save and the summary
        summary = {
            "stopped": "completed",
            "steps": updates,
            "rollouts": int(c.rollouts),
            "groups": int(c.groups),
            "admitted": int(c.admitted),
            "generations": int(c.generations),
            "final_metrics": last,
            "config": config or {},
        }
        if writer:
            try:
                _write_json_atomic(path, summary)
            except OSError as e:
                raise _rundir.write_failure(e, updates, run_dir) from None
    return RunResult(state, last, summary, ALREADY_COMPLETE)


def _write_json_atomic(path: str, data: dict) -> None:
    """Writes ``path`` whole or not at all (a temporary file renamed over it)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True, default=float)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _run(
    engine: Engine,
    *,
    steps: int,
    run_dir: str | None,
    resume: bool,
    allow_partial: bool,
    state: EngineState | None,
    checkpoint_every: int,
    keep_checkpoints: int,
    rate: float,
    progress: bool,
    tensorboard: bool,
    sinks: Sequence[MetricSink],
    on_update: OnUpdate | None,
    until: Callable[[dict], bool] | None,
    config: dict | None,
    handle_signals: bool,
    writer: bool,
) -> RunResult:
    """:func:`run` once the run directory is locked and checked."""
    cfg = engine.config
    b = cfg.batch_groups
    fresh = state is None
    store = metrics_writer = trace_writer = bar = None
    opened: list = []
    updates = 0
    saved_step = None  # the step of the checkpoint that holds the current state, if any
    history: list[dict] = []  # config changes accepted on resume, oldest first
    ended = False  # the body ran to its end (no error in flight)

    def save(step_state: EngineState, step: int, *, reached: bool = False) -> None:
        # ``reached``: ``until`` ended the run here; the checkpoint says so (even if this step
        # was saved already), so a resume knows the run is complete.
        nonlocal saved_step
        if store is None or (step == saved_step and not reached):
            return
        # Every log line up to this state reaches the disk before the checkpoint is committed,
        # and the checkpoint records where each log ends, for a resume to cut back to.
        logs = None
        if metrics_writer is not None:
            logs = {
                "metrics.jsonl": metrics_writer.sync(),
                "traces.jsonl": None if trace_writer is None else trace_writer.sync(),
            }
        _restore.save(
            store, step, engine, step_state, config, logs=logs, history=history, reached=reached
        )
        saved_step = step

    try:
        logs_at_checkpoint: dict = {}
        meta: dict = {}
        if run_dir is not None:
            ckpt_dir = os.path.join(run_dir, "checkpoints")
            store = CheckpointStore(ckpt_dir, max_to_keep=keep_checkpoints)
            if resume and store.steps():
                state, saved_step, meta = _restore.restore_latest(
                    store, engine, allow_partial=allow_partial, config=config
                )
                logs_at_checkpoint = meta.get("logs") or {}
                history = list(meta.get("config_changes") or [])
                changes = _restore.config_changes(meta.get("config"), config)
                if changes:  # accepted with allow_partial: the run mixes both configs
                    history.append({"step": saved_step, "changes": changes})
                fresh = False
        if state is None:
            state = engine.init()
        counters = jax.device_get(state.counters)
        updates = int(counters.updates)
        if saved_step is not None and (updates >= steps or meta.get("reached")):
            ended = True
            return _already_complete(run_dir, state, config, writer)
        if store is not None:
            store.check_writable()  # fail now, not at the first save
        if run_dir is not None and writer:
            metrics_path = os.path.join(run_dir, "metrics.jsonl")
            traces_path = os.path.join(run_dir, "traces.jsonl")
            if fresh:  # what is left is empty (the run directory's rules refused the rest)
                for p in (metrics_path, traces_path):
                    if os.path.exists(p):
                        os.remove(p)
            else:  # continuing: keep exactly the records that precede this state
                _cut_logs(
                    logs_at_checkpoint,
                    {
                        metrics_path: ("step", updates + 1),
                        traces_path: ("generation", int(counters.generations)),
                    },
                )
            metrics_writer = JsonlWriter(metrics_path)
            if rate > 0:
                trace_writer = JsonlWriter(traces_path)
        if writer:
            opened = open_sinks(
                sinks,
                tensorboard=tensorboard,
                run_dir=run_dir,
                first_step=updates + 1,
                config=config or {},
            )

        bar = ProgressBar(steps, start=updates) if progress else None
        t0 = time.perf_counter()
        groups_at_start = int(counters.groups)
        pending = int(jax.device_get(state.pending.count))
        last: dict[str, float] = {}
        stopped = "completed"
        warned_windows = 0
        votes: dict[str, dict[str, tuple[int, int]]] = {}
        with _Signals(handle_signals) as sig:
            while True:
                while pending >= b and updates < steps:
                    state, metrics = engine.train(state)
                    updates += 1
                    pending -= b
                    host = {k: float(v) for k, v in jax.device_get(metrics).items()}
                    c = jax.device_get(state.counters)
                    record = {
                        "step": updates,
                        "time": round(time.perf_counter() - t0, 4),
                        "rollouts": int(c.rollouts),
                        "groups": int(c.groups),
                        "generations": int(c.generations),
                        **host,
                    }
                    if on_update is not None:
                        extra = on_update(state, record)
                        if extra:
                            record.update({k: float(v) for k, v in extra.items()})
                    last = record
                    if metrics_writer is not None:
                        metrics_writer.write(record)
                        metrics_writer.flush()
                    for sink in opened:
                        sink.write(updates, record)
                    if bar is not None:
                        bar.update(
                            updates,
                            host.get("batch/reward_mean", float("nan")),
                            host.get("batch/admission_rate", float("nan")),
                            int(c.groups) - groups_at_start,
                        )
                    if store is not None:
                        store.check()  # a failed background save stops the run here
                    if checkpoint_every and updates % checkpoint_every == 0:
                        save(state, updates)
                    if until is not None and until(record):
                        stopped = "until"
                    if sig.received or stopped == "until":
                        break
                if updates >= steps or sig.received or stopped == "until":
                    break
                state, gen = engine.generate(state)
                # One small host read per generation batch (traces, guard and counts use it).
                gen = jax.device_get(gen)
                if trace_writer is not None:
                    _write_traces(trace_writer, engine, gen, rate)
                pending = int(gen.pending)
                _count_votes(votes, engine, gen)
                windows = int(gen.since_progress) // b
                if windows >= cfg.stall_windows:
                    if cfg.stall_policy == "raise":
                        raise CurriculumStalled(_stall_text(engine, state, windows, votes))
                    if windows > warned_windows:
                        warned_windows = windows
                        warnings.warn(_stall_text(engine, state, windows, votes), stacklevel=2)
                elif windows == 0:
                    warned_windows = 0
                if sig.received:
                    break
            if sig.received:
                stopped = sig.received
            save(state, updates, reached=stopped == "until")
        if store is not None:
            store.close()  # waits for the last save; raises if it failed
        ended = True
    except CheckpointSaveError as e:
        _settle(store)
        raise CheckpointSaveError(
            f"{e}\nThe run stopped at update {updates}; {_rundir.saved_text(run_dir)}. Free "
            "the disk or make the directory writable, then resume (--resume)."
        ) from None
    except OSError as e:
        if e.errno not in _rundir.WRITE_ERRNOS:
            raise
        _settle(store)
        raise _rundir.write_failure(e, updates, run_dir) from None
    finally:
        if store is not None:
            with contextlib.suppress(CheckpointSaveError):  # already raised above
                store.close()
        close_error = None
        for w in (metrics_writer, trace_writer):
            if w is not None:
                try:
                    w.close()
                except OSError as e:  # the buffered tail could not be written
                    close_error = close_error or e
        if close_error is not None and ended:  # else the error in flight says it all
            raise _rundir.write_failure(close_error, updates, run_dir) from None
        close_sinks(opened)
        if bar is not None:
            bar.close()

    c = jax.device_get(state.counters)
    summary = {
        "stopped": stopped,
        "steps": updates,
        "rollouts": int(c.rollouts),
        "groups": int(c.groups),
        "admitted": int(c.admitted),
        "generations": int(c.generations),
        "wall_seconds": round(time.perf_counter() - t0, 3),
        "final_metrics": last,
        "config": config or {},
    }
    if history:
        summary["config_changes"] = history
    if run_dir is not None and writer:
        try:
            _write_json_atomic(os.path.join(run_dir, "summary.json"), summary)
        except OSError as e:
            raise _rundir.write_failure(e, updates, run_dir) from None
    return RunResult(state, last, summary, stopped)
