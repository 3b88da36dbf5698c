"""The main job, the comparison and the self-play demo run end to end on tiny configs."""

import json

from experiments import compare, grpo
from experiments.selfplay import selfplay_demo

TINY = [
    "--set",
    "task.num_levels=3",
    "--set",
    "task.train_per_level=16",
    "--set",
    "task.held_out_per_level=8",
    "--set",
    "batch_groups=4",
    "--set",
    "groups_per_generation=4",
    "--set",
    "eval_every=2",
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
    assert (
        "eval/held_out_success" in rows[1]
        and "curriculum/reversal/gate/zero_advantage/rejected" in rows[-1]
    )
    summary = json.loads((full / "summary.json").read_text())
    assert summary["steps"] == 6 and 0.0 <= summary["final_eval"]["eval/held_out_success"] <= 1.0

    grpo.main(["--run-dir", str(part), "--steps", "3", *TINY])  # stopped half-way ...
    grpo.main(["--run-dir", str(part), "--steps", "6", "--resume", *TINY])  # ... and resumed
    assert metrics(part / "metrics.jsonl") == rows
    assert (part / "traces.jsonl").read_text() == (full / "traces.jsonl").read_text()


def test_compare_writes_the_table_for_every_arm(tmp_path, capsys):
    compare.main(
        [
            "--run-dir",
            str(tmp_path),
            "--arms",
            "uniform",
            "pools (frontier bands) + gate",
            "--set",
            "seeds=2",
            "--set",
            "generations=4",
            "--set",
            "eval_every=2",
            "--set",
            "experiment.task.num_levels=2",
            "--set",
            "experiment.task.train_per_level=8",
            "--set",
            "experiment.task.held_out_per_level=4",
            "--set",
            "experiment.batch_groups=4",
            "--set",
            "experiment.groups_per_generation=4",
        ]
    )
    table = (tmp_path / "compare.md").read_text()
    assert "| uniform |" in table and "| pools (frontier bands) + gate |" in table
    data = json.loads((tmp_path / "compare.json").read_text())
    for arm in ("uniform", "pools (frontier bands) + gate"):
        assert len(data["arms"][arm]["final_held_out"]) == 2  # one value per seed
        # an equal budget: 4 generation batches of 4 groups x 8 rollouts, in every arm
        assert data["arms"][arm]["curve_rollouts"][-1] == 4 * 4 * 8
    assert (tmp_path / "compare.png").exists()
    assert "budget 128 rollouts" in capsys.readouterr().out


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
