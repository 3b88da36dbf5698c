"""The shipped experiment configs parse into their dataclasses and match the defaults."""

import argparse
import dataclasses
import os

import pytest

import curriculax as cx
from experiments import _cli
from experiments._builders import GRPOExperimentConfig, make_study_pool
from experiments.compare import CompareConfig
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
    ("cls", "name"),
    [
        (GRPOExperimentConfig, "grpo.toml"),
        (QuickstartConfig, "quickstart.toml"),
    ],
)
def test_shipped_config_spells_out_the_defaults(cls, name):
    assert load(cls, name) == cls()


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
            cx.curriculum_from_config(arm["curriculum"], n, categories=pool.category)


def test_overrides_reach_nested_fields_and_bad_keys_are_named():
    config = load(GRPOExperimentConfig, "grpo.toml", ["task.pool_size=600", "grpo.reward=partial"])
    assert config.task.pool_size == 600 and config.grpo.reward == "partial"
    assert dataclasses.replace(config, task=GRPOExperimentConfig().task) != config
    with pytest.raises(ValueError, match=r"unknown key 'levels'; accepted keys are \[.*num_levels"):
        load(GRPOExperimentConfig, "grpo.toml", ["task.levels=8"])
    with pytest.raises(ValueError, match="expected int"):
        load(GRPOExperimentConfig, "grpo.toml", ["steps=many"])
    with pytest.raises(ValueError, match=r"level_mass has 8 entries but task\.num_levels is 3"):
        load(GRPOExperimentConfig, "grpo.toml", ["task.num_levels=3"])
