"""The shipped experiment configs parse into their dataclasses and match the defaults."""

import argparse
import dataclasses
import os

import pytest

import curriculax as cx
from curriculax import tasks as T
from experiments import _cli
from experiments._builders import MAIN_JOB, GRPOExperimentConfig, make_study_pool
from experiments.compare import CompareConfig
from experiments.compare.config import arm_experiment
from experiments.quickstart import QuickstartConfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load(cls, name, sets=()):
    args = argparse.Namespace(
        config=os.path.join(ROOT, "experiments", "configs", name),
        set=list(sets),
        seed=None,
        steps=None,
    )
    return _cli.load_config(cls, args)


@pytest.mark.parametrize(
    ("cls", "name", "defaults"),
    [
        (GRPOExperimentConfig, "grpo.toml", MAIN_JOB),
        (QuickstartConfig, "quickstart.toml", None),
    ],
)
def test_shipped_config_spells_out_the_defaults(cls, name, defaults):
    assert load(cls, name) == (cls() if defaults is None else defaults)


def test_the_main_job_is_the_study_arm_it_quotes():
    """The main job runs the arm of its evidence study (the same pool, base, labels, schedule
    and curriculum), so the numbers it quotes are its own regime's."""
    study = load(CompareConfig, os.path.join("compare", "base-hard-skew.toml"))
    arm = next(a for a in study.arms if a["name"] == MAIN_JOB.evidence_arm)
    exp = arm_experiment(study, arm)
    assert arm["curriculum"] == MAIN_JOB.curriculum
    main_only = {"steps", "eval_rollouts", "evidence", "evidence_arm", "evidence_best_of"}
    fields = [f.name for f in dataclasses.fields(MAIN_JOB) if f.name not in main_only]
    assert {k: getattr(exp, k) for k in fields} == {k: getattr(MAIN_JOB, k) for k in fields}
    assert MAIN_JOB.steps == study.generations and MAIN_JOB.init != "scratch"


STUDIES = sorted(os.listdir(os.path.join(ROOT, "experiments", "configs", "compare")))


@pytest.mark.parametrize("name", STUDIES)
def test_every_study_config_parses_and_its_arms_build(name):
    config = load(CompareConfig, os.path.join("compare", name))
    assert config.baseline in [a["name"] for a in config.arms]
    pool = make_study_pool(config.experiment)
    n = len(pool.category)
    assert n == config.experiment.task.size
    for arm in config.arms:
        if "curriculum" in arm:
            cx.curriculum_from_config(  # the context experiments._builders.build passes
                arm["curriculum"],
                n,
                categories=pool.category,
                entry_task=T.distinct_tasks(pool.train),
            )


def test_overrides_reach_nested_fields_and_bad_keys_are_named():
    config = load(GRPOExperimentConfig, "grpo.toml", ["task.pool_size=600", "grpo.reward=partial"])
    assert config.task.pool_size == 600 and config.grpo.reward == "partial"
    assert dataclasses.replace(config, task=GRPOExperimentConfig().task) != config
    with pytest.raises(ValueError, match=r"unknown key 'levels'; accepted keys are \[.*num_levels"):
        load(GRPOExperimentConfig, "grpo.toml", ["task.levels=8"])
    with pytest.raises(ValueError, match=r"^steps: expected an int, got 'many'$"):
        load(GRPOExperimentConfig, "grpo.toml", ["steps=many"])
    with pytest.raises(ValueError, match=r"level_mass has 8 entries but task\.num_levels is 3"):
        load(GRPOExperimentConfig, "grpo.toml", ["task.num_levels=3"])
