"""The GRPO self-play scripts build each arm through one helper (``evolve_arm``)."""

import dataclasses

import curriculax.selfplay as selfplay
from experiments.selfplay import study
from experiments.selfplay._challengers import evolve_arm
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
