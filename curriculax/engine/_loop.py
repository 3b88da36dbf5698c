"""The host loop: drives the compiled engine, logs, traces, checkpoints and raises."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from curriculax.checkpoint import CheckpointStore
from curriculax.engine import _restore
from curriculax.engine._engine import Engine, EngineState, Generation
from curriculax.engine._guard import CurriculumStalled, stall_message
from curriculax.engine._logging import (
    JsonlWriter,
    ProgressBar,
    TensorBoardWriter,
    truncate_jsonl,
)

OnUpdate = Callable[[EngineState, dict[str, float]], dict[str, float] | None]


@dataclasses.dataclass
class RunResult:
    """What :func:`run` returns.

    Attributes:
      state: the final engine state.
      metrics: the last update's metrics (host floats).
      summary: what ``summary.json`` holds.
      stopped: ``"completed"``, ``"until"`` (the ``until`` callback ended it), or the signal
        that stopped the run (``"SIGTERM"``, ``"SIGINT"``) after it saved a checkpoint.
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
                "key": int(gen.task_keys[i]),
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


def run(
    engine: Engine,
    *,
    steps: int,
    run_dir: str | os.PathLike | None = None,
    resume: bool = False,
    allow_partial: bool = False,
    state: EngineState | None = None,
    checkpoint_every: int = 0,
    keep_checkpoints: int = 3,
    traces: bool | float | str = True,
    progress: bool = True,
    tensorboard: bool = False,
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
      resume: continue from the latest checkpoint in ``run_dir`` if there is one.
      allow_partial: on resume, start new envs/gates fresh and drop removed ones (with a
        warning) instead of raising :class:`CheckpointMismatch`.
      state: continue from this state instead of a fresh one (ignored when resuming from a
        checkpoint); files in ``run_dir`` are kept up to this state's step.
      checkpoint_every: save every this many updates (0: only at the end and on SIGTERM/SIGINT).
      keep_checkpoints: how many checkpoints to keep.
      traces: trace every finalized group (``True``), none (``False``), or a sampled share.
      progress: show a progress bar on stderr.
      tensorboard: also log scalars to ``run_dir/tensorboard`` (needs ``tensorboardX``).
      on_update: ``(state, metrics) -> extra metrics`` called on the host after each update
        (e.g. a held-out evaluation every n steps); its metrics are logged too.
      until: ``(record) -> bool`` called on each update's logged record (after
        ``on_update``): ``True`` ends the run after that update, as if ``steps`` were reached
        (a checkpoint is saved; ``stopped`` is ``"until"``). E.g. stop at a held-out target.
      config: a JSON-able description of the run, saved in checkpoints and the summary.
      handle_signals: save a checkpoint and stop cleanly on SIGTERM/SIGINT.

    Returns:
      A :class:`RunResult`.

    Raises:
      CurriculumStalled: ``stall_windows`` batch-equivalents in a row admitted nothing (with
        ``stall_policy="raise"``).
      CheckpointMismatch: a strict resume found a checkpoint that does not fit.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an int >= 0, got {steps!r}")
    cfg = engine.config
    b = cfg.batch_groups
    rate = _trace_rate(traces)
    store = metrics_writer = trace_writer = tb = None
    fresh = state is None
    # On several hosts every process runs the loop and saves checkpoints (Orbax needs all of
    # them); only process 0 writes the logs.
    writer = jax.process_index() == 0
    if run_dir is not None:
        run_dir = os.path.abspath(os.fspath(run_dir))
        os.makedirs(run_dir, exist_ok=True)
        ckpt_dir = os.path.join(run_dir, "checkpoints")
        has_ckpt = os.path.isdir(ckpt_dir) and any(n.isdigit() for n in os.listdir(ckpt_dir))
        if fresh and not resume and has_ckpt:
            if jax.process_count() > 1:
                raise FileExistsError(
                    f"{ckpt_dir} holds checkpoints: pass resume=True (--resume) or use a new run "
                    "directory (several processes cannot safely clear it)"
                )
            print(
                f"note: starting fresh in {run_dir}; removing its old checkpoints", file=sys.stderr
            )
            shutil.rmtree(ckpt_dir)
        store = CheckpointStore(ckpt_dir, max_to_keep=keep_checkpoints)

    if resume and store is not None and store.latest_step() is not None:
        state = _restore.restore(store, engine, allow_partial=allow_partial)
        fresh = False
    elif state is None:
        state = engine.init()

    counters = jax.device_get(state.counters)
    updates = int(counters.updates)
    if run_dir is not None and writer:
        metrics_path = os.path.join(run_dir, "metrics.jsonl")
        traces_path = os.path.join(run_dir, "traces.jsonl")
        if fresh:
            for p in (metrics_path, traces_path):
                if os.path.exists(p):
                    os.remove(p)
        else:  # continuing: keep exactly the records that precede this state
            truncate_jsonl(metrics_path, "step", updates + 1)
            truncate_jsonl(traces_path, "generation", int(counters.generations))
        metrics_writer = JsonlWriter(metrics_path)
        if rate > 0:
            trace_writer = JsonlWriter(traces_path)
        if tensorboard:
            tb = TensorBoardWriter(os.path.join(run_dir, "tensorboard"))

    bar = ProgressBar(steps, start=updates) if progress and writer else None
    t0 = time.perf_counter()
    groups_at_start = int(counters.groups)
    pending = int(jax.device_get(state.pending.count))
    last: dict[str, float] = {}
    stopped = "completed"
    warned_windows = 0
    votes: dict[str, dict[str, tuple[int, int]]] = {}

    def save(step_state: EngineState, step: int) -> None:
        if store is not None:
            _restore.save(store, step, engine, step_state, config)

    try:
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
                    if tb is not None:
                        tb.write(updates, record)
                    if bar is not None:
                        bar.update(
                            updates,
                            host.get("batch/reward_mean", float("nan")),
                            host.get("batch/admission_rate", float("nan")),
                            int(c.groups) - groups_at_start,
                        )
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
            save(state, updates)
    finally:
        if store is not None:
            store.close()
        for w in (metrics_writer, trace_writer, tb):
            if w is not None:
                w.close()
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
    if run_dir is not None and writer:
        with open(os.path.join(run_dir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2, sort_keys=True, default=float)
    return RunResult(state, last, summary, stopped)
