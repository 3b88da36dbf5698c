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
from typing import Any, Literal

import jax
import numpy as np

from curriculax._checks import int_at_least
from curriculax._files import write_json_atomic
from curriculax._processes import agree, largest
from curriculax.checkpoint import (
    CheckpointSaveError,
    CheckpointStore,
    refuse_zero_size,
    unsafe_path,
)
from curriculax.engine import _restore, _rundir
from curriculax.engine._engine import Engine, EngineState, Generation
from curriculax.engine._env import key_ints
from curriculax.engine._guard import CurriculumStalled, stall_message
from curriculax.engine._logging import (
    JsonlWriter,
    ProgressBar,
    _clean,
    last_record,
    truncate_at,
    truncate_jsonl,
)
from curriculax.engine._sinks import MetricSink, close_sinks, open_sinks

OnUpdate = Callable[[EngineState, dict[str, float]], dict[str, float] | None]
# How a run ended (:attr:`RunResult.stopped`).
Stopped = Literal["completed", "until", "SIGTERM", "SIGINT", "already_complete"]


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
        or ended by ``until``, and trained no more (``metrics`` is then the last logged
        update's, ``summary`` the one on disk, written first if the run was killed before it).
    """

    state: EngineState
    metrics: dict[str, float]
    summary: dict[str, Any]
    stopped: Stopped


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
    what = f"traces must be True/False, 'all'/'off' or a rate in [0, 1], got {traces!r}"
    try:
        rate = float(traces)
    except (TypeError, ValueError):
        raise (ValueError if isinstance(traces, str) else TypeError)(what) from None
    if not 0.0 <= rate <= 1.0:
        raise ValueError(what)
    return rate


_SIGNALS = (None, "SIGTERM", "SIGINT")


class _Signals:
    """Turns SIGTERM/SIGINT into a flag the loop checks between compiled calls."""

    def __init__(self, enabled: bool):
        self.received: str | None = None
        self._old = {}
        self._agree = enabled and jax.process_count() > 1
        self.enabled = enabled and threading.current_thread() is threading.main_thread()

    def stop(self) -> str | None:
        """The signal to stop on now, or None. On several processes one agreed by all (a
        collective: every process calls it at the same points), so they stop at the same
        update: a signal reaching each host at another update left one process saving its
        checkpoint and the other generating, both waiting forever."""
        if self._agree:
            return _SIGNALS[largest(_SIGNALS.index(self.received))]
        return self.received

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
    since = np.asarray(jax.device_get(state.since_progress_by_env))
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
        gates={e.name: list(e.curriculum.gates) for e in engine.envs},
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


def _cut_to_state(run_dir: str, counters: Any, offsets: dict) -> None:
    """Cuts ``metrics.jsonl`` and ``traces.jsonl`` back to the state being continued (its
    ``counters``): to the byte offsets its checkpoint recorded, else (older checkpoints, logs
    the earlier run did not write, a ``state=`` given) to the records before it."""
    fields = {
        os.path.join(run_dir, "metrics.jsonl"): ("step", int(counters.updates) + 1),
        os.path.join(run_dir, "traces.jsonl"): ("generation", int(counters.generations)),
    }
    for path, (field, limit) in fields.items():
        offset = offsets.get(os.path.basename(path))
        if offset is not None:
            if truncate_at(path, offset):
                continue
            warnings.warn(
                f"{path} is shorter than when the checkpoint was saved ({offset} bytes): lines "
                f"were removed outside the run; keeping the records with {field} < {limit}",
                stacklevel=5,  # _cut_to_state, _Outputs.open or _already_complete, _run, run
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
    on_finish: Callable[[RunResult], None] | None = None,
    config: dict | None = None,
    resumable: Sequence[str] = (),
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
        ``summary.json`` go; ``None`` writes nothing and never checkpoints. A run that
        continues an earlier one (a resume, or ``state``) and ends in an exception rewrites
        ``summary.json`` to say where it stopped: ``stopped`` is the exception's class name
        (e.g. ``"CurriculumStalled"``) and ``error`` its first line.
      resume: continue from the latest checkpoint in ``run_dir`` (``run_dir=None`` is
        refused with a ValueError). Without one, a directory
        an earlier run left files in is refused (:class:`RunDirError`) unless ``overwrite``;
        an empty one starts fresh.
      overwrite: a fresh run (or a resume with nothing to resume) may delete what an earlier
        run left in ``run_dir`` (its logs, summary and TensorBoard files, and in
        ``checkpoints/`` only what runs write there); without it such a directory is refused.
      allow_partial: on resume, start new envs/gates fresh, drop removed ones and accept a
        changed ``config`` (with a warning) instead of raising :class:`CheckpointMismatch`.
      state: continue from this state instead of a fresh one (ignored when resuming from a
        checkpoint); files in ``run_dir`` are kept up to this state's step. Checkpoints and
        ``metrics.jsonl`` lines past it (an earlier run's) are refused (:class:`RunDirError`),
        or deleted with ``overwrite``. The run consumes it (its compiled steps donate their
        input state): to start two runs from one state, pass each a copy
        (``jax.tree.map(jnp.copy, state)``); a state an earlier run consumed is refused.
      checkpoint_every: save every this many updates (0: only at the end and on SIGTERM/SIGINT).
      keep_checkpoints: how many checkpoints to keep.
      traces: trace every finalized group (``True``), none (``False``), or a sampled share.
      progress: show a progress bar on stderr.
      tensorboard: also log scalars to ``run_dir/tensorboard`` (needs ``tensorboardX``).
      sinks: more places for each update's metrics (:class:`TensorBoardSink`,
        :class:`WandbSink`, or anything with ``open``/``write``/``close``).
      on_update: ``(state, metrics) -> extra metrics`` called on the host after each update
        (e.g. a held-out evaluation every n steps); its metrics are logged too, under keys of
        its own (one the record already has, such as ``step``, is refused). The state is
        valid during the call only (the next step consumes it): copy what you keep, e.g.
        ``jax.device_get(state.solver)``.
      until: ``(record) -> bool`` called on each update's logged record (after
        ``on_update``): ``True`` ends the run after that update, as if ``steps`` were reached
        (a checkpoint is saved; ``stopped`` is ``"until"``). E.g. stop at a held-out target.
        A resume of such a run finds it complete if its own ``until`` holds on that record;
        without one (or where it does not hold) it trains on to ``steps``.
      on_finish: ``(result) -> None`` called on the host with the :class:`RunResult` before
        ``run`` returns, while ``run_dir`` is still held: what it writes there (a final
        evaluation, a plot of the curves) cannot interleave with another run that starts in
        the same directory. Also called when a resume finds the run complete (``stopped`` is
        ``"already_complete"``); not called when the run ends in an exception.
      config: a JSON-able description of the run, saved in checkpoints and the summary. On
        resume it must equal the checkpoint's but for ``steps`` and ``checkpoint_every`` (how
        long to run, how often to save): a change is a :class:`CheckpointMismatch` naming each
        key, ``old -> new``, unless ``allow_partial``, which records every accepted change as
        ``config_changes`` (``[{"step": s, "changes": {key: [old, new]}}]``) in later
        checkpoints and ``summary.json``.
      resumable: further keys of ``config`` (dotted, e.g. ``"target"``) a resume may change
        without ``allow_partial``: settings that change no state (a stop condition, as
        ``until`` reads it). A change is recorded in ``config_changes`` as above.
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
        would delete (see ``resume`` and ``overwrite``); its path holds a character Orbax
        takes for a pattern (``[ * ? \\``); ``checkpoints/`` is a file or holds a numbered
        folder that is not a checkpoint.
      CheckpointSaveError: a checkpoint could not be written; the run stopped at once.
      ValueError: ``state`` was consumed by an earlier run; ``on_update`` returned a key the
        record already has. With a ``run_dir``: a leaf of the state has size 0 (Orbax cannot
        save it), raised before the first update; on several processes, the engine has no
        mesh over every process's devices (see :func:`make_mesh`).
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an int >= 0, got {steps!r}")
    int_at_least(checkpoint_every, "checkpoint_every", 0)
    int_at_least(keep_checkpoints, "keep_checkpoints", 1)
    if state is not None:
        _refuse_consumed(state)
    if run_dir is not None:  # it is saved with every checkpoint
        _check_config(config)
        _refuse_process_local_state(engine)
    if resume and run_dir is None:
        raise ValueError(
            "resume=True needs the run_dir to resume from, got run_dir=None (a run without a "
            "run_dir saves no checkpoint); pass run_dir, or state= to continue from a state"
        )
    # On several hosts every process runs the loop and saves checkpoints (Orbax needs all of
    # them); only process 0 takes the run directory's lock and writes the logs.
    process_zero = jax.process_index() == 0
    if run_dir is not None:
        run_dir = os.path.abspath(os.fspath(run_dir))
        ckpt = os.path.join(run_dir, _rundir.CHECKPOINTS)
        problem = unsafe_path(ckpt)
        if problem is not None:  # before anything is made there
            raise _rundir.RunDirError(f"{problem} (another run directory, --run-dir).")
    plan = _Plan(
        steps=steps,
        run_dir=run_dir,
        resume=resume,
        allow_partial=allow_partial,
        checkpoint_every=checkpoint_every,
        keep_checkpoints=keep_checkpoints,
        trace_rate=_trace_rate(traces),
        progress=progress and process_zero,
        tensorboard=tensorboard,
        sinks=tuple(sinks),
        on_update=on_update,
        until=until,
        config=config,
        resumable=_check_resumable(resumable),
        handle_signals=handle_signals,
        process_zero=process_zero,
    )
    lock = None
    if run_dir is not None:
        lock = _rundir.prepare(
            run_dir,
            resume=resume,
            overwrite=overwrite,
            given_step=None if state is None else int(jax.device_get(state.counters.updates)),
            process_zero=process_zero,
        )
    try:
        result = _run(engine, plan, state)
        if on_finish is not None:
            on_finish(result)
        return result
    finally:
        if lock is not None:
            lock.release()


def _unwritable(value: Any, where: str) -> tuple[str, Exception] | None:
    """The first key of ``value`` (dotted from ``where``) whose value ``json.dumps`` refuses,
    with its error, or ``None``."""
    try:
        json.dumps(value)  # as the checkpoint's JSON item is written
        return None
    except (TypeError, ValueError) as e:
        if isinstance(value, dict):
            for k, v in value.items():
                found = _unwritable(v, f"{where}.{k}" if where else str(k))
                if found is not None:
                    return found
        elif isinstance(value, list | tuple):
            for i, v in enumerate(value):
                found = _unwritable(v, f"{where}[{i}]" if where else f"[{i}]")
                if found is not None:
                    return found
        return where, e


def _number(key: str, value: Any) -> float:
    """An ``on_update`` value as the float the record logs; a ValueError naming its key."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"on_update returned {key!r}: {value!r}, not a number (the record logs numbers; "
            "e.g. float(x) for a one-element array)"
        ) from None


def _check_resumable(keys: Sequence[str]) -> tuple[str, ...]:
    if isinstance(keys, str) or not all(isinstance(k, str) and k for k in keys):
        raise TypeError(f"resumable must be a sequence of config keys (str), got {keys!r}")
    return tuple(keys)


def _check_config(config: Any) -> None:
    """Raises ValueError, before anything trains or is written, when ``config`` cannot be
    saved as JSON (a numpy scalar, an object), naming the key."""
    if config is None:
        return
    found = _unwritable(config, "")
    if found is not None:
        where, e = found
        at = f"key {where!r}" if where else "it"
        raise ValueError(
            f"config must be JSON-writable (it is saved with every checkpoint); {at} holds "
            f"{type(e).__name__}: {e}. Use plain Python values (e.g. float(x) for a numpy "
            "scalar)."
        )


@dataclasses.dataclass(frozen=True)
class _Plan:
    """:func:`run`'s arguments once checked (``run_dir`` absolute, ``traces`` a rate)."""

    steps: int
    run_dir: str | None
    resume: bool
    allow_partial: bool
    checkpoint_every: int
    keep_checkpoints: int
    trace_rate: float
    progress: bool  # show the bar (process 0 only)
    tensorboard: bool
    sinks: tuple[MetricSink, ...]
    on_update: OnUpdate | None
    until: Callable[[dict], bool] | None
    config: dict | None
    resumable: tuple[str, ...]
    handle_signals: bool
    process_zero: bool  # this process writes the logs, the sinks and the summary


ALREADY_COMPLETE: Stopped = "already_complete"


def _summary(
    counters: Any,
    *,
    stopped: Stopped,
    updates: int,
    last: dict[str, float],
    config: dict | None,
    wall_seconds: float | None = None,
    history: list | None = None,
) -> dict[str, Any]:
    """What ``summary.json`` holds; ``counters`` are the final :class:`Counters` on the host."""
    summary = {
        "stopped": stopped,
        "steps": updates,
        "rollouts": int(counters.rollouts),
        "groups": int(counters.groups),
        "admitted": int(counters.admitted),
        "generations": int(counters.generations),
        "final_metrics": _clean(last),  # NaN (e.g. an undefined admission rate) as null
        "config": config or {},
    }
    if wall_seconds is not None:
        summary["wall_seconds"] = round(wall_seconds, 3)
    if history:
        summary["config_changes"] = history
    return summary


def _already_complete(
    run_dir: str,
    state: EngineState,
    config: dict | None,
    process_zero: bool = True,
    *,
    reached: bool = False,
    history: list[dict] | None = None,
    logs_at_checkpoint: dict | None = None,
) -> RunResult:
    """A resume that finds nothing left to train: reads what the run left, and writes only
    what does not match its last checkpoint: log lines past it (a crash after the checkpoint,
    resumed with fewer ``steps``), and ``summary.json`` when it is missing or describes
    another step (killed between the last checkpoint and the summary, perhaps of a longer
    resume). ``reached``: ``until`` ended the run at that checkpoint."""
    c = jax.device_get(state.counters)
    updates = int(c.updates)
    if process_zero:
        _cut_to_state(run_dir, c, logs_at_checkpoint or {})
    last = last_record(os.path.join(run_dir, "metrics.jsonl"), "step", updates)
    path = os.path.join(run_dir, "summary.json")
    try:
        with open(path) as f:
            summary = json.load(f)
    except (OSError, json.JSONDecodeError):  # killed between the last save and the summary
        summary = None
    matches = isinstance(summary, dict) and summary.get("steps") == updates
    matches = matches and "error" not in summary  # a failed run's, past the checkpoint
    if not (matches and summary.get("generations") == int(c.generations)):
        summary = _summary(
            c,
            stopped="until" if reached else "completed",
            updates=updates,
            last=last,
            config=config,
            history=history,
        )
        if process_zero:
            try:
                _write_json_atomic(path, summary)
            except OSError as e:
                raise _rundir.write_failure(e, updates, run_dir) from None
    return RunResult(state, last, summary, ALREADY_COMPLETE)


def _still_reached(plan: _Plan, meta: dict, updates: int) -> bool:
    """Whether a checkpoint that ``until`` ended still ends the run: the resume's own
    ``until`` holds on that update's logged record. Without one, or where it does not hold (a
    higher target, the condition turned off), the run trains on to ``steps``, as one that
    reached ``steps`` does when given more."""
    if not meta.get("reached") or plan.until is None:
        return False
    record = {}
    if plan.run_dir is not None:
        record = last_record(os.path.join(plan.run_dir, "metrics.jsonl"), "step", updates)
    if record.get("step") != updates:  # the log lost it: keep the checkpoint's word
        return True
    return bool(plan.until(record))


def _write_json_atomic(path: str, data: dict) -> None:
    """Writes ``path`` whole or not at all (a temporary file renamed over it)."""
    write_json_atomic(path, data, indent=2, sort_keys=True, default=float)


class _Checkpoints:
    """The run's checkpoint store (``None`` without a run directory), the step whose
    checkpoint holds the current state, and the config changes accepted on resume."""

    def __init__(self, plan: _Plan):
        self.plan = plan
        self.store = None
        if plan.run_dir is not None:
            directory = os.path.join(plan.run_dir, _rundir.CHECKPOINTS)
            self.store = CheckpointStore(directory, max_to_keep=plan.keep_checkpoints)
        self.saved_step: int | None = None
        self.meta: dict = {}  # the restored checkpoint's JSON item
        self.history: list[dict] = []  # config changes accepted on resume, oldest first

    def restore(self, engine: Engine) -> EngineState | None:
        """The latest checkpoint's state when resuming one, else ``None``."""
        plan = self.plan
        if self.store is None or not plan.resume:
            return None
        if not self.store.steps():
            # The run directory's rules let this resume through (they saw a step Orbax does
            # not list): starting fresh would cut the earlier run's logs.
            found = _rundir.contents(plan.run_dir) if plan.process_zero else None
            left = found is not None and (found.steps or found.unfinished or found.logs)
            if agree(bool(left)):
                raise _rundir.RunDirError(
                    f"nothing to resume in {plan.run_dir}: Orbax finds no checkpoint in "
                    f"{self.store.directory}, but an earlier run left "
                    f"{found.describe() if found else 'files'}. Pass overwrite=True "
                    "(--overwrite) to delete them and start fresh, or choose another run "
                    "directory (--run-dir)."
                )
            return None
        state, self.saved_step, self.meta = _restore.restore_latest(
            self.store,
            engine,
            allow_partial=plan.allow_partial,
            config=plan.config,
            resumable=plan.resumable,
        )
        self.history = list(self.meta.get("config_changes") or [])
        changes = _restore.config_changes(self.meta.get("config"), plan.config)
        if changes:  # accepted (resumable, or allow_partial): the run mixes both configs
            self.history.append({"step": self.saved_step, "changes": changes})
        return state

    def save(
        self,
        engine: Engine,
        state: EngineState,
        step: int,
        outputs: _Outputs,
        *,
        reached: bool = False,
    ) -> None:
        """Saves ``state`` as checkpoint ``step`` unless it is saved already. ``reached``:
        ``until`` ended the run here; the checkpoint says so (even if this step was saved
        already), so a resume knows the run is complete."""
        if self.store is None or (step == self.saved_step and not reached):
            return
        _restore.save(
            self.store,
            step,
            engine,
            state,
            self.plan.config,
            logs=outputs.sync(),
            history=self.history,
            reached=reached,
        )
        self.saved_step = step

    def check(self) -> None:
        """Raises :class:`CheckpointSaveError` if a background save failed."""
        if self.store is not None:
            self.store.check()

    def settle(self) -> None:
        """Waits for a save in flight, so an error can say which checkpoints were committed."""
        if self.store is not None:
            with contextlib.suppress(Exception):  # a failed save is reported by the caller
                self.store.wait()

    def close(self, *, quiet: bool = False) -> None:
        """Waits for the last save; raises if it failed, unless ``quiet`` (already raised)."""
        if self.store is None:
            return
        if quiet:
            with contextlib.suppress(CheckpointSaveError):
                self.store.close()
        else:
            self.store.close()


class _Outputs:
    """Where process 0 records a run: ``metrics.jsonl``, ``traces.jsonl``, the metric sinks and
    the progress bar. Other processes (and runs without them) hold ``None`` and ``[]``."""

    def __init__(self):
        self.metrics: JsonlWriter | None = None
        self.traces: JsonlWriter | None = None
        self.sinks: list = []
        self.bar: ProgressBar | None = None
        self.groups_at_start = 0

    def open(self, plan: _Plan, counters: Any, *, fresh: bool, logs_at_checkpoint: dict) -> None:
        """Opens what process 0 writes, the logs cut back to ``counters`` (the run's state)."""
        updates = int(counters.updates)
        self.groups_at_start = int(counters.groups)
        if not plan.process_zero:
            return
        if plan.run_dir is not None:
            metrics_path = os.path.join(plan.run_dir, "metrics.jsonl")
            traces_path = os.path.join(plan.run_dir, "traces.jsonl")
            if fresh:  # what is left is empty (the run directory's rules refused the rest)
                for p in (metrics_path, traces_path):
                    if os.path.exists(p):
                        os.remove(p)
            else:  # continuing: keep exactly the records that precede this state
                _cut_to_state(plan.run_dir, counters, logs_at_checkpoint)
            self.metrics = JsonlWriter(metrics_path)
            if plan.trace_rate > 0:
                self.traces = JsonlWriter(traces_path)
        self.sinks = open_sinks(
            plan.sinks,
            tensorboard=plan.tensorboard,
            run_dir=plan.run_dir,
            first_step=updates + 1,
            config=plan.config or {},
        )
        if plan.progress:
            self.bar = ProgressBar(plan.steps, start=updates)

    def write(self, record: dict[str, float], counters: Any) -> None:
        """One update's record: a ``metrics.jsonl`` line (flushed), the sinks, the bar."""
        step = record["step"]
        if self.metrics is not None:
            self.metrics.write(record)
            self.metrics.flush()
        for sink in self.sinks:
            sink.write(step, record)
        if self.bar is not None:
            self.bar.update(
                step,
                record.get("batch/reward_mean", float("nan")),
                record.get("batch/admission_rate", float("nan")),
                int(counters.groups) - self.groups_at_start,
            )

    def write_traces(self, engine: Engine, gen: Generation, rate: float) -> None:
        if self.traces is not None:
            _write_traces(self.traces, engine, gen, rate)

    def sync(self) -> dict[str, int | None] | None:
        """Flushes the logs to disk; ``{file name: byte length}`` for the checkpoint."""
        if self.metrics is None:
            return None
        return {
            "metrics.jsonl": self.metrics.sync(),
            "traces.jsonl": None if self.traces is None else self.traces.sync(),
        }

    def close(self) -> OSError | None:
        """Closes everything; returns the first error writing a log's buffered tail."""
        error = None
        for w in (self.metrics, self.traces):
            if w is not None:
                try:
                    w.close()
                except OSError as e:  # the buffered tail could not be written
                    error = error or e
        close_sinks(self.sinks)
        if self.bar is not None:
            self.bar.close()
        return error


class _StallGuard:
    """The no-progress guard on the host: raises :class:`CurriculumStalled` (or warns, once
    per new window count) when ``stall_windows`` batch-equivalents in a row admitted nothing,
    with each gate's votes since the last admitted group.

    It also waits for a second generation batch in a row without an admitted group: with
    ``G >= stall_windows * B`` one batch alone reaches the windows, and one batch says little
    about a curriculum (a gate warming up, one unlucky draw); a second one, drawn after the
    curriculum observed the first, does.
    """

    def __init__(self, engine: Engine):
        self.engine = engine
        self.votes: dict[str, dict[str, tuple[int, int]]] = {}
        self.warned_windows = 0

    def check(self, state: EngineState, gen: Generation) -> None:
        """After a generation batch (``gen`` already on the host)."""
        cfg = self.engine.config
        _count_votes(self.votes, self.engine, gen)
        since = int(gen.since_progress)
        windows = since // cfg.batch_groups
        # `since` grows by G per generation batch without an admitted group.
        if windows >= cfg.stall_windows and since >= 2 * cfg.generation:
            if cfg.stall_policy == "raise":
                raise CurriculumStalled(_stall_text(self.engine, state, windows, self.votes))
            if windows > self.warned_windows:
                self.warned_windows = windows
                text = _stall_text(self.engine, state, windows, self.votes)
                warnings.warn(text, stacklevel=5)  # check, _loop, _run, run -> run's caller
        elif windows == 0:
            self.warned_windows = 0


@dataclasses.dataclass
class _Progress:
    """Where the loop stands; read after it ends, or when it fails."""

    state: EngineState
    updates: int
    started: float  # perf_counter when the loop started
    last: dict[str, float] = dataclasses.field(default_factory=dict)
    stopped: Stopped = "completed"
    counters: Any = None  # host counters at the last update (or the start)


def _run(engine: Engine, plan: _Plan, state: EngineState | None) -> RunResult:
    """:func:`run` once the run directory is locked and checked."""
    checkpoints = _Checkpoints(plan)
    outputs = _Outputs()
    updates = 0
    ended = False  # the body ran to its end (no error in flight)
    try:
        restored = checkpoints.restore(engine)
        fresh = state is None and restored is None
        state = restored if restored is not None else state
        if state is None:
            state = engine.init()
        if (
            restored is not None
            and plan.config is None
            and checkpoints.meta.get("config") is not None
        ):
            # A resume given no config carries the run's on (else the next resume compares
            # against nothing and lets any change through).
            plan = dataclasses.replace(plan, config=checkpoints.meta["config"])
            checkpoints.plan = plan
        counters = jax.device_get(state.counters)
        updates = int(counters.updates)
        reached = _still_reached(plan, checkpoints.meta, updates)
        if checkpoints.saved_step is not None and (updates >= plan.steps or reached):
            ended = True
            return _already_complete(
                plan.run_dir,
                state,
                plan.config,
                plan.process_zero,
                reached=bool(checkpoints.meta.get("reached")),
                history=checkpoints.history,
                logs_at_checkpoint=checkpoints.meta.get("logs") or {},
            )
        if checkpoints.store is not None:
            checkpoints.store.check_writable()  # fail now, not at the first save
            _refuse_foreign_steps(checkpoints.store)
            # A leaf Orbax cannot save (a user's solver state) fails now, not at the first save.
            refuse_zero_size(state, f"this run's checkpoints in {checkpoints.store.directory}")
        logs = checkpoints.meta.get("logs") or {}
        outputs.open(plan, counters, fresh=fresh, logs_at_checkpoint=logs)
        progress = _Progress(state, updates, started=time.perf_counter(), counters=counters)
        try:
            with _Signals(plan.handle_signals) as sig:
                try:
                    _loop(engine, plan, progress, checkpoints, outputs, sig)
                finally:
                    updates = progress.updates  # for the message of a failed save
                reached = progress.stopped == "until"
                checkpoints.save(engine, progress.state, updates, outputs, reached=reached)
            checkpoints.close()  # waits for the last save; raises if it failed
        except BaseException as e:
            if not fresh:  # else an earlier run's summary.json would outlive this run's logs
                _failure_summary(plan, progress, checkpoints.history, e)
            raise
        ended = True
    except CheckpointSaveError as e:
        checkpoints.settle()
        raise CheckpointSaveError(
            f"{e}\nThe run stopped at update {updates}; {_rundir.saved_text(plan.run_dir)}. "
            "Fix its cause (above; e.g. free the disk or make the directory writable), then "
            "resume (--resume)."
        ) from None
    except OSError as e:
        if e.errno not in _rundir.WRITE_ERRNOS:
            raise
        checkpoints.settle()
        raise _rundir.write_failure(e, updates, plan.run_dir) from None
    finally:
        checkpoints.close(quiet=True)
        close_error = outputs.close()
        if close_error is not None and ended:  # else the error in flight says it all
            raise _rundir.write_failure(close_error, updates, plan.run_dir) from None

    summary = _summary(
        jax.device_get(progress.state.counters),
        stopped=progress.stopped,
        updates=progress.updates,
        last=progress.last,
        config=plan.config,
        wall_seconds=time.perf_counter() - progress.started,
        history=checkpoints.history,
    )
    if plan.run_dir is not None and plan.process_zero:
        try:
            _write_json_atomic(os.path.join(plan.run_dir, "summary.json"), summary)
        except OSError as e:
            raise _rundir.write_failure(e, progress.updates, plan.run_dir) from None
    return RunResult(progress.state, progress.last, summary, progress.stopped)


def _refuse_consumed(state: EngineState) -> None:
    """A state whose arrays a compiled step already consumed (donated) fails deep inside the
    run with "Array has been deleted"; refused here, saying why."""
    for path, leaf in jax.tree_util.tree_flatten_with_path(state)[0]:
        if isinstance(leaf, jax.Array) and leaf.is_deleted():
            raise ValueError(
                f"state= was consumed by an earlier run or engine step (its array at "
                f"{jax.tree_util.keystr(path)} is deleted): the compiled steps donate the "
                "state they are given. To start two runs from one state, pass each a copy: "
                "jax.tree.map(jnp.copy, state)"
            )


def _refuse_process_local_state(engine: Engine) -> None:
    """On several processes a checkpoint is one state saved by all of them together: a state
    each process holds on its own devices (no mesh, or one over some processes only) cannot
    be saved so (Orbax fails at the first save, after the first interval's training)."""
    processes = jax.process_count()
    if processes == 1:
        return
    spanned = 0 if engine.mesh is None else len({d.process_index for d in engine.mesh.devices.flat})
    if spanned < processes:
        raise ValueError(
            f"a run_dir on {processes} processes needs an engine mesh over the devices of every "
            f"process (Engine(..., mesh=make_mesh(n)) after jax.distributed.initialize); this "
            + (
                "engine has no mesh"
                if engine.mesh is None
                else f"engine's mesh spans {spanned} of them"
            )
            + ", so each process's state is its own and the processes cannot save it as one "
            "checkpoint"
        )


def _refuse_foreign_steps(store: CheckpointStore) -> None:
    """Raises :class:`RunDirError` before training if a numbered folder of the checkpoint
    directory is not a checkpoint (the first save would refuse it, after the training)."""
    foreign = store.foreign_steps()
    if foreign:
        raise _rundir.RunDirError(
            f"{store.directory} holds numbered folder(s) that are not checkpoints of this run "
            f"({', '.join(foreign[:5])}{' ...' if len(foreign) > 5 else ''}); Orbax takes "
            "them for old steps and would delete them. Move them out of the folder, or "
            "choose another run directory (--run-dir)."
        )


def _failure_summary(plan: _Plan, progress: _Progress, history: list, error: BaseException):
    """Writes ``summary.json`` for a continued run that ends in ``error``: ``stopped`` is the
    exception's class name and ``error`` its first line, the counts where the run stopped.
    Best effort: the error in flight is what the caller sees."""
    if plan.run_dir is None or not plan.process_zero:
        return
    try:
        counters = jax.device_get(progress.state.counters)
    except Exception:  # the state was donated to a compiled call that failed
        counters = progress.counters
    lines = str(error).strip().splitlines()
    summary = _summary(
        counters,
        stopped=type(error).__name__,
        updates=progress.updates,
        last=progress.last,
        config=plan.config,
        wall_seconds=time.perf_counter() - progress.started,
        history=history,
    )
    summary["error"] = lines[0] if lines else type(error).__name__
    with contextlib.suppress(Exception):
        _write_json_atomic(os.path.join(plan.run_dir, "summary.json"), summary)


def _loop(
    engine: Engine,
    plan: _Plan,
    progress: _Progress,
    checkpoints: _Checkpoints,
    outputs: _Outputs,
    sig: _Signals,
) -> None:
    """Generation batches and updates until ``plan.steps`` updates, ``until`` or a signal."""
    b = engine.config.batch_groups
    guard = _StallGuard(engine)
    pending = int(jax.device_get(progress.state.pending.count))
    signal_name = sig.stop()  # a signal during the set-up (compiling, restoring)
    while True:
        while pending >= b and progress.updates < plan.steps:
            _update(engine, plan, progress, checkpoints, outputs)
            pending -= b
            signal_name = sig.stop()
            if signal_name or progress.stopped == "until":
                break
        if progress.updates >= plan.steps or signal_name or progress.stopped == "until":
            break
        progress.state, gen = engine.generate(progress.state)
        # One small host read per generation batch (traces, guard and counts use it).
        gen = jax.device_get(gen)
        outputs.write_traces(engine, gen, plan.trace_rate)
        pending = int(gen.pending)
        guard.check(progress.state, gen)
        signal_name = sig.stop()
        if signal_name:
            break
    if signal_name:
        progress.stopped = signal_name


def _update(
    engine: Engine,
    plan: _Plan,
    progress: _Progress,
    checkpoints: _Checkpoints,
    outputs: _Outputs,
) -> None:
    """One update on the pending batch: train, log, checkpoint when due, ask ``until``."""
    progress.state, metrics = engine.train(progress.state)
    progress.updates += 1
    host, c = jax.device_get((metrics, progress.state.counters))  # one host read per update
    host = {k: float(v) for k, v in host.items()}
    record = {
        "step": progress.updates,
        "time": round(time.perf_counter() - progress.started, 4),
        "rollouts": int(c.rollouts),
        "groups": int(c.groups),
        "generations": int(c.generations),
        **host,
    }
    if plan.on_update is not None:
        extra = plan.on_update(progress.state, record)
        if extra:
            taken = sorted(set(extra) & set(record))
            if taken:  # else it replaced the engine's own value (``step``: the sinks' x axis)
                raise ValueError(
                    f"on_update returned {taken}, key(s) the engine logs itself on this line; "
                    "name its metrics otherwise (e.g. 'eval/...')"
                )
            record.update({k: _number(k, v) for k, v in extra.items()})
    progress.last = record
    progress.counters = c
    outputs.write(record, c)
    checkpoints.check()  # a failed background save stops the run here
    if plan.checkpoint_every and progress.updates % plan.checkpoint_every == 0:
        checkpoints.save(engine, progress.state, progress.updates, outputs)
    # On several processes any process's ``until`` stops them all (its record's "time" is
    # its own clock), at the same update.
    if plan.until is not None and largest(int(bool(plan.until(record)))):
        progress.stopped = "until"
