"""``--resume`` on a finished run says the run is complete and changes nothing, but what does
not match its last checkpoint (a stale summary, log lines past it); a run stopped by ``until``
trains on when resumed without one; the quick start's printout shows whatever bands the
curriculum is configured with."""

import json
import re

import pytest
from reliability_helpers import read_jsonl, snapshot

from curriculax.engine import run
from experiments import quickstart


def test_resuming_a_finished_run_changes_nothing(engine, tmp_path):
    run(engine, steps=3, run_dir=tmp_path, progress=False)
    before = snapshot(tmp_path)
    for steps in (3, 2):  # at or past the requested number of updates
        again = run(engine, steps=steps, run_dir=tmp_path, resume=True, progress=False)
        assert again.stopped == "already_complete"
        assert again.metrics == read_jsonl(tmp_path / "metrics.jsonl")[-1]
        assert again.summary["steps"] == 3 and again.summary["final_metrics"]["step"] == 3
        assert snapshot(tmp_path) == before


def test_the_cli_says_the_run_is_complete(tmp_path, capsys):
    args = ["--run-dir", str(tmp_path), "--steps", "4", "--no-progress"]
    quickstart.main(args)
    capsys.readouterr()
    before = snapshot(tmp_path)
    quickstart.main([*args, "--resume"])
    out = capsys.readouterr().out
    assert out.strip() == (
        f"{tmp_path}: the run is already complete (update 4, --steps 4); nothing was changed. "
        "To train further, resume with a larger --steps, or start over with --overwrite."
    )
    assert snapshot(tmp_path) == before


def test_the_quickstart_printout_shows_the_configured_bands(tmp_path, capsys):
    config = tmp_path / "bands.toml"
    config.write_text(
        "[curriculum.sampler]\n"
        'type = "difficulty_pools"\n'
        "[curriculum.sampler.bands]\n"
        "low = {max_reward = 0.3, weight = 1.0}\n"
        "high = {max_reward = 1.0, weight = 1.0}\n"
    )
    quickstart.main(
        [
            "--run-dir",
            str(tmp_path / "run"),
            "--steps",
            "2",
            "--no-progress",
            "--config",
            str(config),
        ]
    )
    out = capsys.readouterr().out
    assert re.search(r"pools: tasks per band +high \d+, low \d+, unscored \d+, unseen \d+", out)
    assert "nan" not in out


def test_a_stale_summary_is_rewritten_for_the_checkpoint_resumed(engine, tmp_path):
    """Killed after a longer resume's last checkpoint, before its summary: the summary on disk
    is the earlier run's (4 updates) and must not be handed back for the 8 trained."""
    run(engine, steps=4, run_dir=tmp_path, progress=False)
    earlier = (tmp_path / "summary.json").read_text()
    run(engine, steps=8, run_dir=tmp_path, resume=True, checkpoint_every=2, progress=False)
    whole = json.loads((tmp_path / "summary.json").read_text())
    (tmp_path / "summary.json").write_text(earlier)
    again = run(engine, steps=8, run_dir=tmp_path, resume=True, progress=False)
    assert again.stopped == "already_complete"
    assert again.summary["steps"] == 8 and again.summary["final_metrics"]["step"] == 8
    written = json.loads((tmp_path / "summary.json").read_text())
    assert {k: written[k] for k in ("steps", "generations", "rollouts", "final_metrics")} == {
        k: whole[k] for k in ("steps", "generations", "rollouts", "final_metrics")
    }


def test_a_crashed_run_resumed_with_fewer_steps_keeps_no_line_past_its_checkpoint(engine, tmp_path):
    def crash(state, record):
        if record["step"] == 5:
            raise KeyboardInterrupt("a crash after update 5")

    with pytest.raises(KeyboardInterrupt):
        run(
            engine,
            steps=8,
            run_dir=tmp_path,
            checkpoint_every=3,
            on_update=crash,
            progress=False,
            handle_signals=False,
        )
    assert [r["step"] for r in read_jsonl(tmp_path / "metrics.jsonl")][-1] >= 4
    again = run(engine, steps=3, run_dir=tmp_path, resume=True, progress=False)
    assert again.stopped == "already_complete" and again.summary["steps"] == 3
    assert [r["step"] for r in read_jsonl(tmp_path / "metrics.jsonl")] == [1, 2, 3]
    traces = read_jsonl(tmp_path / "traces.jsonl")
    assert max(t["generation"] for t in traces) < again.summary["generations"]


def test_a_run_until_stopped_trains_on_when_resumed_without_a_condition(engine, tmp_path):
    """The CLI's advice for a run that stopped at its target: resume with a larger --steps and
    no stop condition. With the same condition the resume finds the run complete (a summary
    rebuilt after a kill still says why it stopped); with a further one it trains to that."""
    at_2 = lambda record: record["step"] == 2  # noqa: E731
    first = run(engine, steps=5, run_dir=tmp_path, until=at_2, progress=False)
    assert first.stopped == "until" and first.summary["steps"] == 2
    (tmp_path / "summary.json").unlink()  # killed between its last checkpoint and the summary
    same = run(engine, steps=5, run_dir=tmp_path, resume=True, until=at_2, progress=False)
    assert same.stopped == "already_complete" and same.summary["stopped"] == "until"
    at_3 = lambda record: record["step"] == 3  # noqa: E731 (a further target)
    on = run(engine, steps=5, run_dir=tmp_path, resume=True, until=at_3, progress=False)
    assert on.stopped == "until" and on.summary["steps"] == 3
    on = run(engine, steps=4, run_dir=tmp_path, resume=True, progress=False)
    assert on.stopped == "completed" and on.summary["steps"] == 4
    assert [r["step"] for r in read_jsonl(tmp_path / "metrics.jsonl")] == [1, 2, 3, 4]
