"""The self-play study's scenarios (fixed TOMLs) and its four arms."""

import json
import pathlib
import tomllib

import numpy as np

from experiments import _cli
from experiments._builders import make_study_pool
from experiments.selfplay import study

SCENARIOS = pathlib.Path(__file__).parents[2] / "experiments" / "configs" / "selfplay"
ALL_ARMS = ("no challenger", "random generator", "self-play", "bandit")


def _load(name):
    parser = _cli.base_parser("t", steps=0, run_dir="runs/x")
    return _cli.load_config(
        study.StudyConfig, parser.parse_args(["--config", str(SCENARIOS / name)])
    )


def test_the_scenarios_are_dated_and_run_every_arm_on_20_seeds():
    for name in ("today.toml", "bridge.toml"):
        config = _load(name)
        assert config.date == "2026-12-01" and config.seeds == 20
        assert sorted(config.arms) == sorted(ALL_ARMS)
        assert (config.rounds, config.steps_per_round) == (10, 150)  # 192,000 rollouts a run
    assert _load("today.toml").held_out_levels == ()


def test_the_bridge_pool_lacks_the_held_out_lengths():
    config = _load("bridge.toml")
    pool = make_study_pool(config.experiment)
    assert sorted(set(np.asarray(pool.train.level).tolist())) == [0, 1]  # lengths 1-2 only
    held = study.scenario_held_out(config.experiment, config.held_out_levels)
    assert sorted(set(np.asarray(held.level).tolist())) == [3, 4]  # lengths 4-5
    assert not np.intersect1d(np.asarray(held.key), np.asarray(pool.train.key)).size


def test_the_base_scenario_is_the_bridge_from_the_warm_started_base():
    with open(SCENARIOS / "bridge.toml", "rb") as f:
        bridge = tomllib.load(f)
    with open(SCENARIOS / "bridge-base.toml", "rb") as f:
        base = tomllib.load(f)
    assert base["experiment"].pop("init") == {"base": "short-lengths"}
    assert base.pop("scenario") == "bridge-base" and bridge.pop("scenario") == "bridge"
    assert base == bridge


def test_the_study_runs_four_arms_of_a_scenario_on_equal_budgets(tmp_path, capsys):
    tiny = [
        "experiment.task.held_out_per_level=4",
        "experiment.model.width=16",
        "experiment.model.depth=1",
        "experiment.model.heads=2",
        "experiment.batch_groups=4",
        "experiment.groups_per_generation=4",
        "rounds=2",
        "steps_per_round=2",
        "generated_per_round=4",
    ]
    args = ["--config", str(SCENARIOS / "bridge.toml"), "--run-dir", str(tmp_path), "--seeds", "1"]
    study.main(args + [x for t in tiny for x in ("--set", t)])
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "summary.json").read_text())
    runs = summary["runs"]
    assert sorted(r["arm"] for r in runs) == sorted(ALL_ARMS)
    assert {r["rollouts"][-1] for r in runs} == {2 * 2 * 4 * 8}  # every arm, the same budget
    for r in runs:
        assert sorted(r["per_level"]) == ["eval/level_3", "eval/level_4"]  # held out: 4-5
        assert (r["generated"] > 0) == (r["arm"] != "no challenger")
    differences = summary["stats"]["differences"]
    assert {"bandit - no challenger", "bandit - random generator"} <= set(differences)
    assert "Scenario 'bridge' (fixed 2026-12-01)" in out
    assert "Bandit minus random generator" in out and "its own cost: 0 rollouts" in out
