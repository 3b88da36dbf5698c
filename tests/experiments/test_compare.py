"""A study runs end to end from a TOML: a new arm (an import-path sampler) and a new level mix
need no code change; every arm spends the same budget; per-seed numbers are kept."""

import contextlib
import dataclasses
import inspect
import io
import json
import os
import platform
import tomllib

import jax
import numpy as np
import pytest

import curriculax as cx
from experiments import _cli, _markdown, compare

STUDY = """
title = "tiny"
seeds = 2
generations = 4
eval_every = 2
baseline = "sequential, unshuffled"
pass_rate_samples = 2
best_of = [["sequential, unshuffled"], ["oracle"]]

[experiment]
batch_groups = 2
groups_per_generation = 2
group_size = 4

[experiment.task]
num_levels = 3
level_mass = [1, 0, 3]
pool_size = 12
held_out_per_level = 2
distractors = 0.25
eval_levels = [2]

[[arms]]
name = "sequential, unshuffled"
curriculum = { sampler = { type = "curriculax.samplers:sequential", shuffle = false } }

[[arms]]
name = "oracle"
oracle = { every = 1, per_category = 2, samples = 2, mode = "frontier" }
"""


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """The tiny study, run once with ``--no-progress`` for the tests of this file that read it:
    its run directory, what it printed on stdout and on stderr."""
    root = tmp_path_factory.mktemp("tiny")
    config = root / "tiny.toml"
    config.write_text(STUDY)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        compare.main(["--config", str(config), "--run-dir", str(root / "out"), "--no-progress"])
    return root / "out", out.getvalue(), err.getvalue()


def test_a_study_runs_from_a_toml_with_a_new_arm_and_a_new_level_mix(tiny_run):
    out, printed, _ = tiny_run
    table = (out / "compare.md").read_text()
    assert table.startswith("Made by `python -m experiments.compare --config ")
    assert "| sequential, unshuffled | " in table and "| oracle | " in table
    assert "levels [0, 2] with pool shares [0.25, 0.75]" in table
    assert "| coin flip |" in table  # where each arm's draws went
    data = json.loads((out / "compare.json").read_text())
    assert data["command"].startswith("python -m experiments.compare --config")
    budget = 4 * 2 * 4  # generations x groups x rollouts, the same for every arm
    for arm in ("sequential, unshuffled", "oracle"):
        d = data["arms"][arm]
        assert len(d["final_held_out"]) == 2 and len(d["rollouts_to_target"]) == 2
        assert d["curve_rollouts"] == [budget // 2, budget]
        shares = np.asarray(d["draw_share"])  # per seed, per category (levels 0-2, coin flip)
        assert shares.shape == (2, 4) and np.allclose(shares.sum(1), 1.0)
        assert np.allclose(shares[:, 1], 0.0)  # level 1 has no mass
    # The unshuffled sequential sampler walks the pool in order, and the pool holds what the
    # mass says: 9 real entries split 1:0:3 (2 of level 0, 7 of level 2), then 3 coin flips.
    # Its 8 draws are entries 0-7: 2 of level 0 and 6 of level 2.
    seq = data["arms"]["sequential, unshuffled"]["draw_share"]
    assert np.allclose(seq, [[0.25, 0.0, 0.75, 0.0]] * 2)
    # The frontier oracle draws from the lowest level not mastered: level 0, all run long.
    assert np.allclose(data["arms"]["oracle"]["draw_share"], [[1.0, 0.0, 0.0, 0.0]] * 2)
    # The free pass-rate probe: every distinct task's share never / sometimes / always solved.
    assert "never / sometimes / always solved" in table
    rates = data["arms"]["oracle"]["pass_rates"]
    for key in ("never_by_category", "sometimes_by_category", "always_by_category"):
        assert np.asarray(rates[key]).shape == (2, 4)
    total = sum(
        np.asarray(rates[k])[:, [0, 2, 3]]
        for k in ("never_by_category", "sometimes_by_category", "always_by_category")
    )
    assert np.allclose(total, 1.0)  # each probed category splits into the three
    # Best against best (one arm per group here): the paragraph and its numbers in the JSON.
    assert "Best against best (median, 95% CI; paired): sequential, unshuffled / oracle: " in table
    best = data["best_of"]
    assert [b["best"] for b in best] == ["sequential, unshuffled", "oracle"]
    assert "ratio_from_first" not in best[0] and len(best[1]["ratio_from_first"]) == 3
    # 2 seeds per arm: below the 10 a verdict needs, none is given (the header says why)
    assert best[1]["verdict"] == "not judged (2 seeds)"
    assert data["arms"]["oracle"]["verdict"] == "not judged (2 seeds)"
    assert "| not judged (2 seeds) |" in table and "fewer than 10 seeds" in table
    assert "chosen on these same seeds; the intervals are not adjusted" in table
    assert (out / "compare.png").exists()
    assert "budget 32 rollouts" in printed.lower()
    # How spread the draws were within each category (per seed, per category; None: no draws).
    spread = data["arms"]["sequential, unshuffled"]["draw_spread"]
    assert len(spread) == 2 and all(len(row) == 4 for row in spread)
    assert all(row[1] is None for row in spread)  # level 1 has no entries, so no draws
    assert "How spread each arm's draws were within a category" in table
    # What it ran on, per arm, so per-seed numbers that differ elsewhere can be traced.
    env = data["arms"]["oracle"]["environment"]
    assert env["jax"] == jax.__version__ and env["backend"] == jax.default_backend()
    assert env["cores"] == os.cpu_count() and env["flax"] and env["optax"]
    assert f"\nEnvironment: Python {platform.python_version()}, jax {jax.__version__}, " in table


def test_the_progress_line_moves_with_the_program_and_changes_no_number(tiny_run, tmp_path, capsys):
    config = tmp_path / "tiny.toml"
    config.write_text(STUDY)
    compare.main(["--config", str(config), "--run-dir", str(tmp_path / "bar")])
    err = capsys.readouterr().err
    # 2 seeds x 2 evaluations per arm; stderr is not a terminal: the last line only.
    done = "[########################] 4/4 evaluations (seeds x evaluations) | "
    assert f"   sequential, unshuffled {done}" in err and f"   oracle {done}" in err
    assert "evaluations (seeds x evaluations)" not in tiny_run[2]  # --no-progress: no line
    bar = json.loads((tmp_path / "bar" / "compare.json").read_text())["arms"]
    quiet = json.loads((tiny_run[0] / "compare.json").read_text())["arms"]  # --no-progress
    assert set(bar) == set(quiet)
    for arm in quiet:
        for key in ("final_held_out", "rollouts_to_target", "draw_share", "curve_held_out"):
            assert bar[arm][key] == quiet[arm][key], (arm, key)


def test_draw_spread_is_1_for_draws_as_spread_as_uniform_and_less_for_repeats():
    from experiments.compare.report import draw_spread

    category = np.repeat([0, 1], 4)  # 4 entries each; category 2 has none
    draws = np.zeros((1, 2, 8), np.int64)
    draws[0, 0, :4] = 1  # interval 0: 4 draws of category 0 on 4 entries
    draws[0, 1, 0] = 4  # interval 1: 4 draws of category 0 on one entry
    uniform = 4 * (1 - 0.75**4)  # the entries 4 uniform draws over 4 reach on average
    spread = draw_spread(draws, category, 3)
    assert spread[0, 0] == pytest.approx((4 / uniform + 1 / uniform) / 2)
    assert np.isnan(spread[0, 1]) and np.isnan(spread[0, 2])  # never drawn
    # Entries 0-3 as two tasks repeated (0, 1, 0, 1): interval 0 drew both tasks twice, as
    # spread as can be over 2 tasks; interval 1 one task.
    copies = draw_spread(draws, category, 3, entry_task=np.array([0, 1, 0, 1, 4, 5, 6, 7]))
    two = 2 * (1 - 0.5**4)  # the tasks 4 uniform draws over 2 reach on average
    assert copies[0, 0] == pytest.approx((2 / two + 1 / two) / 2)


def test_diversity_runs_one_seed_of_one_arm(tmp_path, capsys):
    config = tmp_path / "tiny.toml"
    config.write_text(STUDY)
    compare.main(["--config", str(config), "--diversity", "oracle", "--seed-index", "1"])
    rows = [r for r in capsys.readouterr().out.splitlines() if r.startswith("| ")]
    assert len(rows) == 1 + 3  # the header, then before training and after each evaluation
    per_task, overall = (float(x) for x in rows[1].split("|")[2:4])
    assert 1 <= per_task <= 8 and overall >= per_task


def test_flags_a_study_does_not_use_are_refused_by_name(tmp_path):
    config = tmp_path / "tiny.toml"
    config.write_text(STUDY)
    run = ["--config", str(config), "--run-dir", str(tmp_path / "out")]
    with pytest.raises(SystemExit, match="--steps, --wandb not used by this script"):
        compare.main([*run, "--steps", "10", "--wandb", "p"])
    assert not (tmp_path / "out").exists()


def test_arm_names_with_a_pipe_do_not_split_markdown_cells():
    row = f"| {_markdown.cell('bandit (|advantage|)')} | 1 |"
    assert len(row.replace("\\|", "").strip("|").split("|")) == 2


def test_an_arm_name_with_a_line_break_is_refused(tmp_path):
    config = tmp_path / "tiny.toml"
    config.write_text(STUDY.replace('name = "oracle"', 'name = "ora\\ncle"'))
    with pytest.raises(ValueError, match=r"arm name 'ora\\ncle' holds a line break"):
        compare.main(["--config", str(config), "--run-dir", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_best_of_must_name_existing_arms(tmp_path):
    config = tmp_path / "tiny.toml"
    config.write_text(STUDY.replace('["oracle"]]', '["orcale"]]'))
    with pytest.raises(ValueError, match=r"best_of names arms that do not exist: \['orcale'\]"):
        compare.main(["--config", str(config), "--run-dir", str(tmp_path / "out")])


# A study directory that cannot be corrupted: one process at a time, arm files written whole
# and rerun when they cannot be read, every arm checked before any runs. `run_arm` is replaced
# by a stand-in that returns curves of the right shapes, so these tests train nothing.


def _fake_run_arm(calls):
    def run_arm(config, arm, mesh=None, progress=None):
        calls.append(arm["name"])
        rng = np.random.default_rng(len(calls))
        s, e = config.seeds, config.generations // config.eval_every
        exp = config.experiment
        per = exp.groups_per_generation * exp.group_size * config.eval_every
        names = ["level 0", "level 1", "level 2", "coin flip"]
        return {
            "held_out": rng.random((s, e)).astype(np.float32),
            "levels": rng.random((s, e, 3)).astype(np.float32),
            "rollouts": np.tile(np.arange(1, e + 1) * per, (s, 1)),
            "updates": np.tile(np.arange(1, e + 1), (s, 1)),
            "draws": rng.integers(1, 5, (s, e, 4)),
            "signal": np.ones((s, e), np.int32),
            "groups": np.full((s, e), 4, np.int32),
            "admitted": np.ones((s, e), np.int32),
            "seconds": 1.0,
            "load": (0.0, 0.0),
            "category_names": names,
            "category_entries": np.array([2, 0, 7, 3]),
            **(
                {
                    "pass_rate": rng.choice([0.0, 0.5, 1.0], (s, e, 6)).astype(np.float32),
                    "probe_category": np.array([0, 0, 2, 2, 2, 3]),
                }
                if config.pass_rate_samples
                else {}
            ),
        }

    return run_arm


@pytest.fixture
def fake_runs(monkeypatch):
    from experiments.compare import cli

    calls = []
    monkeypatch.setattr(cli, "run_arm", _fake_run_arm(calls))
    return calls


def _study(tmp_path, text=STUDY):
    config = tmp_path / "study.toml"
    config.write_text(text.replace("pass_rate_samples = 2\n", ""))
    return ["--config", str(config), "--run-dir", str(tmp_path / "out")]


def test_a_second_study_in_the_same_directory_is_refused_naming_the_first(tmp_path, fake_runs):
    import os

    from curriculax.engine._rundir import RunLock

    (tmp_path / "out").mkdir()
    first = RunLock(str(tmp_path / "out"))
    first.acquire()  # another open file description: flock refuses it as another process
    try:
        with pytest.raises(SystemExit, match=rf"in use by another run \(process {os.getpid()} "):
            compare.main(_study(tmp_path))
    finally:
        first.release()
    assert fake_runs == [] and not (tmp_path / "out" / "arms").exists()
    compare.main(_study(tmp_path))  # released: the study runs
    assert fake_runs == ["sequential, unshuffled", "oracle"]


@pytest.mark.parametrize("damage", [b"", b"PK\x03\x04trunc"], ids=["empty", "truncated"])
def test_an_arm_file_that_cannot_be_read_is_run_again(tmp_path, fake_runs, capsys, damage):
    compare.main(_study(tmp_path))
    assert fake_runs == ["sequential, unshuffled", "oracle"]
    config = compare.cli._cli.load_config(
        compare.CompareConfig,
        compare.cli._cli.base_parser("", steps=0, run_dir="").parse_args(_study(tmp_path)),
    )
    damaged = compare.cache.arm_path(str(tmp_path / "out"), config, config.arms[1])
    with open(damaged, "wb") as f:
        f.write(damage)
    compare.main(_study(tmp_path))
    assert fake_runs == ["sequential, unshuffled", "oracle", "oracle"]  # only the damaged one
    assert "cannot be read" in capsys.readouterr().err
    assert compare.load_arm(str(tmp_path / "out"), config, config.arms[1]) is not None


def test_an_arm_file_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    config = compare.CompareConfig(arms=({"name": "u", "curriculum": {}},), baseline="u")
    curves = _fake_run_arm([])(config, config.arms[0])
    run_dir = str(tmp_path)

    def killed(f, **arrays):
        f.write(b"PK\x03\x04 half an archive")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", killed)
    with pytest.raises(KeyboardInterrupt):
        compare.save_arm(run_dir, config, config.arms[0], curves)
    assert os.listdir(tmp_path / "arms") == []  # no file that looks finished, no leftover
    monkeypatch.undo()
    compare.save_arm(run_dir, config, config.arms[0], curves)
    back = compare.load_arm(run_dir, config, config.arms[0])
    assert np.array_equal(back["held_out"], curves["held_out"])
    assert back["environment"] is None  # an arm kept before environments were: not recorded


def test_an_arm_file_keeps_the_environment_it_ran_on(tmp_path):
    config = compare.CompareConfig(arms=({"name": "u", "curriculum": {}},), baseline="u")
    env = {"python": "3.11.7", "jax": "0.10.2", "cpu_features": "fma avx2", "cores": 2}
    curves = {**_fake_run_arm([])(config, config.arms[0]), "environment": env}
    compare.save_arm(str(tmp_path), config, config.arms[0], curves)
    assert compare.load_arm(str(tmp_path), config, config.arms[0])["environment"] == env


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda s: s.split("[[arms]]")[0].replace("seeds = 2\n", "seeds = 2\narms = []\n"),
            r"arms is empty",
        ),
        (
            lambda s: s.replace('baseline = "sequential, unshuffled"', 'baseline = "uniform"'),
            r"baseline='uniform' names no arm",
        ),
        (
            lambda s: s.replace('mode = "frontier"', 'mode = "frontire"'),
            r"arm 'oracle': oracle.mode must be one of",
        ),
        (
            lambda s: (
                s + '\n[[arms]]\nname = "typo"\ncurriculum = { sampler = { type = "unifrom" } }\n'
            ),
            r"arm 'typo': .*unknown sampler type 'unifrom'",
        ),
        (
            lambda s: (
                s + '\n[[arms]]\nname = "bad key"\n'
                'curriculum = { sampler = { type = "uniform", temprature = 1 } }\n'
            ),
            r"arm 'bad key': .*unknown key\(s\) \['temprature'\]",
        ),
        (
            lambda s: (
                s + '\n[[arms]]\nname = "bad lr"\ncurriculum = {}\n'
                "experiment = { learning_rat = 0.1 }\n"
            ),
            r"arm 'bad lr': .*unknown key\(s\) \['learning_rat'\]",
        ),
    ],
    ids=["no arms", "baseline", "oracle mode", "sampler", "sampler key", "experiment key"],
)
def test_a_malformed_study_fails_before_any_arm_runs(tmp_path, fake_runs, edit, message):
    with pytest.raises(ValueError, match=message):
        compare.main(_study(tmp_path, edit(STUDY)))
    assert fake_runs == []
    assert not (tmp_path / "out" / "arms").exists()


def test_running_a_subset_of_arms_keeps_the_baseline(tmp_path, fake_runs):
    with pytest.raises(SystemExit, match="--arms leaves out the baseline"):
        compare.main([*_study(tmp_path), "--arms", "oracle"])
    assert fake_runs == []


def test_report_redoes_the_tables_from_the_stored_per_seed_numbers(tmp_path, fake_runs, capsys):
    compare.main(
        _study(tmp_path, STUDY.replace("pass_rate_samples = 2\n", "pass_rate_samples = 3\n"))
    )
    out = tmp_path / "out"
    made = (out / "compare.md").read_text()
    stored = json.loads((out / "compare.json").read_text())
    assert "| oracle | " in made and "never / sometimes / always solved" in made
    drawn = (out / "compare.png").read_bytes()
    (out / "compare.png").write_bytes(b"stale")
    compare.main(["--report", str(out / "compare.json")])
    redone = (out / "compare.md").read_text()
    # redrawn from the per-seed curves compare.json keeps, the probes' panel included: the
    # figure the run drew
    assert (out / "compare.png").read_bytes() == drawn
    assert "not redrawn" not in capsys.readouterr().err
    # Everything but the first line (which says how it was made) is what the run wrote.
    assert redone.split("\n", 1)[1] == made.split("\n", 1)[1]
    assert (
        "tables redone from its per-seed numbers by `python -m experiments.compare --report"
        in redone
    )
    assert json.loads((out / "compare.json").read_text()) == stored
    assert fake_runs == ["sequential, unshuffled", "oracle"]  # nothing ran again
    # A study stored before its config gained a key keeps its config as stored: the rewrite
    # wrote today's defaults into it, settings the study never ran with.
    older = {**stored, "config": dict(stored["config"])}
    del older["config"]["step0_samples"]
    (out / "compare.json").write_text(json.dumps(older))
    compare.main(["--report", str(out / "compare.json")])
    assert json.loads((out / "compare.json").read_text())["config"] == older["config"]
    assert (out / "compare.md").read_text().split("\n", 1)[1] == made.split("\n", 1)[1]
    # a study stored before the probes' panel curve was kept: its figure is left, with a note
    for arm in older["arms"].values():
        arm.pop("curve_sometimes", None)
    (out / "compare.json").write_text(json.dumps(older))
    (out / "compare.png").write_bytes(b"kept")
    compare.main(["--report", str(out / "compare.json")])
    assert (out / "compare.png").read_bytes() == b"kept"
    assert "compare.png not redrawn: its pass-rate panel" in capsys.readouterr().err


def test_report_takes_arms_from_a_rerun_of_the_same_study(tmp_path, fake_runs):
    compare.main(_study(tmp_path))
    out, rerun = tmp_path / "out", tmp_path / "rerun"
    first = json.loads((out / "compare.json").read_text())
    # A rerun of the oracle with the baseline beside it, into another directory: the fake
    # runs draw other numbers per call, so the baseline's are made to match (as a rerun on
    # the same install gives them).
    compare.main([*_study(tmp_path)[:2], "--run-dir", str(rerun), "--arms", *NAMES])
    again = json.loads((rerun / "compare.json").read_text())
    path = str(out / "compare.json")
    with pytest.raises(SystemExit, match="baseline 'sequential, unshuffled' has other per-seed"):
        compare.main(["--report", path, "--replace-arms", str(rerun / "compare.json")])
    again["arms"][NAMES[0]] = first["arms"][NAMES[0]]
    (rerun / "compare.json").write_text(json.dumps(again))
    drawn = (out / "compare.png").read_bytes()
    compare.main(["--report", path, "--replace-arms", str(rerun / "compare.json")])
    merged = json.loads((out / "compare.json").read_text())
    # the figure is redrawn from the merged per-seed curves (it showed the replaced runs)
    from experiments.compare.plot import plot, stored_curves
    from experiments.compare.report import load_study

    config, data, _ = load_study(path)
    plot(config, stored_curves(data), str(tmp_path / "expected.png"))
    assert (out / "compare.png").read_bytes() == (tmp_path / "expected.png").read_bytes()
    assert (out / "compare.png").read_bytes() != drawn
    for key in ("rollouts_to_target", "final_held_out"):
        assert merged["arms"]["oracle"][key] == again["arms"]["oracle"][key]
        assert merged["arms"]["oracle"][key] != first["arms"]["oracle"][key]
        assert merged["arms"][NAMES[0]][key] == first["arms"][NAMES[0]][key]
    made = (out / "compare.md").read_text()
    assert made.startswith(f"Made by `{first['command']}`, arms 'oracle' from `{again['command']}`")
    # Only a run of the same study: other settings are refused.
    other = tmp_path / "other.json"
    again["config"]["seeds"] = 3
    other.write_text(json.dumps(again))
    with pytest.raises(SystemExit, match="not of the same study"):
        compare.main(["--report", path, "--replace-arms", str(other)])
    with pytest.raises(SystemExit, match="works with --report"):
        compare.main([*_study(tmp_path), "--replace-arms", str(other)])


NAMES = ("sequential, unshuffled", "oracle")


def test_the_main_job_reads_the_hard_skew_study_through_study_result(monkeypatch):
    monkeypatch.chdir(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    result = compare.study_result("docs/compare/hard-skew.json", "category bandit (|advantage|)")
    assert (result.reached, result.baseline_reached, result.seeds) == (10, 5, 10)
    assert result.ratio.bound == ">=" and result.ratio.high == np.inf  # uniform's median missed
    assert result.paired.high == np.inf and result.ratio.low > 1 and result.paired.low > 1
    assert result.verdict == "beat" and result.fisher_p == 6006 / 184756
    assert "no arm 'x'" in compare.study_result("docs/compare/hard-skew.json", "x")
    assert "is not there" in compare.study_result("nowhere.json", "x")
    from experiments import grpo
    from experiments._builders import GRPOExperimentConfig

    text = grpo.evidence_text(GRPOExperimentConfig())  # the main job quotes the same numbers
    assert "at least 2.86x (95% CI [1.80, inf), paired [1.80, inf)): beat" in text
    assert "Fisher's exact p = 0.033" in text
    assert "hard-skew.json, init scratch, labels levels, 10 seeds" in text
    assert "another regime" not in text


def test_the_main_job_quotes_its_own_regime_and_says_when_the_evidence_is_another(monkeypatch):
    monkeypatch.chdir(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from experiments import grpo
    from experiments._builders import MAIN_JOB

    result = compare.study_result(MAIN_JOB.evidence, MAIN_JOB.evidence_arm)
    assert (result.init, result.labels) == (MAIN_JOB.init, "levels")
    text = grpo.evidence_text(MAIN_JOB)
    assert "init base short-lengths, labels levels, 10 seeds" in text
    assert "another regime" not in text
    scratch = dataclasses.replace(MAIN_JOB, init="scratch")
    assert "(this run: init scratch, labels levels: it is evidence from another regime)" in (
        grpo.evidence_text(scratch)
    )


def test_a_study_from_a_base_records_the_step0_histogram(tmp_path, monkeypatch):
    """``init`` in the study's experiment warm-starts every arm from one cached base, and
    ``step0_samples`` records which tasks the initial policy never, sometimes, always solves."""
    monkeypatch.setenv("CURRICULAX_CACHE", str(tmp_path / "cache"))
    base = "{ base = { level_mass = [4, 4, 1], examples = 32, steps = 12, batch_size = 32 } }"
    study = (
        STUDY.replace("pass_rate_samples = 2\n", "pass_rate_samples = 2\nstep0_samples = 16\n")
        .replace("group_size = 4\n", f"group_size = 4\ninit = {base}\n")
        .replace("distractors = 0.25\n", "")
    )
    config = tmp_path / "tiny.toml"
    config.write_text(study)
    out = tmp_path / "out"
    compare.main(["--config", str(config), "--run-dir", str(out), "--no-progress"])
    assert len(os.listdir(tmp_path / "cache" / "base")) == 1  # one base for both arms
    table = (out / "compare.md").read_text()
    assert "Pass rates of the initial policy (init base {" in table
    data = json.loads((out / "compare.json").read_text())
    s0 = {arm: data["arms"][arm]["step0"] for arm in data["arms"]}
    assert s0["oracle"] == s0["sequential, unshuffled"]  # both arms start from the same policy
    h = {k: np.asarray(v) for k, v in s0["oracle"].items()}
    assert np.all(h["never"] + h["sometimes"] + h["always"] == h["probed"])
    # 12 entries split 1:0:3: 3 distinct tasks of level 0, 9 of level 2
    assert h["probed"].tolist() == [3, 0, 9] and data["config"]["step0_samples"] == 16

    # A changed base is another base: the arms' cached runs are not reused for it.
    def fingerprint(text):
        cfg = _cli.apply_mapping(compare.CompareConfig(), tomllib.loads(text))
        return compare.arm_fingerprint(cfg, cfg.arms[0])

    assert fingerprint(study) != fingerprint(study.replace("steps = 12", "steps = 13"))


def test_a_preset_arm_is_fingerprinted_by_the_tables_it_stands_for():
    from curriculax._config import PRESETS

    cfg = compare.CompareConfig()
    name = sorted(PRESETS)[0]
    by_name = {"name": "a", "curriculum": {"preset": name}}
    written_out = {"name": "b", "curriculum": PRESETS[name]}
    other = {"name": "c", "curriculum": {"sampler": {"type": "uniform"}}}
    assert compare.arm_fingerprint(cfg, by_name) == compare.arm_fingerprint(cfg, written_out)
    assert compare.arm_fingerprint(cfg, by_name) != compare.arm_fingerprint(cfg, other)


def test_the_recorded_command_can_be_pasted_back():
    import shlex

    from experiments.compare.cli import command_line

    argv = ["--config", "a.toml", "--arms", "uniform", "category bandit (|advantage|)"]
    assert shlex.split(command_line(argv))[3:] == argv


def test_a_study_records_the_steered_replay_share_at_each_evaluation(tmp_path):
    arms = STUDY.index("[[arms]]")
    study = STUDY[:arms].replace('best_of = [["sequential, unshuffled"], ["oracle"]]\n', "")
    study = study.replace('baseline = "sequential, unshuffled"', 'baseline = "uniform"')
    study += """
[[arms]]
name = "uniform"
curriculum = { sampler = { type = "uniform" } }

[[arms]]
name = "skip solved, replay following forgetting"
[arms.curriculum.sampler]
type = "skip_zero_variance"
skip = "solved"
target_share = 0.5
replay = "forgetting"
inner = { type = "uniform" }
"""
    config = tmp_path / "replay.toml"
    config.write_text(study)
    compare.main(["--config", str(config), "--run-dir", str(tmp_path / "out"), "--no-progress"])
    data = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert "replay" not in data["arms"]["uniform"]  # nothing skips there
    replay = data["arms"]["skip solved, replay following forgetting"]["replay"]
    target = np.asarray(replay["target_share"])
    forgotten = np.asarray(replay["forgotten_share"])
    assert target.shape == forgotten.shape == (2, 2)  # seeds x evaluations
    assert ((forgotten >= 0) & (forgotten <= 1)).all()
    assert np.allclose(target, 0.5 * forgotten, atol=1e-4)  # the cap times the forgotten share


@pytest.mark.parametrize("key, value", [("group_size", 16), ("seed", 3), ("target", 0.9)])
def test_an_arm_may_not_change_the_budget_seeds_or_target(key, value):
    """An arm with another group size once ran on twice the rollouts, was censored at the
    study's budget and paired with seeds that started from other policies."""
    arms = (
        {"name": "u", "curriculum": {}},
        {"name": "v", "curriculum": {}, "experiment": {key: value}},
    )
    with pytest.raises(ValueError, match=rf"arms\[1\] \('v'\): experiment.{key} may not differ"):
        compare.CompareConfig(arms=arms, baseline="u")


def test_an_arm_is_fingerprinted_by_what_it_runs_not_how_its_table_is_written():
    cfg = compare.CompareConfig()

    def key(sampler, gates=None, **experiment):
        c = dataclasses.replace(cfg, experiment=dataclasses.replace(cfg.experiment, **experiment))
        curriculum = {"sampler": sampler} if sampler else {}
        curriculum.update({"gates": gates} if gates else {})
        return compare.arm_fingerprint(c, {"name": "a", "curriculum": curriculum})

    lp = {"type": "learning_progress"}
    inner = {"type": "floor", "inner": lp}
    ref = key(inner)
    # a default written out, an int for a float, in an inner table too: the same arm
    assert key({**inner, "inner": {**lp, "half_life": 8}}) == key(
        {**inner, "inner": {**lp, "half_life": 8.0}}
    )
    default = inspect.signature(cx.samplers.learning_progress).parameters["half_life"].default
    assert key({**inner, "inner": {**lp, "half_life": default}}) == ref
    assert key({**inner, "inner": {**lp, "half_life": default + 1}}) != ref
    gate = {"type": "advantage_range"}
    low = inspect.signature(cx.gates.advantage_range).parameters["low"].default
    assert key(inner, {"g": {**gate, "low": low}}) == key(inner, {"g": gate})
    assert key({"type": "sequential"}) == key(None)  # the default sampler, named or not
    # the score the curves are read against afterwards is not part of the run
    assert key(inner, target=cfg.experiment.target / 2) == ref
    assert key(inner, group_size=cfg.experiment.group_size + 1) != ref


def test_a_user_factorys_defaults_a_config_cannot_write_stay_out_of_the_key(tmp_path, monkeypatch):
    """Defaults were written into the key whatever they were: a user sampler (an import path)
    with a dtype or a callable default made every study with it fail (``not JSON-able``)."""
    (tmp_path / "usersamp.py").write_text(
        "import jax.numpy as jnp\n"
        "import curriculax as cx\n"
        "def mysampler(num_tasks, *, share=0.5, dtype=jnp.float32, score=abs, tags=frozenset()):\n"
        "    return cx.samplers.uniform(num_tasks)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = compare.CompareConfig()

    def key(sampler):
        return compare.arm_fingerprint(cfg, {"name": "a", "curriculum": {"sampler": sampler}})

    user = {"type": "usersamp:mysampler"}
    assert key(user) == key({**user, "share": 0.5}) != key({**user, "share": 0.25})
    assert key({"type": "floor", "inner": user})  # inside a wrapper too


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Every 4th stored study (in name order), and the two whose Fisher p cells a rewrite once
# missed ("0.000" where the code prints "< 0.001"): under 1 s each.
_STORED = sorted(
    f for f in os.listdir(os.path.join(ROOT, "docs", "compare")) if f.endswith(".json")
)
_CHECKED = sorted(
    {*_STORED[::4], "distractors-20seeds.json", "hard-skew-rule-20seeds.json"} & set(_STORED)
)


@pytest.mark.parametrize("name", _CHECKED)
def test_a_stored_study_table_is_what_its_per_seed_numbers_give(name):
    """docs/studies.md says every cell of every stored table matches the code: the table of a
    stored study, redone from its per-seed numbers, is the one stored beside it."""
    from experiments.compare.report import load_study, tables

    path = os.path.join(ROOT, "docs", "compare", name)
    config, data, _ = load_study(path)
    with open(path[: -len(".json")] + ".md") as f:
        stored = f.read().split("\n\n", 1)[1]
    assert tables(config, data).strip() == stored.strip()
