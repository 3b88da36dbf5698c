"""The GRPO experiments' configs and builders, shared by every script that trains the
embedded policy (the main job, the comparison, GRPO self-play, the train-step benchmark).

No script imports another script: what they share lives here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import curriculax as cx
from curriculax import rl
from curriculax import tasks as T
from curriculax.engine import Engine, EngineConfig, Env

# Bands scored on exact match. At the frontier length a policy passes about 1 in 8 of its
# rollouts, below prime-rl's 0.25 floor for "hard", so the frontier band starts just above 0;
# a task that failed once early (most tasks, from a random policy) stays worth re-checking, so
# "unsolved" keeps a real weight; mastered tasks are rarely revisited.
FRONTIER_CURRICULUM = {
    "sampler": {
        "type": "difficulty_pools",
        "bands": {
            "unsolved": {"max_reward": 0.0, "weight": 0.5},
            "frontier": {"max_reward": 0.75, "weight": 1.0},
            "solved": {"max_reward": 1.0, "weight": 0.05},
        },
        "unscored_weight": 1.0,
    },
    "gates": {"zero_advantage": {"type": "advantage_range", "low": 0.0, "high": 0.0}},
}


@dataclasses.dataclass(frozen=True)
class TaskConfig:
    family: str = "reversal"  # reversal | copy | addition
    num_levels: int = 6
    num_symbols: int = 4
    train_per_level: int = 64
    held_out_per_level: int = 32
    held_out_frac: float = 0.2
    balance_levels: bool = True  # repeat the tasks of small levels up to train_per_level


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    width: int = 64
    depth: int = 2
    heads: int = 4
    positions: str = "column"


@dataclasses.dataclass(frozen=True)
class GRPOSettings:
    learning_rate: float = 2e-3
    entropy_coef: float = 0.01
    temperature: float = 1.0
    scale_by_std: bool = True
    reward: str = "exact"
    max_grad_norm: float = 1.0


@dataclasses.dataclass(frozen=True)
class GRPOExperimentConfig:
    steps: int = 200
    seed: int = 0
    stall_windows: int = 200  # from scratch, most early groups carry no signal
    batch_groups: int = 16
    groups_per_generation: int = 16
    group_size: int = 8
    eval_every: int = 10
    checkpoint_every: int = 50
    target: float = 0.5
    task: TaskConfig = dataclasses.field(default_factory=TaskConfig)
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    grpo: GRPOSettings = dataclasses.field(default_factory=GRPOSettings)
    curriculum: dict = dataclasses.field(default_factory=lambda: dict(FRONTIER_CURRICULUM))


def family_spec(task: TaskConfig):
    """The task family's spec from the config."""
    if task.family == "reversal":
        return T.ReversalSpec(num_symbols=task.num_symbols, num_levels=task.num_levels)
    if task.family == "copy":
        return T.CopySpec(num_symbols=task.num_symbols, num_levels=task.num_levels)
    if task.family == "addition":
        return T.AdditionSpec(num_levels=task.num_levels)
    raise ValueError(f"task.family must be reversal, copy or addition, got {task.family!r}")


def make_solver(config: GRPOExperimentConfig, spec) -> Any:
    model = rl.TransformerConfig(
        T.VOCAB_SIZE,
        width=config.model.width,
        depth=config.model.depth,
        heads=config.model.heads,
        max_len=spec.prompt_width + spec.answer_width,
        positions=config.model.positions,
    )
    g = config.grpo
    grpo = rl.GRPOConfig(
        learning_rate=g.learning_rate,
        entropy_coef=g.entropy_coef,
        temperature=g.temperature,
        scale_by_std=g.scale_by_std,
        reward=g.reward,
        max_grad_norm=g.max_grad_norm,
    )
    return rl.grpo_solver(
        model, grpo, max_new_tokens=spec.answer_width, output_tokens=spec.answer_tokens()
    )


def make_pools(config: GRPOExperimentConfig):
    """(spec, train TaskSet, held-out TaskSet): disjoint by key, the held-out set stratified
    over levels. The pools depend on ``seed``-independent data seed 0, so every arm and seed
    of a comparison trains and evaluates on the same tasks."""
    spec = family_spec(config.task)
    train, held_out = T.make_pools(
        jax.random.key(0),
        spec,
        train_per_level=config.task.train_per_level,
        held_out_per_level=config.task.held_out_per_level,
        held_out_frac=config.task.held_out_frac,
    )
    if config.task.balance_levels:
        train = balance_levels(train, config.task.train_per_level)
    return spec, train, held_out


def balance_levels(train: T.TaskSet, per_level: int) -> T.TaskSet:
    """Repeats the tasks of levels that have fewer than ``per_level`` (the 8 reversals of
    length 1, say) so every level holds ``per_level`` entries and uniform sampling over the
    pool is uniform over levels. A repeat is a separate pool entry (its own curriculum
    score), keyed by the task's content key mixed with its copy index, so keys stay unique;
    the content of every entry is still a training task, never a held-out one.
    """
    level = np.asarray(train.level)
    rows, copies = [], []
    for lv in np.unique(level):
        idx = np.flatnonzero(level == lv)
        reps = -(-per_level // len(idx))
        tiled = np.tile(idx, reps)[:per_level] if len(idx) < per_level else idx
        rows.append(tiled)
        copies.append(np.arange(len(tiled)) // len(idx))
    rows, copies = np.concatenate(rows), np.concatenate(copies).astype(np.uint32)
    out = T.take(train, jnp.asarray(rows))
    keys = np.asarray(out.key) ^ np.asarray(T.mix32(jnp.asarray(copies * np.uint32(0x9E3779B9))))
    keys = np.where(copies == 0, np.asarray(out.key), keys).astype(np.uint32)
    return out._replace(key=jnp.asarray(keys))


def build(config: GRPOExperimentConfig, mesh=None, curriculum: dict | None = None):
    """The engine for one run and its held-out set."""
    spec, train, held_out = make_pools(config)
    n = T.num_tasks(train)
    cur = cx.curriculum_from_config(curriculum or config.curriculum, n)
    env = Env(config.task.family, train, cur, group_size=config.group_size)
    engine = Engine(
        make_solver(config, spec),
        [env],
        EngineConfig(
            batch_groups=config.batch_groups,
            groups_per_generation=config.groups_per_generation,
            stall_windows=config.stall_windows,
            seed=config.seed,
        ),
        mesh=mesh,
    )
    return engine, held_out


def held_out_report(evaluate, state, held_out: T.TaskSet, num_levels: int) -> dict[str, float]:
    """Mean greedy exact match on the held-out set, overall and per level."""
    scores = evaluate(state.solver, held_out, jax.random.key(0))
    per_level = np.asarray(T.per_level_mean(scores, held_out.level, num_levels))
    out = {"eval/held_out_success": float(jnp.mean(scores))}
    for level, value in enumerate(per_level):
        if np.isfinite(value):
            out[f"eval/level_{level}"] = float(value)
    return out
