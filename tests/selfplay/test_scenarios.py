"""The self-play study's scenarios (fixed TOMLs) and its four arms."""

import dataclasses
import json
import pathlib
import tomllib

import numpy as np
import pytest

from experiments import _cli
from experiments._base import spec_hash
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


# Review fixes (2026-12): repeated runs, resume across settings, unread experiment keys,
# per-run censoring, earlier outputs, early checks of arms and seeds.

STORED = pathlib.Path(__file__).parents[2] / "docs" / "selfplay"


def _never(*_, **__):
    raise AssertionError("the script started its work despite a bad input")


def _fake_run(config, arm, seed):
    """A record of the fields ``summarize`` reads, in a moment (no training)."""
    per_round = config.steps_per_round * config.experiment.batch_groups
    per_round *= config.experiment.group_size
    rounds = range(1, config.rounds + 1)
    return {
        "arm": arm,
        "seed": seed,
        "final": 0.1 * seed,
        "held_out": [0.1 * seed] * config.rounds,
        "rollouts": [r * per_round for r in rounds],
        "per_level": {"eval/level_3": 0.1 * seed},
        "level": [None] * config.rounds,
        "level_values": None,
        **{k: 0 for k in study.COUNTS},
        "path": "host",
        "seconds": 0.0,
        "challenger_seconds": None,
        "challenger_updates": None,
        "challenger_proposals": None,
    }


def _stored(name):
    data = json.loads((STORED / f"{name}.json").read_text())
    return _cli.from_mapping(study.StudyConfig, data["config"]), data["runs"]


def test_an_arm_named_twice_or_unknown_and_zero_seeds_are_refused_before_any_run(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(study, "run_one", _never)
    monkeypatch.setattr(study, "run_compiled", _never)
    run_dir = ["--run-dir", str(tmp_path / "r")]
    cases = [
        (["--arms", "no challenger", "no challenger"], r"arms: 'no challenger' is named 2 times"),
        (["--set", 'arms=["bandit", "no challenger", "bandit"]'], r"'bandit' is named 2 times"),
        (["--set", 'arms=["no challenger", "bandti"]'], r"unknown arm 'bandti'"),
        (["--set", "arms=[]"], r"arms is empty"),
        (["--seeds", "0"], r"^--seeds must be >= 1, got 0"),
    ]
    for argv, message in cases:
        with pytest.raises(ValueError, match=message):
            study.main([*argv, *run_dir])
    assert not (tmp_path / "r").exists()


def test_study_speed_refuses_zero_seeds_before_it_times_anything(tmp_path, monkeypatch):
    from experiments.selfplay import study_speed

    monkeypatch.setattr(study, "run_one", _never)
    monkeypatch.setattr(study, "run_compiled", _never)
    for flag in ("--seeds", "--host-seeds"):
        with pytest.raises(ValueError, match=rf"^{flag} must be >= 1, got 0"):
            study_speed.main([flag, "0", "--run-dir", str(tmp_path / "ss")])
    with pytest.raises(ValueError, match=r"experiment\.seed = 3 .*--seeds - 1"):
        study_speed.main(["--set", "experiment.seed=3", "--run-dir", str(tmp_path / "ss")])


def _resume_refuses(tmp_path, runs: list[dict], match: str) -> None:
    """``runs`` stored as a bridge-base study's runs.jsonl: ``--resume`` refuses them with a
    ValueError naming the file, then ``match``."""
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))
    argv = ["--config", str(SCENARIOS / "bridge-base.toml"), "--run-dir", str(tmp_path)]
    with pytest.raises(ValueError, match=rf"^{path}: {match}"):
        study.main([*argv, "--resume"])


def test_two_records_of_one_arm_and_seed_are_refused_by_summarize_and_resume(tmp_path):
    config, runs = _stored("bridge-base-study")
    twice = [*runs, next(r for r in runs if r["arm"] == "random generator" and r["seed"] == 4)]
    with pytest.raises(ValueError, match=r"^runs: arm 'random generator' seed 4 has 2 records"):
        study.summarize(config, twice)
    _resume_refuses(tmp_path, twice, "arm 'random generator' seed 4 has 2")


def test_records_of_an_unknown_arm_are_refused_by_summarize_and_resume(tmp_path, monkeypatch):
    # a renamed arm's records would be left out of the table without a word
    monkeypatch.setattr(study, "run_one", _never)
    config, runs = _stored("bridge-base-study")
    renamed = [{**r, "arm": "selfplay"} if r["arm"] == "self-play" else r for r in runs]
    n = sum(r["arm"] == "selfplay" for r in renamed)
    with pytest.raises(
        ValueError, match=rf"^runs: {n} record\(s\) of unknown arm\(s\) \['selfplay'\]"
    ):
        study.summarize(config, renamed)
    _resume_refuses(tmp_path, renamed, rf"{n} record\(s\) of unknown arm")


def test_a_learned_table_of_its_defaults_is_the_same_settings_as_an_empty_one(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(study, "run_one", _fake_run)
    argv = ["--run-dir", str(tmp_path), "--arms", "no challenger", "--seeds", "1"]
    defaults = ["learned.width=32", "learned.learning_rate=0.1", "learned.num_symbols=4"]
    study.main(argv)
    study.main([*argv[:-1], "2", "--resume", *(x for d in defaults for x in ("--set", d))])
    lines = (tmp_path / "runs.jsonl").read_text().splitlines()
    assert len({json.loads(x)["settings_digest"] for x in lines}) == 1 and len(lines) == 2
    # an empty table digests as before: {} in the settings
    assert json.loads((tmp_path / "settings.json").read_text())["settings"]["learned"] == {}
    with pytest.raises(SystemExit, match=r"\(learned\.width differ from "):
        study.main([*argv, "--resume", "--set", "learned.width=16"])
    # records made before the defaults were dropped (digested as written) resume as before
    config = study.StudyConfig(learned={"width": 32})
    written = spec_hash(study.run_settings(config, as_written=True))
    record = {**_fake_run(config, "no challenger", 0), "settings_digest": written}
    (tmp_path / "runs.jsonl").write_text(json.dumps(record) + "\n")
    study.main([*argv, "--resume", "--set", "learned.width=32"])
    # ... and without the table, where their settings.json spells the default out
    settings = study.run_settings(config, as_written=True)
    (tmp_path / "settings.json").write_text(
        json.dumps({"settings_digest": written, "settings": settings})
    )
    (tmp_path / "runs.jsonl").write_text(json.dumps(record) + "\n")
    study.main([*argv, "--resume"])
    study.main([*argv[:-1], "2", "--resume"])  # again: their settings.json is kept
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == 2
    with pytest.raises(SystemExit, match=r"\(learned\.width differ from "):
        study.main([*argv, "--resume", "--set", "learned.width=16"])


def test_a_resume_refuses_records_made_with_other_settings(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(study, "run_one", _fake_run)
    argv = ["--run-dir", str(tmp_path), "--arms", "no challenger", "--seeds", "1"]
    study.main(argv)
    runs = (tmp_path / "runs.jsonl").read_text()
    for changed in ("rounds=3", "experiment.model.width=16", "held_out_levels=[3]"):
        with pytest.raises(SystemExit, match=r"made with other settings") as e:
            study.main([*argv, "--resume", "--set", changed])
        assert changed.split("=")[0] in str(e.value) and "settings.json" in str(e.value)
    assert (tmp_path / "runs.jsonl").read_text() == runs
    assert (
        json.loads(runs)["settings_digest"]
        == json.loads((tmp_path / "settings.json").read_text())["settings_digest"]
    )
    # More seeds, other arms, the compiled path, another target: the same settings of a run.
    compiled = []
    monkeypatch.setattr(
        study,
        "run_compiled",
        lambda config, arm, seeds, bar=None: (
            compiled.append(seeds) or [_fake_run(config, arm, s) for s in seeds]
        ),
    )
    study.main([*argv[:-1], "2", "--resume", "--compiled", "--no-progress", "--set", "target=0.3"])
    assert compiled == [[1]]  # seed 0 was done: never run again
    # Records of an older study carry no digest: resumed, with a warning.
    lines = (tmp_path / "runs.jsonl").read_text().splitlines()
    old = [{k: v for k, v in json.loads(x).items() if k != "settings_digest"} for x in lines]
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    capsys.readouterr()
    study.main([*argv, "--resume", "--set", "rounds=3"])
    err = capsys.readouterr().err
    assert "warning: 2 record(s)" in err and "carry no settings digest" in err


def test_an_earlier_summary_or_table_in_the_run_dir_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(study, "run_one", _never)
    argv = ["--run-dir", str(tmp_path), "--arms", "no challenger", "--seeds", "1"]
    for name in ("summary.json", "study.md"):
        (tmp_path / name).write_text("earlier")
        with pytest.raises(SystemExit, match=rf"{name} holds an earlier run's results"):
            study.main(argv)
        assert (tmp_path / name).read_text() == "earlier"
        (tmp_path / name).unlink()
    (tmp_path / "summary.json").write_text("earlier")
    monkeypatch.setattr(study, "run_one", _fake_run)
    study.main([*argv, "--overwrite"])
    assert json.loads((tmp_path / "summary.json").read_text())["runs"]


def _refused(main, cases, run_dir):
    """Each ``(setting, message)`` given with ``--set`` is refused with ``message`` before
    ``run_dir`` is made."""
    for setting, message in cases:
        with pytest.raises(ValueError, match=message):
            main(["--set", setting, "--run-dir", str(run_dir)])
    assert not run_dir.exists()


def test_the_self_play_scripts_refuse_every_main_job_setting_the_studies_refuse():
    # two lists of the main job's settings: one the study runner refuses, one the self-play
    # scripts do (each with its own reason); a key added to the first must reach the second
    from experiments.compare.config import MAIN_JOB_ONLY
    from experiments.selfplay import _challengers

    assert set(MAIN_JOB_ONLY) <= set(_challengers.MAIN_JOB_ONLY)


def test_the_study_refuses_experiment_keys_it_never_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(study, "run_one", _never)
    cases = [
        ("experiment.curriculum.sampler.type=uniform", r"experiment\.curriculum = .*`sampler`"),
        ("experiment.target=0.9", r"experiment\.target = 0\.9 .*top-level `target`"),
        ("experiment.stall_windows=5", r"experiment\.stall_windows = 5"),
        ("experiment.task.eval_levels=[3]", r"experiment\.task\.eval_levels .*held_out_levels"),
    ]
    _refused(study.main, cases, tmp_path / "r")
    # The keys it reads, the scenarios' included, pass.
    monkeypatch.setattr(study, "run_one", _fake_run)
    for name in ("today.toml", "bridge.toml", "bridge-base.toml"):
        out = ["--run-dir", str(tmp_path / name), "--set", "experiment.seed=3", "--seeds", "1"]
        study.main(["--config", str(SCENARIOS / name), *out])
        seeds = {
            r["seed"] for r in json.loads((tmp_path / name / "summary.json").read_text())["runs"]
        }
        assert seeds == {3}


def test_the_grpo_self_play_script_refuses_experiment_keys_it_never_reads(tmp_path, monkeypatch):
    from experiments.selfplay import grpo_selfplay

    monkeypatch.setattr(grpo_selfplay, "evolve_arm", _never)
    cases = [
        ("experiment.task.held_out_frac=0.5", r"experiment\.task\.held_out_frac = 0\.5 .*top"),
        ("experiment.task.level_mass=[1,1,0,0,0,0]", r"experiment\.task\.level_mass = "),
        ("experiment.seed=7", r"experiment\.seed = 7 \(the run's seed is --seed\)"),
        ("experiment.curriculum.sampler.type=uniform", r"experiment\.curriculum = "),
    ]
    _refused(grpo_selfplay.main, cases, tmp_path / "r")
    # a warm-started base is built from the pool's held-out split: there those keys are read
    exp = grpo_selfplay.SelfPlayConfig().experiment
    based = dataclasses.replace(exp, init={"base": "short-lengths"})
    assert "task.held_out_frac" in grpo_selfplay.unread_keys(exp)
    for key in grpo_selfplay.READ_BY_A_BASE:
        assert key not in grpo_selfplay.unread_keys(based)
    assert "task.level_mass" in grpo_selfplay.unread_keys(based)


def test_the_grpo_self_play_script_refuses_held_out_tasks_its_base_trained_on(
    tmp_path, monkeypatch
):
    """A top-level held_out_frac above the base's split held out tasks the base had trained
    on (0.5 over the base's 0.2: 12 of 140 held-out tasks), measured as unseen."""
    from experiments.selfplay import grpo_selfplay

    monkeypatch.setattr(grpo_selfplay, "evolve_arm", _never)
    base = "experiment.init={base='short-lengths'}"
    cases = [
        (f"held_out_frac={f}", r"holds out more than the warm-started base's split")
        for f in (0.3, 0.5)
    ]
    for setting, message in cases:
        with pytest.raises(ValueError, match=message):
            grpo_selfplay.main(["--set", base, "--set", setting, "--run-dir", str(tmp_path / "r")])
    assert not (tmp_path / "r").exists()
    with pytest.raises(AssertionError, match="started its work"):  # an equal share runs
        grpo_selfplay.main(["--set", base, "--run-dir", str(tmp_path / "r")])


def test_a_miss_is_censored_at_its_own_runs_budget():
    config, _ = _stored("bridge-study")
    budgets = [19_200 * (i + 1) for i in range(10)]

    def run(seed, held, rollouts):
        return {**_fake_run(config, "no challenger", seed), "held_out": held, "rollouts": rollouts}

    runs = [
        run(0, [0.0] * 3 + [0.6] * 7, budgets),  # reaches 0.5 at 76,800
        run(1, [0.0] * 10, budgets),  # a miss after 192,000
        run(2, [0.0] * 10, [b // 4 for b in budgets]),  # a miss after only 48,000
    ]
    table, _ = study.summarize(config, runs)
    row = next(line for line in table.splitlines() if line.startswith("| no challenger"))
    # the median is above 76,800 (not 192,000: the short run might have hit just past 48,000)
    assert row.endswith("| > 76,800 [48,000, > 192,000] | 1/3 |"), row


def test_the_random_generator_has_no_final_level_to_report():
    config, runs = _stored("bridge-base-study")
    table, _ = study.summarize(config, runs)
    assert "Challenger (random generator): levels uniform (no bandit); over all" in table
    assert "Challenger (bandit): final level (length - 1; a bandit's most likely) per seed" in table
    # Every stored table regenerates from its stored records byte for byte.
    for name in ("bridge-study", "bridge-base-study"):
        config, runs = _stored(name)
        assert study.summarize(config, runs)[0] == (STORED / f"{name}.md").read_text()
