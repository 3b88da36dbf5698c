"""The GRPO self-play scripts build each arm through one helper (``evolve_arm``)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curriculax.selfplay as selfplay
from curriculax import tasks as T
from experiments.selfplay import grpo_selfplay, study
from experiments.selfplay._challengers import (
    arm_challenger,
    evolve_arm,
    pure_arm_challenger,
    pure_sequence_challenger,
)
from experiments.selfplay.grpo_selfplay import SelfPlayConfig


def _calls(monkeypatch):
    calls = []

    def fake(solver, seed_tasks, **kwargs):
        calls.append((solver, seed_tasks, kwargs))
        return "result"

    monkeypatch.setattr(selfplay, "curriculum_evolve", fake)
    return calls


def test_both_arms_share_the_config_and_only_the_self_play_arm_has_a_challenger(monkeypatch):
    calls = _calls(monkeypatch)
    config = dataclasses.replace(study.StudyConfig(), rounds=3, start_level=4, sampler="uniform")
    for arm in ("self-play", "no challenger"):
        out = evolve_arm(config, "seeds", arm=arm, key=7, max_attempts=2)
        assert out == "result"
    (_, seeds_a, a), (_, seeds_b, b) = calls
    assert seeds_a == seeds_b == "seeds"
    exp = config.experiment
    shared = {
        "rounds": 3,
        "steps_per_round": config.steps_per_round,
        "generated_per_round": config.generated_per_round,
        "frontier_share": config.frontier_share,
        "sampler": {"type": "uniform"},
        "key": 7,
        "group_size": exp.group_size,
        "batch_groups": exp.batch_groups,
        "groups_per_generation": exp.groups_per_generation,
        "max_attempts": 2,
    }
    for kwargs in (a, b):
        assert {k: kwargs[k] for k in shared} == shared
    assert a["challenger"] is not None and a["spec"] == {"level": 4}
    assert b["challenger"] is None and b["spec"] is None


def test_the_grpo_demo_config_builds_an_arm(monkeypatch):
    calls = _calls(monkeypatch)
    config = SelfPlayConfig()
    evolve_arm(config, "seeds", arm="self-play", key=0, held_out_frac=config.held_out_frac)
    (_, _, kwargs) = calls[0]
    assert kwargs["held_out_frac"] == config.held_out_frac
    assert kwargs["frontier_share"] == config.frontier_share == 0.25


def test_a_start_level_outside_the_family_is_refused_before_any_arm_runs(tmp_path):
    spec = T.ReversalSpec(num_levels=2)
    for make in (arm_challenger, pure_arm_challenger):
        with pytest.raises(ValueError, match=r"start_level = 2 is not a level .*levels 0-1"):
            make("self-play", spec, 2)
        assert make("bandit", spec, 2)[0] is not None  # the level is the self-play arm's only
    with pytest.raises(ValueError, match="start_level = 9"):
        study.main(["--run-dir", str(tmp_path), "--set", "start_level=9", "--seeds", "1"])
    assert not (tmp_path / "runs.jsonl").exists()
    with pytest.raises(ValueError, match="start_level = 9"):
        grpo_selfplay.main(["--run-dir", str(tmp_path / "demo"), "--set", "start_level=9"])
    # the compiled challenger's tasks carry the level asked for, so validate can refuse it
    pure = pure_sequence_challenger(spec)
    keys = jax.random.split(jax.random.key(0), 3)
    for level, ok in ((1, True), (2, False), (-1, False)):
        tasks, valid = pure.validate(pure.generate({"level": jnp.int32(level)}, keys))
        assert np.asarray(tasks.level).tolist() == [level] * 3
        assert np.asarray(valid).tolist() == [ok] * 3
