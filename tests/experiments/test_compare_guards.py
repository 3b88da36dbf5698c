"""What a study refuses rather than silently ignore or lose: flags ``--report`` and
``--diversity`` do not use, a target with no held-out task, arms measured on other tasks or
from another start, main-job settings, and a subset run (``--arms``) that would drop arms from
the study's tables. ``run_arm`` is replaced by a stand-in (``fake_runs``), so nothing trains."""

import json
import os

import numpy as np
import pytest

from experiments import _cli, compare
from tests.experiments.test_compare import STUDY, _fake_run_arm

BASE, ORACLE = "sequential, unshuffled", "oracle"


@pytest.fixture
def fake_runs(monkeypatch):
    from experiments.compare import cli

    calls = []
    monkeypatch.setattr(cli, "run_arm", _fake_run_arm(calls))
    return calls


def _study(tmp_path, text=STUDY, run_dir="out"):
    config = tmp_path / "study.toml"
    config.write_text(text.replace("pass_rate_samples = 2\n", ""))
    return ["--config", str(config), "--run-dir", str(tmp_path / run_dir)]


def _arms(path):
    return json.loads(path.read_text())["arms"]


def test_report_refuses_every_flag_it_does_not_use(tmp_path, fake_runs):
    """``--report X --set experiment.target=0.9`` once rewrote the tables at the stored target,
    and dropped --arms, --seed, --config (even one not there) and --devices without a word."""
    compare.main(_study(tmp_path))
    path = tmp_path / "out" / "compare.json"
    before = path.read_text()
    for flags in (
        ["--set", "experiment.target=0.9"],
        ["--arms", BASE],
        ["--seed", "7"],
        ["--config", str(tmp_path / "nonexistent.toml")],
        ["--devices", "4"],
        ["--run-dir", str(tmp_path / "elsewhere")],
        ["--diversity", ORACLE],
        ["--seed-index", "1"],
    ):
        with pytest.raises(SystemExit, match=rf"error: {flags[0]} not used by this script"):
            compare.main(["--report", str(path), *flags])
    assert path.read_text() == before
    compare.main(["--report", str(path), "--no-progress", "--debug"])  # what it takes


def test_seed_index_needs_diversity_and_diversity_writes_nothing(tmp_path, fake_runs):
    with pytest.raises(SystemExit, match=r"--seed-index not used by this script: .*--diversity"):
        compare.main([*_study(tmp_path), "--seed-index", "5"])
    for flags in (["--arms", BASE], ["--devices", "2"]):
        with pytest.raises(SystemExit, match=rf"{flags[0]} not used by this script"):
            compare.main([*_study(tmp_path)[:2], "--diversity", ORACLE, *flags])
    with pytest.raises(SystemExit, match=r"--run-dir not used by this script"):
        compare.main([*_study(tmp_path), "--diversity", ORACLE])
    assert fake_runs == [] and not (tmp_path / "out").exists()


def test_a_target_with_no_held_out_task_is_refused_before_any_arm_runs(tmp_path, fake_runs):
    """Level 0 (reversals of length 1: 4 tasks) holds none out: the held-out score was 0/0,
    every seed a miss and NaN in compare.json."""
    text = STUDY.replace("eval_levels = [2]", "eval_levels = [0]")
    with pytest.raises(
        ValueError,
        match=rf"arm '{BASE}': the target levels \[0\] .* hold no held-out task.* "
        r"levels with held-out tasks: \[2\]",
    ):
        compare.main(_study(tmp_path, text))
    assert fake_runs == [] and not (tmp_path / "out" / "arms").exists()


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ({"task": {"eval_levels": [0]}}, "task.eval_levels"),
        ({"task": {"pool_size": 40}}, "task.pool_size"),
        ({"task": {"distractors": 0.5}}, "task.distractors"),
        ({"task": {"family": "copy"}}, "task.family"),
        ({"init": {"base": "short-lengths"}}, "init"),
        ({"model": {"width": 128}}, "model"),
    ],
)
def test_an_arm_may_not_change_its_pool_target_or_start(override, key):
    """Its rollouts to target would count other held-out tasks, or start from another policy,
    than the baseline's it is divided by."""
    arms = (
        {"name": "u", "curriculum": {}},
        {"name": "v", "curriculum": {}, "experiment": override},
    )
    with pytest.raises(ValueError, match=rf"arms\[1\] \('v'\): experiment.{key} may not differ"):
        compare.CompareConfig(arms=arms, baseline="u")


@pytest.mark.parametrize(
    "override",
    [{"task": {"labels": "none"}}, {"task": {"num_levels": 6}}, {"grpo": {"learning_rate": 0.004}}],
    ids=["labels", "the study's own value", "learning rate"],
)
def test_an_arm_may_change_its_labels_and_optimizer(override):
    arms = (
        {"name": "u", "curriculum": {}},
        {"name": "v", "curriculum": {}, "experiment": override},
    )
    compare.CompareConfig(arms=arms, baseline="u")


def test_a_bad_value_in_an_arms_experiment_names_the_arm():
    """It said "task.labels.noise must be a probability" and named no arm."""
    bad = {"name": "v", "curriculum": {}, "experiment": {"task": {"labels": {"noise": 1.5}}}}
    with pytest.raises(ValueError, match=r"arms\[1\] \('v'\): experiment.task.labels.noise must"):
        compare.CompareConfig(arms=({"name": "u", "curriculum": {}}, bad), baseline="u")


@pytest.mark.parametrize(
    ("setting", "instead"),
    [
        ("steps=3", "generations"),
        ("eval_rollouts=7", "eval_every"),
        ("stop_at_target=false", "generations"),
        ("curriculum.sampler.type=learnability", r"\[\[arms\]\]"),
        ("checkpoint_every=5", "RUN_DIR/arms"),
        ("evidence=x.json", "compare.json"),
    ],
)
def test_main_job_settings_are_refused_naming_the_study_setting(
    tmp_path, fake_runs, setting, instead
):
    """They were accepted and ignored, the arms' cache fingerprints unchanged."""
    key = setting.split("=")[0].split(".")[0]
    with pytest.raises(ValueError, match=rf"experiment.{key} = .* main job's setting.*{instead}"):
        compare.main([*_study(tmp_path), "--set", f"experiment.{setting}"])
    assert fake_runs == []
    args = _cli.base_parser("", steps=0, run_dir="").parse_args(
        [*_study(tmp_path), "--set", f"experiment.{setting}"]
    )
    with pytest.raises(ValueError, match=rf"experiment.{key} = "):
        compare.check_arms(_cli.load_config(compare.CompareConfig, args))
    compare.main([*_study(tmp_path), "--set", "experiment.steps=500"])  # the default: no change
    arm = {"name": "v", "curriculum": {}, "experiment": {key: 1}}
    with pytest.raises(ValueError, match=rf"experiment.{key} is the main job's setting"):
        compare.CompareConfig(arms=({"name": "u", "curriculum": {}}, arm), baseline="u")


def test_a_subset_run_keeps_the_other_arms_in_the_study_tables(tmp_path, fake_runs, capsys):
    """``--arms`` in the study's own directory once wrote the subset's tables over the whole
    study's (docs/noise.md did so on runs/compare/hard-skew)."""
    text = STUDY.replace('best_of = [["sequential, unshuffled"], ["oracle"]]\n', "")
    assert text != STUDY  # no best_of groups: this is not the best_of test below
    study, out = _study(tmp_path, text), tmp_path / "out"
    compare.main(study)
    first = _arms(out / "compare.json")
    assert list(first) == [BASE, ORACLE] and fake_runs == [BASE, ORACLE]
    config = _cli.load_config(
        compare.CompareConfig, _cli.base_parser("", steps=0, run_dir="").parse_args(study)
    )
    os.remove(compare.cache.arm_path(str(out), config, config.arms[0]))  # the baseline reruns
    capsys.readouterr()
    compare.main([*study, "--arms", BASE])
    assert fake_runs == [BASE, ORACLE, BASE]  # only the selected arm ran
    again = _arms(out / "compare.json")
    assert list(again) == [BASE, ORACLE]
    assert "also in the tables, as kept in" in capsys.readouterr().err
    assert again[ORACLE]["rollouts_to_target"] == first[ORACLE]["rollouts_to_target"]
    assert again[BASE]["final_held_out"] != first[BASE]["final_held_out"]  # a new run
    assert f"| {ORACLE} |" in (out / "compare.md").read_text()

    # The table holds numbers RUN_DIR/arms does not (taken from another run, say): refused.
    stored = json.loads((out / "compare.json").read_text())
    stored["arms"][ORACLE]["final_held_out"] = [0.5, 0.5]
    (out / "compare.json").write_text(json.dumps(stored))
    with pytest.raises(SystemExit, match=rf"holds arms \['{ORACLE}'\] that this run would change"):
        compare.main([*study, "--arms", BASE])
    # ... as when the other arm has no result kept for these settings.
    os.remove(compare.cache.arm_path(str(out), config, config.arms[1]))
    with pytest.raises(SystemExit, match=rf"holds arms \['{ORACLE}'\]"):
        compare.main([*study, "--arms", BASE])
    assert json.loads((out / "compare.json").read_text()) == stored
    assert fake_runs == [BASE, ORACLE, BASE]
    # An arm the config no longer has: naming it in --arms cannot help, and the error says so.
    stored["arms"]["gone"] = stored["arms"][ORACLE]
    (out / "compare.json").write_text(json.dumps(stored))
    with pytest.raises(SystemExit, match=r"holds arms \['gone'\] that the study's config no"):
        compare.main([*study, "--arms", BASE])

    # A new directory holds the subset alone, and says which arms it leaves out.
    capsys.readouterr()
    compare.main([*_study(tmp_path, text, run_dir="subset"), "--arms", BASE])
    assert list(_arms(tmp_path / "subset" / "compare.json")) == [BASE]
    assert f"arms ['{ORACLE}'] of the study have no result kept" in capsys.readouterr().err


def test_a_whole_study_run_refuses_to_drop_arms_its_config_does_not_have(tmp_path, fake_runs):
    """A study edited to drop or rename an arm, or another study run in the same directory
    (every study defaults to runs/compare), wrote its tables over the old ones without a word,
    against --overwrite's help."""
    study, path = _study(tmp_path), tmp_path / "out" / "compare.json"
    compare.main(study)
    before = path.read_text()
    renamed = _study(tmp_path, STUDY.replace(f'"{ORACLE}"', '"oracle, renamed"'))
    assert "oracle, renamed" in (tmp_path / "study.toml").read_text()
    with pytest.raises(
        SystemExit,
        match=rf"holds arms \['{ORACLE}'\] that the study's config "
        r"does not have .* another study's tables.* --overwrite",
    ):
        compare.main(renamed)
    assert path.read_text() == before and fake_runs == [BASE, ORACLE]  # nothing ran
    compare.main([*renamed, "--overwrite"])
    assert list(_arms(path)) == [BASE, "oracle, renamed"]


def test_an_arm_reused_from_run_dir_arms_may_not_write_over_the_tables_numbers(
    tmp_path, fake_runs, capsys
):
    """An arm taken into the table by ``--report --replace-arms`` was protected from a subset
    run leaving it out, but a run naming it (as the refusal advised) or the whole study reused
    RUN_DIR/arms's older result of it and wrote that over the table's numbers."""
    study, out = _study(tmp_path), tmp_path / "out"
    compare.main(study)
    path = out / "compare.json"
    other = json.loads(path.read_text())  # a rerun of the study whose oracle got other numbers
    kept = other["arms"][ORACLE]["final_held_out"]
    other["arms"][ORACLE]["final_held_out"] = [0.5, 0.5]
    (tmp_path / "other.json").write_text(json.dumps(other))
    compare.main(["--report", str(path), "--replace-arms", str(tmp_path / "other.json")])
    before = path.read_text()
    assert _arms(path)[ORACLE]["final_held_out"] == [0.5, 0.5]
    for argv in ([*study, "--arms", BASE, ORACLE], study, [*study, "--arms", BASE]):
        with pytest.raises(SystemExit) as e:
            compare.main(argv)
        message = str(e.value.code)
        assert f"holds arms ['{ORACLE}'] that this run would change" in message
        assert f"final_held_out [0.5, 0.5] in the table, {kept} kept" in message
        assert "--overwrite" in message and "Name them in --arms" not in message
        assert path.read_text() == before
    assert fake_runs == [BASE, ORACLE]  # refused before any arm ran
    # --overwrite writes the kept result over the table's, and nothing runs.
    compare.main([*study, "--overwrite"])
    assert _arms(path)[ORACLE]["final_held_out"] == kept
    assert fake_runs == [BASE, ORACLE]
    # The target is no part of an arm's key: a run at another one reads the kept curves anew.
    compare.main([*study, "--set", "experiment.target=0.01"])
    assert json.loads(path.read_text())["config"]["experiment"]["target"] == 0.01
    assert fake_runs == [BASE, ORACLE]
    with pytest.raises(SystemExit, match="--overwrite not used by this script"):
        compare.main([*study, "--diversity", ORACLE, "--overwrite"])


def test_a_study_resumed_after_a_crash_under_new_settings_is_not_refused(
    tmp_path, fake_runs, monkeypatch
):
    """The table's rows came from this directory's own earlier run (settings A); a rerun under
    B crashed after its first arm. Resuming B reuses that arm, whose numbers differ from the
    table's A numbers: the finished run would have written over them too, so nothing is lost
    (the check for reused arms once refused it). A table that does not parse is written over by
    a whole-study run, as before."""
    from experiments.compare import cli

    study = _study(tmp_path)
    compare.main(study)
    path = tmp_path / "out" / "compare.json"
    b = [*study, "--set", "experiment.seed=5"]
    fake = cli.run_arm

    def crash_on_second_arm(config, arm, mesh=None, progress=None):
        if arm["name"] == ORACLE:
            raise KeyboardInterrupt
        return fake(config, arm, mesh, progress)

    monkeypatch.setattr(cli, "run_arm", crash_on_second_arm)
    with pytest.raises(KeyboardInterrupt):
        compare.main(b)
    monkeypatch.setattr(cli, "run_arm", fake)
    compare.main(b)  # BASE reused, ORACLE run
    assert fake_runs == [BASE, ORACLE, BASE, ORACLE]
    assert json.loads(path.read_text())["config"]["experiment"]["seed"] == 5
    path.write_text("{")
    compare.main(b)  # every arm reused, the unreadable table written over
    assert fake_runs == [BASE, ORACLE, BASE, ORACLE] and _arms(path).keys() == {BASE, ORACLE}


def test_a_subset_of_a_study_with_best_of_groups_runs(tmp_path, fake_runs):
    """``--arms`` once rebuilt the study with best_of naming the arms left out, and failed."""
    from experiments.compare.config import select_arms

    compare.main([*_study(tmp_path), "--arms", BASE])
    saved = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert saved["config"]["best_of"] == [] and list(saved["arms"]) == [BASE]
    config = compare.CompareConfig(
        arms=tuple({"name": n, "curriculum": {}} for n in "abcd"),
        baseline="a",
        best_of=(("a", "b"), ("c", "d")),
    )
    assert select_arms(config, ["a", "d"]).best_of == (("a",), ("d",))
    assert select_arms(config, ["a", "b", "d"]).best_of == (("a", "b"), ("d",))
    assert select_arms(config, ["a", "b"]).best_of == ()  # one group left: no best against best
    assert [a["name"] for a in select_arms(config, ["d", "a"]).arms] == ["a", "d"]


def test_report_is_refused_while_a_study_runs_in_its_folder(tmp_path, fake_runs):
    """``--report`` took no lock: it rewrote compare.json under a study running there."""
    from curriculax.engine._rundir import RunLock

    compare.main(_study(tmp_path))
    out = tmp_path / "out"
    before = {name: (out / name).read_text() for name in ("compare.json", "compare.md")}
    running = RunLock(str(out))
    running.acquire()
    try:
        with pytest.raises(SystemExit, match="in use by another run"):
            compare.main(["--report", str(out / "compare.json")])
    finally:
        running.release()
    assert {name: (out / name).read_text() for name in before} == before
    compare.main(["--report", str(out / "compare.json")])  # once the study is done
    assert (out / "compare.md").read_text() != before["compare.md"]  # says it was redone


def test_report_on_a_stored_copy_leaves_no_lock_file(tmp_path, fake_runs):
    compare.main(_study(tmp_path))
    stored = tmp_path / "docs"
    stored.mkdir()
    (stored / "study.json").write_text((tmp_path / "out" / "compare.json").read_text())
    compare.main(["--report", str(stored / "study.json")])
    assert sorted(os.listdir(stored)) == ["study.json", "study.md"]


def test_summary_files_are_written_whole_or_not_at_all(tmp_path, fake_runs, monkeypatch):
    """compare.json was written as it was serialized: a failure half-way (here a value JSON
    cannot hold; a full disk alike) left a cut file in place of the study's numbers."""
    from experiments.compare import cli

    compare.main(_study(tmp_path))
    out = tmp_path / "out"
    path = out / "compare.json"
    before = path.read_text()
    study_json = cli.study_json
    monkeypatch.setattr(cli, "study_json", lambda *a: {**study_json(*a), "zz": object()})
    for argv in (_study(tmp_path), ["--report", str(path)]):
        with pytest.raises(TypeError, match="not JSON-able"):
            compare.main(argv)
        assert path.read_text() == before
    assert not [name for name in os.listdir(out) if name.endswith(".tmp")]


def test_a_subset_run_takes_a_nan_in_the_tables_as_the_same_run(tmp_path, monkeypatch):
    """A NaN in an arm's stored per-seed numbers never equalled itself: every subset run was
    refused, though the kept result is the table's."""
    from experiments.compare import cli

    calls = []
    fake = _fake_run_arm(calls)

    def run_arm(config, arm, mesh=None, progress=None):
        curves = fake(config, arm, mesh, progress)
        if arm["name"] == ORACLE:
            curves["held_out"][0, -1] = np.nan
        return curves

    monkeypatch.setattr(cli, "run_arm", run_arm)
    text = STUDY.replace('best_of = [["sequential, unshuffled"], ["oracle"]]\n', "")
    study, out = _study(tmp_path, text), tmp_path / "out"
    compare.main(study)
    assert _arms(out / "compare.json")[ORACLE]["final_held_out"][0] is None  # null, not NaN
    config = _cli.load_config(
        compare.CompareConfig, _cli.base_parser("", steps=0, run_dir="").parse_args(study)
    )
    os.remove(compare.cache.arm_path(str(out), config, config.arms[0]))
    compare.main([*study, "--arms", BASE])
    assert calls == [BASE, ORACLE, BASE]


def _strict_json(text):
    """``json.loads`` that refuses NaN and Infinity (not JSON, RFC 8259)."""

    def refuse(token):
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def test_compare_json_is_json_and_reads_nan_or_null_alike(tmp_path, monkeypatch):
    """``final_levels`` held a bare NaN for a level without a held-out task, which strict JSON
    readers reject (56 stored studies): it is null now, as is a seed with no held-out score,
    and a study stored with NaN there gives the same tables and is rewritten as JSON."""
    from experiments.compare import cli, report

    calls = []
    fake = _fake_run_arm(calls)

    def run_arm(config, arm, mesh=None, progress=None):
        curves = fake(config, arm, mesh, progress)
        curves["levels"][:, :, 0] = np.nan  # level 0: no held-out task
        curves["levels"][1, -1, 2] = np.nan
        if arm["name"] == ORACLE:
            curves["held_out"][0, :] = np.nan
        return curves

    monkeypatch.setattr(cli, "run_arm", run_arm)
    compare.main(_study(tmp_path))
    out = tmp_path / "out"
    path, made = out / "compare.json", (out / "compare.md").read_text()
    stored = _strict_json(path.read_text())
    arms = stored["arms"]
    assert [row[0] for row in arms[BASE]["final_levels"]] == [None, None]
    assert arms[BASE]["final_levels"][1][2] is None and arms[BASE]["final_levels"][0][2] >= 0
    assert arms[ORACLE]["final_held_out"][0] is None
    assert arms[ORACLE]["curve_held_out"][0] == [None, None]
    level_row = next(line for line in made.splitlines() if line.startswith(f"| {BASE} | -"))
    assert level_row.startswith(f"| {BASE} | - | ")  # level 0 shown as '-'
    # A study stored before: NaN where null now is. Same tables, rewritten as JSON.
    older = json.loads(path.read_text())
    for d in older["arms"].values():
        for key in ("final_levels", "final_held_out", "curve_held_out"):
            d[key] = np.asarray(d[key], np.float64).tolist()  # None -> nan
    assert np.isnan(older["arms"][BASE]["final_levels"][0][0])
    path.write_text(json.dumps(older, indent=2))
    config, data, _ = report.load_study(str(path))
    assert report.tables(config, data) == made.split("\n\n", 1)[1]
    compare.main(["--report", str(path)])
    assert (out / "compare.md").read_text().split("\n", 1)[1] == made.split("\n", 1)[1]
    assert _strict_json(path.read_text()) == stored
    # Any other NaN is refused before the file is written, naming where it is.
    arms[BASE]["seconds"] = float("nan")
    with pytest.raises(ValueError, match=r"compare\.json\.arms\.sequential, unshuffled\.seconds"):
        report.study_json(config, arms, "cmd")
    assert calls == [BASE, ORACLE]


def test_a_study_is_refused_across_processes(tmp_path, fake_runs):
    """Each process wrote the study's files, and the seeds' curves were never gathered."""
    flags = ["--devices", "2", "--num-processes", "2", "--coordinator", "localhost:1"]
    with pytest.raises(SystemExit, match=r"runs in one process.*--num-processes"):
        compare.main([*_study(tmp_path), *flags])
    assert fake_runs == [] and not (tmp_path / "out").exists()
