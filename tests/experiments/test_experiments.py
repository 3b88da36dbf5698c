"""The main job and the self-play demo run end to end on tiny configs."""

import json
import os

import pytest

from experiments import grpo
from experiments.selfplay import selfplay_demo

TINY = [  # the main job's pool, shrunk to 3 equal levels (reset the mass before the levels)
    "--set",
    "init=scratch",  # random weights: no base to build (test_main_job_builds_its_base...)
    "--set",
    "task.level_mass=[]",
    "--set",
    "task.eval_levels=[]",
    "--set",
    "task.pool_size=0",
    "--set",
    "task.num_levels=3",
    "--set",
    "stop_at_target=false",
    "--set",
    "task.train_per_level=16",
    "--set",
    "task.held_out_per_level=8",
    "--set",
    "batch_groups=4",
    "--set",
    "groups_per_generation=4",
    "--set",
    "eval_rollouts=64",
    "--set",
    "checkpoint_every=2",
    "--no-progress",
]


def metrics(path):
    return [
        {k: v for k, v in json.loads(x).items() if k != "time"}
        for x in path.read_text().splitlines()
    ]


def test_main_job_writes_its_files_and_a_resumed_run_continues_it(tmp_path):
    full, part = tmp_path / "full", tmp_path / "part"
    grpo.main(["--run-dir", str(full), "--steps", "6", *TINY])
    for name in ("metrics.jsonl", "traces.jsonl", "summary.json", "curves.png"):
        assert (full / name).exists(), name
    assert sorted(p.name for p in (full / "checkpoints").iterdir()) == ["2", "4", "6"]
    rows = metrics(full / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert "curriculum/reversal/sampler/entropy" in rows[-1]
    # evaluated at each update whose rollouts crossed a multiple of eval_rollouts (64)
    before = [0] + [r["rollouts"] for r in rows[:-1]]
    crossed = [r["rollouts"] // 64 > b // 64 for r, b in zip(rows, before)]
    assert crossed == ["eval/target" in r for r in rows] and any(crossed)
    summary = json.loads((full / "summary.json").read_text())
    assert summary["steps"] == 6 and 0.0 <= summary["final_eval"]["eval/target"] <= 1.0

    grpo.main(["--run-dir", str(part), "--steps", "3", *TINY])  # stopped half-way ...
    grpo.main(["--run-dir", str(part), "--steps", "6", "--resume", *TINY])  # ... and resumed
    assert metrics(part / "metrics.jsonl") == rows
    assert (part / "traces.jsonl").read_text() == (full / "traces.jsonl").read_text()


def test_main_job_writes_its_plot_and_final_eval_while_it_holds_the_run_directory(
    tmp_path, monkeypatch
):
    # They were written after the lock was released: a run started in the same directory
    # meanwhile gave this run's plot its metrics and took this run's final_eval in its summary.
    import pytest

    from curriculax.engine import RunDirError
    from curriculax.engine._rundir import RunLock

    run_dir, held = tmp_path / "r", []

    def probing(write):
        def probe(*args, **kwargs):
            with pytest.raises(RunDirError, match="is in use by another run"):
                RunLock(str(run_dir)).acquire()
            held.append(write.__name__)
            return write(*args, **kwargs)

        return probe

    monkeypatch.setattr(grpo, "plot_curves", probing(grpo.plot_curves))
    monkeypatch.setattr(grpo, "write_json_atomic", probing(grpo.write_json_atomic))
    grpo.main(["--run-dir", str(run_dir), "--steps", "1", *TINY])
    assert held == ["plot_curves", "write_json_atomic"]
    assert "final_eval" in json.loads((run_dir / "summary.json").read_text())


def test_main_job_stops_at_the_target_when_asked(tmp_path, capsys):
    run_dir = tmp_path / "stop"
    sets = ["--set", "target=0.0", "--set", "stop_at_target=true"]
    grpo.main(["--run-dir", str(run_dir), "--steps", "50", *TINY, *sets])
    rows = metrics(run_dir / "metrics.jsonl")
    assert "eval/target" in rows[-1] and all("eval/target" not in r for r in rows[:-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped"] == "until" and summary["steps"] == len(rows) < 50
    out = capsys.readouterr().out
    assert "(stopped at the target)" in out and "nan" not in out
    # Its advice, followed: the stop condition is no state, so a resume may change it (it was
    # refused as a config mismatch, "config stop_at_target: True -> False").
    resume = ["--run-dir", str(run_dir), "--resume", *TINY, *sets]
    grpo.main([*resume, "--steps", "50"])
    out = capsys.readouterr().out
    assert "already complete" in out and "--set stop_at_target=false (or a higher target)" in out
    grpo.main([*resume, "--steps", str(len(rows) + 1), "--set", "stop_at_target=false"])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped"] == "completed" and summary["steps"] == len(rows) + 1
    assert summary["config_changes"] == [
        {"step": len(rows), "changes": {"stop_at_target": [True, False]}}
    ]
    with pytest.raises(SystemExit, match=r"config seed: 0 -> 1"):  # the rest is still checked
        grpo.main([*resume, "--steps", "60", "--set", "seed=1"])


def test_a_run_stopped_before_its_first_update_reports_no_result(tmp_path, capsys):
    """Ctrl-C during the first generation batch printed "admission rate (last update) nan"
    and the studies' best-against-best verdicts as if beside a result."""
    grpo.main(["--run-dir", str(tmp_path / "r"), "--steps", "0", *TINY])
    out = capsys.readouterr().out
    assert "0 updates" in out and "admission rate (last update) (no update yet)" in out
    assert "nan" not in out and "best against best" not in out


def test_selfplay_dry_run_is_deterministic(tmp_path, capsys):
    outputs = []
    for i in range(2):
        run_dir = tmp_path / str(i)
        selfplay_demo.main(
            ["--dry-run", "--run-dir", str(run_dir), "--rounds", "2", "--steps", "4"]
        )
        outputs.append((capsys.readouterr().out, (run_dir / "summary.json").read_bytes()))
    assert outputs[0] == outputs[1]
    assert "cap:" in outputs[0][0] and "held-out reward (seed tasks only)" in outputs[0][0]


def test_the_main_job_quotes_best_against_best_first_with_its_regime(monkeypatch):
    import dataclasses
    import os

    from experiments._builders import GRPOExperimentConfig

    monkeypatch.chdir(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    config = GRPOExperimentConfig()
    text = grpo.best_of_text(config)
    assert (
        "best against best (docs/compare/lr-hard-skew.json, init scratch): 'uniform, lr 0.001' / "
        "'category bandit (|advantage|), lr 0.002', median rollouts to target: 2.07x "
        "[1.36, inf); paired [1.38, inf): beat" in text
    )
    assert "another regime" not in text and "reproduce: python -m experiments.compare" in text
    assert "each its group's best on these seeds; the interval is not adjusted" in text
    warm = dataclasses.replace(config, init={"base": "short-lengths"})
    assert "this run with init base short-lengths: it is evidence from another regime" in (
        grpo.best_of_text(warm)
    )
    assert "is not there" in grpo.best_of_text(
        dataclasses.replace(config, evidence_best_of="nowhere.json")
    )


def test_the_main_job_quotes_best_against_best_from_its_own_regime(monkeypatch):
    """``make run`` quotes the learning-rate check run from the same base (each arm at its own
    best learning rate), not the scratch one."""
    import os

    from experiments._builders import MAIN_JOB

    monkeypatch.chdir(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    text = grpo.best_of_text(MAIN_JOB)
    assert (
        "best against best (docs/compare/lr-base-hard-skew.json, init base short-lengths): "
        "'uniform, lr 0.002' / 'category bandit (|advantage|), lr 0.004', median rollouts to "
        "target: 2.75x [1.50, 7.25]; paired [1.50, 7.00]: beat" in text
    )
    assert "another regime" not in text


def test_main_job_builds_its_base_on_first_use_and_finds_it_after(tmp_path, monkeypatch, capsys):
    """``make run`` starts from the main job's base (MAIN_JOB.init): built on the first run and
    cached, found on the next; a tiny base here (the shipped one is the same code path)."""
    from experiments import _base

    monkeypatch.setenv(_base.CACHE_ENV, str(tmp_path / "cache"))
    base = "{level_mass = [1, 1], examples = 16, steps = 3, batch_size = 8}"
    args = [*TINY, "--set", f"init={{base = {base}}}", "--steps", "2"]
    grpo.main(["--run-dir", str(tmp_path / "a"), *args])
    first = capsys.readouterr()
    grpo.main(["--run-dir", str(tmp_path / "b"), *args])
    second = capsys.readouterr()
    assert "building the base policy" in first.err + first.out
    assert "building the base policy" not in second.err + second.out
    assert len(os.listdir(tmp_path / "cache" / "base")) == 1


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIFFERS = "the study's numbers are not evidence for this run)"


def test_the_main_job_quotes_a_study_arm_as_its_own_only_when_it_trains_as_that_arm(monkeypatch):
    """The study's gain was printed as ``uniform / this curriculum`` next to any run: one that
    trained with another curriculum (``--set curriculum.sampler.type=uniform``), another
    learning rate or another pool was told the bandit's measured 2.00x was its own (only
    ``init`` and ``task.labels`` were compared). Now the run's curriculum (as it runs: defaults
    written out, presets expanded) and the settings a run reads are compared with the quoted
    arm's, and a difference is named."""
    import dataclasses

    from experiments import _cli
    from experiments._builders import MAIN_JOB

    monkeypatch.chdir(ROOT)
    evidence, best = grpo.evidence_text(MAIN_JOB), grpo.best_of_text(MAIN_JOB)
    assert "uniform / this curriculum, median rollouts to target: 2.00x" in evidence
    assert "differs" not in evidence + best
    # The same run spelled otherwise: a default written out, the main job's TOML.
    spelled = _cli.override(MAIN_JOB, ["curriculum.sampler.step_size=0.3"])
    assert (grpo.evidence_text(spelled), grpo.best_of_text(spelled)) == (evidence, best)
    parser = _cli.base_parser("x", steps=MAIN_JOB.steps, run_dir="unused")
    args = parser.parse_args(["--config", "experiments/configs/grpo.toml"])
    toml = _cli.load_config(type(MAIN_JOB), args, defaults=MAIN_JOB)
    assert (grpo.evidence_text(toml), grpo.best_of_text(toml)) == (evidence, best)
    # Another curriculum: the ratio is that arm's, not this run's.
    uniform = _cli.override(MAIN_JOB, ["curriculum.sampler.type=uniform"])
    text = grpo.evidence_text(uniform)
    assert "this curriculum" not in text and "uniform / that arm, median rollouts" in text
    assert f"(this run differs from that arm in curriculum: {DIFFERS}" in text
    assert (
        "(this run differs from 'category bandit (|advantage|), lr 0.004' in curriculum: " + DIFFERS
        in grpo.best_of_text(uniform)
    )
    # Another learning rate and pool: named by key. A best_of group chose among its arms'
    # learning rates, so the main job's (one of them) is no difference there; one outside is.
    other = _cli.override(MAIN_JOB, ["grpo.learning_rate=0.01", "task.pool_size=200"])
    assert f"that arm in task.pool_size, grpo.learning_rate: {DIFFERS}" in (
        grpo.evidence_text(other)
    )
    assert f"lr 0.004' in task.pool_size, grpo.learning_rate: {DIFFERS}" in (
        grpo.best_of_text(other)
    )
    lr4 = _cli.override(MAIN_JOB, ["grpo.learning_rate=0.004"])
    assert "differs" not in grpo.best_of_text(lr4)
    assert f"in grpo.learning_rate: {DIFFERS}" in grpo.evidence_text(lr4)
    # The target the quoted rollouts are counted to is (a study's runs never read it).
    half = dataclasses.replace(MAIN_JOB, target=0.5)
    assert f"that arm in target: {DIFFERS}" in grpo.evidence_text(half)
    # The seed is not a difference (a study runs several); the regime has its own note.
    assert "differs" not in grpo.evidence_text(dataclasses.replace(MAIN_JOB, seed=7))
    # A preset matches its tables written out; an oracle arm matches no curriculum.
    from curriculax._config import PRESETS

    robust = dataclasses.replace(
        MAIN_JOB,
        evidence="docs/compare/base-hard-skew-auto.json",
        evidence_arm="robust, labels levels",
    )
    for curriculum in ({"preset": "robust"}, PRESETS["robust"]):
        text = grpo.evidence_text(dataclasses.replace(robust, curriculum=curriculum))
        assert "uniform / this curriculum" in text and "differs" not in text
    oracle = dataclasses.replace(MAIN_JOB, evidence_arm="oracle p(1-p)")
    assert f"that arm in curriculum: {DIFFERS}" in grpo.evidence_text(oracle)


def _never(*_, **__):
    raise AssertionError("the main job started its work")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "evidence_arm",
            "nosuch",
            r"^evidence_arm: the study docs/compare/base-hard-skew\.json has no arm 'nosuch'; "
            r"its arms are \[.*'uniform', .*'oracle p\(1-p\)', .*\] \(set "
            r'evidence = "" to quote no study\)$',
        ),
        (
            "evidence_best_of",
            "docs/compare/base-hard-skew.json",
            r"^evidence_best_of: the study docs/compare/base-hard-skew\.json has no two "
            r'best_of groups run \(set evidence_best_of = "" to quote no study\)$',
        ),
    ],
)
def test_the_main_job_refuses_a_study_it_cannot_quote_before_it_builds_anything(
    tmp_path, monkeypatch, key, value, message
):
    """An ``evidence_arm`` the study does not hold, or an ``evidence_best_of`` study with no
    groups, was found only after the whole run had trained: a note in place of the numbers,
    and exit status 0."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(grpo, "build", _never)
    run_dir = tmp_path / "r"
    args = ["--run-dir", str(run_dir), "--no-progress", "--set", f'{key}="{value}"']
    with pytest.raises(ValueError, match=message):
        grpo.main(args)
    assert not run_dir.exists()
    off = ["--set", 'evidence=""', "--set", 'evidence_best_of=""']  # as the message says
    with pytest.raises(AssertionError, match="started its work"):
        grpo.main([*args, *off])


@pytest.mark.parametrize("key", ["evidence", "evidence_best_of"])
def test_a_study_file_that_is_not_there_is_noted_before_the_run_not_refused(
    tmp_path, monkeypatch, capsys, key
):
    """A run started outside the repository finds no ``docs/compare`` study at the default
    paths: it trains and says so (before, only after training), it is not refused."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(grpo, "build", _never)
    args = ["--run-dir", str(tmp_path / "r"), "--no-progress", "--set", f'{key}="nosuch.json"']
    with pytest.raises(AssertionError, match="started its work"):
        grpo.main(args)
    assert f"note: {key}: the study nosuch.json is not there" in capsys.readouterr().err
