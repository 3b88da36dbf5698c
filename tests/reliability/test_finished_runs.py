"""``--resume`` on a finished run says the run is complete and changes nothing; the quick
start's printout shows whatever bands the curriculum is configured with."""

import re

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
        "To train further, resume with a larger --steps (and no stop condition), or start over "
        "with --overwrite."
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
