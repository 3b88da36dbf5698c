"""A resume with a changed config is refused, naming each changed key (old -> new), unless
``allow_partial``, which records both in ``summary.json``; a changed group size is named by its
config key and env, not as leaf shapes."""

import json
import os

import pytest
from reliability_helpers import snapshot

from curriculax.engine import CheckpointMismatch, run
from experiments import quickstart

CONFIG = {"seed": 0, "steps": 3, "lr": 0.1, "curriculum": {"sampler": {"type": "uniform"}}}


def _changed(**changes):
    config = json.loads(json.dumps(CONFIG))
    for key, value in changes.items():
        *path, last = key.split("__")
        node = config
        for k in path:
            node = node[k]
        node[last] = value
    return config


def test_a_changed_config_is_refused_naming_each_key(engine, tmp_path):
    run(engine, steps=3, run_dir=tmp_path, progress=False, config=CONFIG)
    before = snapshot(tmp_path)
    new = _changed(seed=7, steps=6, curriculum__sampler__type="sequential")
    with pytest.raises(CheckpointMismatch) as e:
        run(engine, steps=6, run_dir=tmp_path, resume=True, progress=False, config=new)
    lines = [x.strip() for x in str(e.value).splitlines()]
    assert "- config curriculum.sampler.type: 'uniform' -> 'sequential'" in lines
    assert "- config seed: 0 -> 7" in lines
    assert not any("steps" in x for x in lines)  # steps may change: it says how long to run
    assert "--allow-partial" in str(e.value)
    assert snapshot(tmp_path) == before


def test_a_resume_given_no_config_keeps_the_runs_and_still_refuses_a_change(engine, tmp_path):
    """A resume without a config once saved ``{}`` in its checkpoints, after which any change
    went through unseen."""
    run(engine, steps=2, run_dir=tmp_path, progress=False, config=CONFIG)
    run(engine, steps=3, run_dir=tmp_path, resume=True, progress=False)
    assert json.loads((tmp_path / "summary.json").read_text())["config"] == CONFIG
    with pytest.raises(CheckpointMismatch, match=r"config lr: 0\.1 -> 0\.2"):
        run(engine, steps=4, run_dir=tmp_path, resume=True, progress=False, config=_changed(lr=0.2))


def test_allow_partial_records_both_configs_in_the_summary(engine, tmp_path):
    run(engine, steps=3, run_dir=tmp_path, progress=False, config=CONFIG)
    new = _changed(seed=7, steps=5)
    with pytest.warns(UserWarning, match=r"config seed: 0 -> 7"):
        run(
            engine,
            steps=5,
            run_dir=tmp_path,
            resume=True,
            allow_partial=True,
            progress=False,
            config=new,
        )
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["config"]["seed"] == 7
    assert summary["config_changes"] == [{"step": 3, "changes": {"seed": [0, 7]}}]
    # The record stays with the run: a later resume with the new config keeps it.
    run(engine, steps=7, run_dir=tmp_path, resume=True, progress=False, config=new)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["config_changes"] == [{"step": 3, "changes": {"seed": [0, 7]}}]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ["--set", "pools_weight=2.0"],
            [
                "config pools_weight: 1.0 -> 2.0",
                "env 'pools': weight 1.0 in the checkpoint, 2.0 now",
            ],
        ),
        (
            ["--set", "group_size=4"],
            [
                "config group_size: 8 -> 4",
                "env 'pools': group size 8 in the checkpoint, 4 now (the groups waiting to train "
                "are dropped)",
                "env 'steady': group size 8 in the checkpoint, 4 now (the groups waiting to train "
                "are dropped)",
            ],
        ),
        (["--seed", "7"], ["config seed: 0 -> 7"]),
    ],
    ids=["env weight", "group size", "seed"],
)
def test_the_cli_names_the_changed_keys(tmp_path, change, expected):
    args = ["--run-dir", str(tmp_path), "--no-progress", "--set", "checkpoint_every=2"]
    quickstart.main([*args, "--steps", "2"])
    with pytest.raises(SystemExit) as e:
        quickstart.main([*args, "--steps", "4", "--resume", *change])
    message = str(e.value)
    bullets = [x[4:] for x in message.splitlines() if x.startswith("  - ")]
    assert bullets == expected, message
    assert message.startswith("error: checkpoint step 2 in ")


def test_the_cli_checkpoint_every_0_saves_only_at_the_end(tmp_path):
    """``--checkpoint-every 0`` overrides the config's interval (it was read as "not given")."""
    args = ["--run-dir", str(tmp_path), "--no-progress", "--set", "checkpoint_every=1"]
    quickstart.main([*args, "--steps", "3", "--checkpoint-every", "0"])
    assert sorted(os.listdir(tmp_path / "checkpoints")) == ["3"]
