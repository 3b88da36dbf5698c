"""The engine's ``batch/*`` metrics and the counts of :meth:`Engine.generate`: an update that
finalized no group has no admission rate (NaN, ``null`` in the logs), env names cannot take a
metric's name, and groups dropped by a caller that overfills the pending batch are counted."""

import io
import json
import math

import jax
import pytest
from engine_test_helpers import id_pool, id_solver, in_order, read_jsonl, trained

import curriculax as cx
from curriculax.engine import Engine, EngineConfig, Env, run
from curriculax.engine._logging import ProgressBar


def _engine(generation: int, name: str = "a") -> Engine:
    env = Env(name, id_pool(64), cx.curriculum(in_order(64)), group_size=2)
    return Engine(
        id_solver(), [env], EngineConfig(batch_groups=4, groups_per_generation=generation)
    )


def _strict_json(text: str):
    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_an_update_that_finalized_no_group_has_no_admission_rate(tmp_path):
    """G = 2B: every generation batch is followed by two updates; the second finalized
    nothing, so its rate is undefined (not 0: nothing was rejected)."""
    result = run(_engine(8), steps=4, run_dir=tmp_path, progress=False, traces=False)
    records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["batch/finalized_groups"] for r in records] == [8.0, 0.0, 8.0, 0.0]
    assert [r["batch/admission_rate"] for r in records] == [1.0, None, 1.0, None]
    assert math.isnan(result.metrics["batch/admission_rate"])
    summary = _strict_json((tmp_path / "summary.json").read_text())  # no NaN token
    assert summary["final_metrics"]["batch/admission_rate"] is None
    assert result.summary["final_metrics"]["batch/admission_rate"] is None

    # A resume that finds the run complete reads the metrics back from the log: NaN again,
    # not None (the main job formats it as a number).
    again = run(_engine(8), steps=4, run_dir=tmp_path, resume=True, progress=False)
    assert again.stopped == "already_complete"
    assert math.isnan(again.metrics["batch/admission_rate"])


def test_the_progress_bar_shows_the_last_known_admission_rate():
    stream = io.StringIO()
    bar = ProgressBar(3, stream=stream)
    bar.update(1, 0.5, float("nan"), 8)  # none known yet
    bar.update(2, 0.5, 0.75, 8)
    bar._last = 0.0  # past the non-interactive bar's 5 s between lines
    bar.update(3, 0.5, float("nan"), 8)
    lines = stream.getvalue().splitlines()
    assert "admit -- " in lines[0]
    assert "admit 0.75 " in lines[-1] and "nan" not in stream.getvalue()


@pytest.mark.parametrize("name", ["reward_mean", "admission_rate", "finalized_groups"])
def test_env_names_that_are_engine_metric_names_are_refused(name):
    with pytest.raises(ValueError, match=f"env name '{name}' is taken by the engine's metric"):
        _engine(4, name=name)


def test_generate_counts_the_groups_it_drops_when_the_pending_batch_is_full():
    """B = G = 4, capacity 8: a third generate before any train admits 4 groups with no
    room for them."""
    engine = _engine(4)
    state = engine.init()
    dropped = []
    for _ in range(3):
        state, gen = engine.generate(state)
        dropped.append(int(gen.dropped))
    assert dropped == [0, 0, 4]
    assert int(state.pending.count) == 8
    assert int(state.counters.admitted) == 12  # what the gates admitted


def test_step_drops_nothing():
    """``step`` trains whenever a batch is ready, so the pending batch always has room."""
    engine = _engine(3)
    step = jax.jit(engine.step)
    state = engine.init()
    for _ in range(4):
        state, report = step(state)
        assert int(report.generation.dropped) == 0
    assert int(state.counters.updates) == 3


def test_step_after_run_trains_the_waiting_groups_first():
    """G = 3B: ``run(steps=1)`` leaves two full batches waiting (8 of capacity 16). ``step``
    trains them before its generation batch, which then finds room: nothing is dropped and
    every admitted group is trained, in order (none is left pending here)."""
    engine = _engine(12)
    state = run(engine, steps=1, progress=False).state
    assert int(state.pending.count) == 8 and int(state.counters.admitted) == 12
    state, report = jax.jit(engine.step)(state)
    assert int(report.generation.dropped) == 0
    assert int(report.updates) == 5  # two before the generation batch, three after
    assert int(state.counters.updates) == 6 and int(state.counters.admitted) == 24
    assert int(state.pending.count) == 0
    assert trained(state.solver) == [(0, i) for i in range(24)]
    # The metrics are the last update's.
    assert float(report.metrics["solver/reward_sum"]) == float(state.solver.reward_sum)
