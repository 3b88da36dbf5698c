"""How a run that stops early ends: the no-progress guard waits for two generation batches
without an admitted group, and a resumed run that ends in an exception leaves a
``summary.json`` that agrees with its ``metrics.jsonl``."""

import json

import jax.numpy as jnp
import pytest
from engine_test_helpers import call_gate, id_pool, id_solver, in_order, opens_after, read_jsonl

import curriculax as cx
from curriculax.engine import CurriculumStalled, Engine, EngineConfig, Env, run


def _wide(gate) -> Engine:
    """G = 32 >= stall_windows (10) x B (2): one generation batch fills every window."""
    env = Env("a", id_pool(64), cx.curriculum(in_order(64), {"g": gate}), group_size=2)
    return Engine(id_solver(), [env], EngineConfig(batch_groups=2, groups_per_generation=32))


def test_one_batch_without_an_admission_does_not_stop_a_wide_run():
    result = run(_wide(opens_after(1)), steps=4, progress=False, traces=False)
    assert result.stopped == "completed"


def test_a_wide_run_stops_after_two_batches_without_an_admission():
    with pytest.raises(CurriculumStalled, match="'a': 64 groups since the last admission"):
        run(_wide(opens_after(100)), steps=4, progress=False, traces=False)


def test_a_resumed_run_that_fails_rewrites_the_summary(tmp_path):
    """The gate admits 6 generation batches, then nothing: the first run completes 2 updates,
    the resume stalls after update 6."""
    gate = call_gate(lambda ids, calls: jnp.broadcast_to(calls < 6, ids.shape))
    env = Env("a", id_pool(32), cx.curriculum(in_order(32), {"late": gate}), group_size=2)
    engine = Engine(id_solver(), [env], EngineConfig(batch_groups=4, stall_windows=3))
    kwargs = dict(run_dir=tmp_path, progress=False, traces=False, checkpoint_every=1)
    run(engine, steps=2, **kwargs)
    with pytest.raises(CurriculumStalled) as info:
        run(engine, steps=20, resume=True, **kwargs)
    summary = json.loads((tmp_path / "summary.json").read_text())
    last = read_jsonl(tmp_path / "metrics.jsonl")[-1]
    assert summary["stopped"] == "CurriculumStalled"
    assert summary["error"] == str(info.value).splitlines()[0]
    assert summary["steps"] == last["step"] == 6
    assert summary["final_metrics"]["step"] == 6
    assert summary["generations"] > last["generations"] and summary["admitted"] == 24
    # A resume that asks for no more than was saved finds the run complete: the summary of
    # the failure (past the checkpoint) is replaced by the checkpoint's.
    again = run(engine, steps=6, resume=True, **kwargs)
    assert again.stopped == "already_complete"
    assert again.summary["stopped"] == "completed" and "error" not in again.summary
    assert again.summary["generations"] == last["generations"]
