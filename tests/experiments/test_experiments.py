"""The main job and the self-play demo run end to end on tiny configs."""

import json
import os

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
