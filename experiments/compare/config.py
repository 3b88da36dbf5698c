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
# What does the job of each main-job setting in a study (the message that refuses one).
_STUDY_INSTEAD = {
    "steps": "a study's budget is `generations`, its generation batches per run",
    "curriculum": "each [[arms]] table brings its own curriculum (or oracle)",
    "eval_rollouts": "a study evaluates every `eval_every` generation batches",
    "checkpoint_every": "a study keeps each finished arm in RUN_DIR/arms, not checkpoints",
    "stop_at_target": (
        "a study never stops early: every arm runs its whole budget (`generations`) and "
        "rollouts to target are read off its evaluations (every `eval_every` batches)"
    ),
    **dict.fromkeys(
        ("evidence", "evidence_arm", "evidence_best_of"),
        "it names the study the main job quotes; a study writes its own compare.json",
    ),
}
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
            check_same_measure(self, arm, f"arms[{i}]")
            names.append(arm["name"])
            try:
                orc = arm_oracle(arm)
            except ValueError as e:
                raise ValueError(f"arm {arm['name']!r}: {e}") from None
            every = orc["every"] if orc else 0
            if orc and (
                isinstance(every, bool)
                or not isinstance(every, int | np.integer)
                or every < 0
                or (every and self.eval_every % every)
            ):
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
    if not arm["name"].isprintable():
        raise ValueError(
            f"{where}: arm name {arm['name']!r} holds a line break or another control character "
            "(it names the arm's row in every table)"
        )
    experiment = arm.get("experiment", {})
    if not isinstance(experiment, Mapping):
        raise ValueError(
            f"{where} ({arm['name']!r}): 'experiment' is a table of the study's [experiment] "
            f"settings the arm changes, got {experiment!r}"
        )
    unused = sorted(set(experiment) & set(MAIN_JOB_ONLY))
    if unused:
        raise ValueError(
            f"{where} ({arm['name']!r}): experiment.{unused[0]} is the main job's setting, which "
            f"a study does not use ({_STUDY_INSTEAD[unused[0]]}); leave {unused} out of the arm"
        )
    shared = sorted(set(experiment) & set(SHARED_EXPERIMENT_KEYS))
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


# An arm may change what its sampler is told of the tasks (``task.labels``), nothing else of
# its pool or held-out set, nor where its policy starts.
ARM_TASK_KEYS = ("labels",)


def check_same_measure(config: CompareConfig, arm: Mapping, where: str) -> None:
    """Raises a ValueError unless the arm trains from the study's initial policy (``init``,
    ``model``) on the study's pool and is measured on its held-out target (every ``task`` field but
    ``labels``): otherwise its rollouts to target would count other tasks, from another start,
    than the baseline's, and the ratios would compare unlike runs."""
    if not arm.get("experiment"):
        return
    try:
        exp = arm_experiment(config, arm)
    except (ValueError, TypeError) as e:
        kind = TypeError if isinstance(e, TypeError) else ValueError
        raise kind(f"{where} ({arm['name']!r}): experiment.{e}") from None
    study = config.experiment
    differ = [name for name in ("init", "model") if getattr(exp, name) != getattr(study, name)]
    differ += [
        f"task.{f.name}"
        for f in dataclasses.fields(TaskConfig)
        if f.name not in ARM_TASK_KEYS and getattr(exp.task, f.name) != getattr(study.task, f.name)
    ]
    if differ:
        raise ValueError(
            f"{where} ({arm['name']!r}): experiment.{differ[0]} may not differ between arms "
            "(every arm starts from the study's initial policy, trains on its pool and is "
            "measured on its held-out target, or the ratios compare unlike runs); set "
            f"{differ} in the study's [experiment] (an arm may change task.labels, what its "
            "sampler is told of the tasks)"
        )


def check_main_job_only(config: CompareConfig) -> None:
    """Raises a ValueError naming a main-job setting (:data:`MAIN_JOB_ONLY`) the study's
    ``[experiment]`` sets to other than its default: a study does not use it (its arms' curves
    and their cache fingerprints do not depend on it), and the message names the study setting
    that does its job. Not a check of :class:`CompareConfig` itself, so a study stored before
    a default changed still reads back."""
    defaults = GRPOExperimentConfig()
    for key in MAIN_JOB_ONLY:
        value = getattr(config.experiment, key)
        if value != getattr(defaults, key):
            raise ValueError(
                f"experiment.{key} = {value!r} is the main job's setting, which a study does not "
                f"use ({_STUDY_INSTEAD[key]}); leave it out of the study's [experiment]"
            )


def select_arms(config: CompareConfig, names) -> CompareConfig:
    """The study restricted to the arms ``names`` (in the study's order; the baseline among
    them): each ``best_of`` group keeps its arms among ``names``, a group left empty is
    dropped, and ``best_of`` is cleared when fewer than two groups remain (a best against best
    needs two)."""
    keep = set(names)
    groups = tuple(g for g in (tuple(n for n in grp if n in keep) for grp in config.best_of) if g)
    return dataclasses.replace(
        config,
        arms=tuple(a for a in config.arms if a["name"] in keep),
        best_of=groups if len(groups) >= 2 else (),
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
