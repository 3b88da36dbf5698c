"""A study's config: the pool, the budget, the seeds and the arms, checked at construction."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from experiments import _cli, _oracle
from experiments._builders import FRONTIER_CURRICULUM, GRPOExperimentConfig, TaskConfig

DEFAULT_ARMS = (
    {"name": "uniform", "curriculum": {"sampler": {"type": "uniform"}}},
    {"name": "sequential", "curriculum": {"sampler": {"type": "sequential"}}},
    {"name": "pools (frontier bands)", "curriculum": {"sampler": FRONTIER_CURRICULUM["sampler"]}},
    {"name": "oracle p(1-p)", "oracle": {}},
)
ARM_KEYS = ("name", "curriculum", "oracle", "experiment")
# Experiment settings a study does not use (each arm brings its own curriculum).
MAIN_JOB_ONLY = (
    "steps",
    "curriculum",
    "eval_rollouts",
    "checkpoint_every",
    "stop_at_target",
    "evidence",
    "evidence_arm",
    "evidence_best_of",
)
# An oracle arm's settings (experiments/_oracle.py, DEFAULTS): the p(1 - p) oracle by default
# (exact pass rates before every generation batch, drawn as learnability draws); the frontier
# oracle (mode = "frontier") probes 8 rollouts on 32 tasks per level at each evaluation.
ORACLE_KEYS = {"mode": "learnability", **_oracle.DEFAULTS["learnability"]}


@dataclasses.dataclass(frozen=True)
class CompareConfig:
    # A study's pool starts from TaskConfig's defaults, not the main job's pool.
    experiment: GRPOExperimentConfig = dataclasses.field(
        default_factory=lambda: GRPOExperimentConfig(task=TaskConfig())
    )
    title: str = ""  # the pool's name in tables and plots
    seeds: int = 10
    generations: int = 600  # generation batches per run: the rollout budget
    eval_every: int = 25  # generation batches between held-out evaluations
    baseline: str = "uniform"  # the arm ratios are taken against
    arms: tuple[dict, ...] = DEFAULT_ARMS
    # Pass-rate diagnostics (0: off): at each evaluation, a free probe of `pass_rate_samples`
    # rollouts on each distinct pool task (at most `pass_rate_per_category` per category; 0:
    # every one) records which tasks are never, sometimes and always solved. Not charged, not
    # seen by the arm; it tells how much signal the pool held for any sampler to find.
    pass_rate_samples: int = 0
    pass_rate_per_category: int = 32
    # The step-0 histogram (0: off): the same free probe, `step0_samples` rollouts per task, on
    # the initial policy (at most `pass_rate_per_category` tasks per category): which tasks are
    # never, sometimes and always solved before any training (a warm-started base's spread).
    step0_samples: int = 0
    # Groups of arms (lists of names), e.g. one curriculum at several learning rates: the
    # study also reports each group's best arm (lowest median rollouts to target) and the
    # ratio of the first group's best to each other group's best, so a gain is not a
    # disguised learning-rate change.
    best_of: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self):
        for name in ("seeds", "generations", "eval_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("pass_rate_samples", "pass_rate_per_category", "step0_samples"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.generations % self.eval_every:
            raise ValueError(
                f"generations={self.generations} must be a multiple of eval_every={self.eval_every}"
            )
        if not self.arms:
            raise ValueError(
                "arms is empty: a study needs at least one [[arms]] table (a name and a "
                "curriculum or an oracle)"
            )
        names = []
        for i, arm in enumerate(self.arms):
            check_arm(arm, f"arms[{i}]")
            names.append(arm["name"])
            try:
                orc = arm_oracle(arm)
            except ValueError as e:
                raise ValueError(f"arm {arm['name']!r}: {e}") from None
            if orc and (orc["every"] < 0 or (orc["every"] and self.eval_every % orc["every"])):
                raise ValueError(
                    f"arm {arm['name']!r}: oracle.every={orc['every']} must divide "
                    f"eval_every={self.eval_every} (0: probe at each evaluation)"
                )
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            raise ValueError(f"arm names must be unique, duplicated: {dups}")
        if self.baseline not in names:
            raise ValueError(
                f"baseline={self.baseline!r} names no arm; the ratios are taken against it, so "
                f"set it to one of {names}"
            )
        if self.best_of and (len(self.best_of) < 2 or not all(self.best_of)):
            raise ValueError("best_of must hold at least two non-empty groups of arm names")
        unknown = sorted({n for group in self.best_of for n in group} - set(names))
        if unknown:
            raise ValueError(f"best_of names arms that do not exist: {unknown}; arms: {names}")


# What every arm of a study must share: its rollout budget (groups per generation x group
# size), its seeds (each seed's initial policy, so seeds pair across arms) and its target.
SHARED_EXPERIMENT_KEYS = ("group_size", "groups_per_generation", "seed", "target")


def check_arm(arm: Mapping, where: str) -> None:
    """Raises a ValueError naming what is wrong with one ``[[arms]]`` table."""
    if not isinstance(arm, Mapping):
        raise ValueError(f"{where}: an arm is a table with a name and a curriculum, got {arm!r}")
    unknown = sorted(set(arm) - set(ARM_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; accepted keys are {list(ARM_KEYS)}")
    if not isinstance(arm.get("name"), str) or not arm["name"]:
        raise ValueError(f"{where}: every arm needs a non-empty 'name'")
    experiment = arm.get("experiment", {})
    shared = (
        sorted(set(experiment) & set(SHARED_EXPERIMENT_KEYS))
        if isinstance(experiment, Mapping)
        else []
    )
    if shared:
        raise ValueError(
            f"{where} ({arm['name']!r}): experiment.{shared[0]} may not differ between arms "
            "(every arm runs on the study's rollout budget, seeds and target, or the ratios, "
            f"pairs and Fisher test compare unlike runs); set {shared} in the study's [experiment]"
        )
    if ("curriculum" in arm) == ("oracle" in arm):
        raise ValueError(
            f"{where} ({arm['name']!r}): give exactly one of 'curriculum' (a sampler and gates) "
            "or 'oracle' (the oracle arm's probe settings)"
        )
    oracle_cfg = arm.get("oracle")
    if oracle_cfg is not None:
        bad = sorted(set(oracle_cfg) - set(ORACLE_KEYS) - {"gates"})
        if bad:
            raise ValueError(
                f"{where} ({arm['name']!r}): unknown oracle key(s) {bad}; accepted keys are "
                f"{[*ORACLE_KEYS, 'gates']}"
            )


def arm_oracle(arm: Mapping) -> dict | None:
    """The arm's oracle settings with defaults filled in (None: not an oracle arm)."""
    if "oracle" not in arm:
        return None
    return _oracle.oracle_settings(arm["oracle"])


def arm_experiment(config: CompareConfig, arm: Mapping) -> GRPOExperimentConfig:
    """The study's experiment config with the arm's ``experiment`` overrides applied."""
    return _cli.apply_mapping(
        config.experiment, arm.get("experiment", {}), where=f"arm {arm['name']!r}: experiment"
    )


def find_arm(config: CompareConfig, name: str) -> Mapping:
    """The ``[[arms]]`` table named ``name``."""
    return next(a for a in config.arms if a["name"] == name)


def budget(config: CompareConfig) -> int:
    """Rollouts per run: ``generations`` batches of ``groups_per_generation x group_size``."""
    exp = config.experiment
    return config.generations * exp.groups_per_generation * exp.group_size


def shown_categories(config: CompareConfig, names: list[str]) -> list[int]:
    """The categories the tables show: the pool's levels and any extra (coin-flip) category."""
    task = config.experiment.task
    return [i for i in range(len(names)) if i in task.pool_levels or i >= task.num_levels]


def json_default(x):
    """``json.dump``'s ``default`` for numpy arrays and scalars."""
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"not JSON-able: {type(x).__name__}")
