"""A script that writes one results file refuses to replace an earlier run's before it starts
its work, unless ``--overwrite``."""

import pytest

from experiments.selfplay import grpo_selfplay, selfplay_demo, study_speed


def _never(*_, **__):
    raise AssertionError("the script started its work over an earlier run's results")


CASES = [
    (selfplay_demo, ["--dry-run"], "summary.json", (selfplay_demo, "dry_run")),
    (grpo_selfplay, [], "summary.json", (grpo_selfplay, "evolve_arm")),
    (study_speed, [], "records.json", (study_speed.study, "run_one")),
]


@pytest.mark.parametrize(
    ("script", "argv", "name", "work"), CASES, ids=[c[0].__name__.split(".")[-1] for c in CASES]
)
def test_an_earlier_runs_results_are_refused_before_the_work_starts(
    tmp_path, monkeypatch, script, argv, name, work
):
    monkeypatch.setattr(*work, _never)
    (tmp_path / name).write_text("earlier")
    with pytest.raises(SystemExit, match=f"{name} holds an earlier .*--overwrite"):
        script.main([*argv, "--run-dir", str(tmp_path)])
    assert (tmp_path / name).read_text() == "earlier"


def test_overwrite_lets_the_dry_run_replace_its_summary(tmp_path):
    (tmp_path / "summary.json").write_text("earlier")
    argv = ["--dry-run", "--run-dir", str(tmp_path), "--rounds", "1", "--steps", "2"]
    selfplay_demo.main([*argv, "--overwrite"])
    assert (tmp_path / "summary.json").read_text() != "earlier"


def test_the_grpo_self_play_script_has_no_dry_run_flag_to_ignore(tmp_path, monkeypatch, capsys):
    # It used to accept --dry-run and then train both arms anyway.
    monkeypatch.setattr(grpo_selfplay, "evolve_arm", _never)
    with pytest.raises(SystemExit):
        grpo_selfplay.main(["--dry-run", "--run-dir", str(tmp_path)])
    assert "unrecognized arguments: --dry-run" in capsys.readouterr().err
