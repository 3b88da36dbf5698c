"""Metric sinks: TensorBoard and Weights & Biases get exactly what metrics.jsonl gets.

Each test needs its optional extra (``curriculax[tensorboard]``, ``curriculax[wandb]``; both
are in ``dev``) and is skipped without it.
"""

import functools
import json
import shutil
import struct
import types

import numpy as np
import pytest

from curriculax.engine import Engine, EngineConfig, Env, WandbSink, run
from curriculax.engine.synthetic import synthetic_solver, synthetic_tasks
from experiments import _cli, quickstart


def _jsonl(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def _tensorboard_scalars(logdir) -> dict[str, dict[int, float]]:
    """``{tag: {step: value}}`` read back with TensorBoard's own reader; a step seen twice
    under one tag fails the test."""
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    acc = accumulator.EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    out = {}
    for tag in acc.Tags()["scalars"]:
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        assert len(steps) == len(set(steps)), (tag, steps)
        out[tag] = {e.step: e.value for e in events}
    return out


@functools.cache
def _engine():
    """One engine for every test here: its compiled steps are reused."""
    return Engine(
        synthetic_solver(),
        [Env("a", synthetic_tasks(64), group_size=4)],
        EngineConfig(batch_groups=8, groups_per_generation=8),
    )


def test_tensorboard_logs_every_metric_once_across_a_resume(tmp_path):
    pytest.importorskip("tensorboardX")
    engine, run_dir = _engine(), tmp_path / "t"
    common = {"run_dir": run_dir, "progress": False, "tensorboard": True}
    run(engine, steps=6, checkpoint_every=3, **common)
    # A kill after update 6's metrics but before its checkpoint: the resume replays 4..6.
    shutil.rmtree(run_dir / "checkpoints" / "6")
    run(engine, steps=9, resume=True, **common)

    lines = _jsonl(run_dir / "metrics.jsonl")
    assert [x["step"] for x in lines] == list(range(1, 10))
    scalars = _tensorboard_scalars(run_dir / "tensorboard")
    for name in ("curriculum/a/admission_rate", "curriculum/a/sampler/epoch"):
        assert name in scalars, sorted(scalars)[:20]
    for name, by_step in scalars.items():
        assert sorted(by_step) == list(range(1, 10)), name
        want = [x[name] for x in lines]
        np.testing.assert_allclose([by_step[s] for s in range(1, 10)], want, rtol=1e-6)
    numeric = {k for k, v in lines[-1].items() if isinstance(v, float | int) and k != "step"}
    assert set(scalars) == numeric


def test_the_cli_flags_reach_run(monkeypatch):
    """``--tensorboard`` and ``--wandb PROJECT`` (the experiment CLI) become run's arguments."""
    pytest.importorskip("wandb")
    import curriculax.engine

    seen = {}
    finished = types.SimpleNamespace(stopped="completed")
    monkeypatch.setattr(curriculax.engine, "run", lambda engine, **kw: seen.update(kw) or finished)
    parser = _cli.base_parser("x", steps=1, run_dir="r")
    config = quickstart.QuickstartConfig()
    _cli.run_experiment(None, parser.parse_args(["--tensorboard", "--wandb", "proj"]), config)
    assert seen["tensorboard"] is True
    (sink,) = seen["sinks"]
    assert isinstance(sink, WandbSink) and sink.project == "proj"
    _cli.run_experiment(None, parser.parse_args([]), config)
    assert seen["tensorboard"] is False and seen["sinks"] == []


def _wandb_history(run_dir) -> list[dict]:
    """The history rows of the offline W&B run in ``run_dir``, read from its transaction log
    (a LevelDB-style log of ``wandb_internal_pb2.Record`` messages)."""
    pb = pytest.importorskip("wandb.proto.wandb_internal_pb2")
    (path,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    block, pos, pending, rows = 32768, 7, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        length, kind = struct.unpack("<HB", data[pos + 4 : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind in (1, 4):  # FULL, or LAST of a split record
            record = pb.Record()
            record.ParseFromString(pending + chunk)
            pending = b""
            if record.WhichOneof("record_type") == "history":
                rows.append(
                    {
                        (i.key or "/".join(i.nested_key)): json.loads(i.value_json)
                        for i in record.history.item
                    }
                )
        elif kind in (2, 3):  # FIRST, MIDDLE
            pending += chunk
        else:
            break
    return rows


def test_wandb_sink_offline_logs_every_update(tmp_path):
    wandb = pytest.importorskip("wandb")
    engine = _engine()
    run_dir = tmp_path / "w"
    sink = WandbSink("cx-test", mode="offline")
    result = run(engine, steps=4, run_dir=run_dir, sinks=[sink], progress=False)
    assert sink.run is None  # finished
    wandb.teardown()  # the W&B service writes the offline log out at teardown (or exit)
    lines = _jsonl(run_dir / "metrics.jsonl")
    history = _wandb_history(run_dir)
    assert [h["_step"] for h in history] == [1, 2, 3, 4]
    for line, row in zip(lines, history):
        for name, value in line.items():
            if name in ("step",) or not isinstance(value, int | float):
                continue
            assert row[name] == pytest.approx(value, rel=1e-6), name
    assert "curriculum/a/admission_rate" in history[-1]
    run_id = (run_dir / "wandb_run_id").read_text()
    assert run_id in next(run_dir.glob("wandb/offline-run-*")).name
    assert result.summary["steps"] == 4


def test_bad_sinks_are_refused():
    pytest.importorskip("wandb")
    with pytest.raises(ValueError, match="mode must be"):
        WandbSink("p", mode="sometimes")
    with pytest.raises(ValueError, match="sets 'dir' itself"):
        WandbSink("p", dir="/tmp")
    with pytest.raises(TypeError, match="sinks must have open"):
        run(_engine(), steps=1, run_dir=None, sinks=[object()], progress=False)
