"""The GRPO experiments' configs and builders, shared by every script that trains the
embedded policy (the main job, the comparison, GRPO self-play, the train-step benchmark).

No script imports another script: what they share lives here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import curriculax as cx
from curriculax import rl
from curriculax import tasks as T
from curriculax._config import expand_preset
from curriculax.engine import Engine, EngineConfig, Env
from experiments._base import check_init, load_base

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


LABELS = ("levels", "none", "levels_hide_noise")


def check_labels(labels) -> None:
    """Raises a ValueError naming what is wrong with a ``task.labels`` value."""
    if isinstance(labels, str):
        if labels not in LABELS:
            raise ValueError(
                f"task.labels must be one of {list(LABELS)} or a table {{noise = q}}, got "
                f"{labels!r}"
            )
        return
    if not isinstance(labels, dict) or "noise" not in labels or set(labels) - {"noise", "seed"}:
        raise ValueError(
            f"task.labels as a table takes 'noise' (a probability) and optionally 'seed', got "
            f"{labels!r}"
        )
    q = labels["noise"]
    if isinstance(q, bool) or not isinstance(q, int | float) or not 0.0 <= q <= 1.0:
        raise ValueError(f"task.labels.noise must be a probability in [0, 1], got {q!r}")
    seed = labels.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(
            f"task.labels.seed must be an int in [0, 2**32) (the seed of the label draw), got "
            f"{seed!r}"
        )


def shares_to_counts(shares: np.ndarray, total: int) -> np.ndarray:
    """``i64[L]`` non-negative counts summing to ``total`` in proportion to ``shares``
    (largest remainders; a share of 0 always gets 0)."""
    shares = np.asarray(shares, np.float64)
    exact = shares / shares.sum() * total
    counts = np.floor(exact).astype(np.int64)
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[: total - counts.sum()]] += 1
    return counts


@dataclasses.dataclass(frozen=True)
class TaskConfig:
    """The task family and the training pool's composition.

    The pool holds ``pool_size`` entries split over the levels in proportion to
    ``level_mass`` (one share per level; a level with mass 0 is left out). A level gets
    distinct tasks for its entries where its task space allows, and repeats its tasks in turn
    where it does not (the 4 reversals of length 1, say), so uniform sampling over the pool
    samples levels by their mass. ``distractors`` is the share of entries that are coin-flip
    tasks: prompts of another family (copy for reversal, reversal for copy) whose reward is 1
    with probability ``distractor_p`` whatever the answer, spread over the levels like the real
    tasks. They sit in their own category (level index ``num_levels``) and never in the
    held-out set.

    ``labels`` is what the samplers are told about each task's category (see
    :func:`sampler_categories`): ``"levels"`` (the true level, coin flips their own), ``"none"``
    (one category for the whole pool, as in sets without difficulty labels),
    ``"levels_hide_noise"`` (every entry the level it was built at, coin flips included: the
    labels do not single out the noise, as a data set's difficulty labels would not), or
    ``{noise = q}`` (each distinct task's label replaced, with probability ``q``, by a category
    drawn uniformly from the pool's; ``seed``, default 0, fixes the draw, so every arm and seed
    of a study sees the same labels). Tables and plots still report the true levels.

    The held-out set holds ``held_out_per_level`` tasks of every level in the pool (none of
    them in any training pool); the study's target is measured on ``eval_levels`` (default:
    every level in the pool).
    """

    family: str = "reversal"  # reversal | copy | addition
    num_levels: int = 6
    num_symbols: int = 4
    train_per_level: int = 64  # pool entries per level when pool_size is 0
    held_out_per_level: int = 32
    held_out_frac: float = 0.2
    level_mass: tuple[float, ...] = ()  # share of the pool per level; () = equal shares
    pool_size: int = 0  # entries in the pool; 0 = train_per_level x levels with mass
    eval_levels: tuple[int, ...] = ()  # levels of the held-out target; () = every pool level
    distractors: float = 0.0  # share of the pool that is coin-flip tasks
    distractor_p: float = 0.5  # P(reward 1) of a coin-flip task, whatever the answer
    # what samplers see: "levels" | "none" | "levels_hide_noise" | {noise = q, seed = s}
    labels: str | dict = "levels"

    def __post_init__(self):
        if self.level_mass and len(self.level_mass) != self.num_levels:
            raise ValueError(
                f"task.level_mass has {len(self.level_mass)} entries but task.num_levels is "
                f"{self.num_levels}; give one share per level"
            )
        if any(not (0 <= m < math.inf) for m in self.level_mass) or (
            self.level_mass and not 0 < sum(self.level_mass) < math.inf
        ):
            raise ValueError(
                f"task.level_mass must be finite shares >= 0 with a positive, finite sum, got "
                f"{self.level_mass}"
            )
        bad = [lv for lv in self.eval_levels if lv not in self.pool_levels]
        if bad:
            raise ValueError(
                f"task.eval_levels {bad} are not levels of the pool {list(self.pool_levels)} "
                "(a level with mass 0 has no tasks)"
            )
        if not 0.0 <= self.distractors < 1.0:
            raise ValueError(f"task.distractors must be a share in [0, 1), got {self.distractors}")
        if not 0.0 <= self.distractor_p <= 1.0:
            raise ValueError(f"task.distractor_p must be in [0, 1], got {self.distractor_p}")
        if self.distractors and self.family == "addition":
            raise ValueError("task.distractors needs a symbol family (reversal or copy)")
        if self.pool_size < 0:
            raise ValueError(f"task.pool_size must be >= 0, got {self.pool_size}")
        if self.distractors and round(self.size * self.distractors) == 0:
            raise ValueError(
                f"task.distractors={self.distractors} gives no coin-flip entry in a pool of "
                f"{self.size} entries (the run would be the one without distractors); give a "
                f"share of at least {1 / self.size:.3g} (one entry), 0 for none, or a larger pool"
            )
        counts = self.level_counts
        if np.any(counts[list(self.pool_levels)] == 0):
            num_coin = self.size - int(counts.sum())
            size = (
                f"task.pool_size={self.pool_size}"
                if self.pool_size
                else f"task.train_per_level={self.train_per_level} x {len(self.pool_levels)} levels"
            )
            mass = list(self.level_mass) if self.level_mass else "equal shares"
            coin = (
                f" once task.distractors={self.distractors} took {num_coin} as coin flips"
                if num_coin
                else ""
            )
            raise ValueError(
                f"{size} leaves some level of task.level_mass ({mass}) no entry: "
                f"{int(counts.sum())} real entries{coin}, by level {counts.tolist()}; raise the "
                f"pool size{' or lower task.distractors' if num_coin else ''}"
            )
        check_labels(self.labels)

    @property
    def level_counts(self) -> np.ndarray:
        """``i64[num_levels]`` real (non-distractor) entries per level."""
        return shares_to_counts(self.mass, self.size - round(self.size * self.distractors))

    @property
    def mass(self) -> np.ndarray:
        """``f64[num_levels]`` the levels' shares of the real (non-distractor) tasks."""
        m = np.asarray(self.level_mass or (1.0,) * self.num_levels, np.float64)
        return m / m.sum()

    @property
    def pool_levels(self) -> tuple[int, ...]:
        """Levels with tasks in the pool."""
        return tuple(int(lv) for lv in np.flatnonzero(self.mass > 0))

    @property
    def target_levels(self) -> tuple[int, ...]:
        """Levels the held-out target is measured on."""
        return tuple(self.eval_levels) or self.pool_levels

    @property
    def size(self) -> int:
        """Entries in the training pool, distractors included."""
        return self.pool_size or self.train_per_level * len(self.pool_levels)


# The main job's pool: the hard-skew study's (experiments/configs/compare/hard-skew.toml): 80%
# of the entries on lengths 7-8, out of reach within the budget, 20% on lengths 1-3; 8 symbols
# with half of each level's tasks held out, so the target (lengths 2-3) is measured on 64
# held-out tasks.
HARD_SKEW = TaskConfig(
    num_levels=8,
    num_symbols=8,
    held_out_frac=0.5,
    level_mass=(1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 6.0, 6.0),
    pool_size=300,
    eval_levels=(1, 2),
)

# The main job's curriculum: what the hard-skew study recommends (see the README, "Which
# curriculum when"): a bandit over the pool's levels rewarded by mean |advantage|.
MAIN_CURRICULUM = {"sampler": {"type": "category_bandit", "reward": "advantage"}}


def experiment_model(**overrides) -> rl.TransformerConfig:
    """The experiments' policy shape: :class:`curriculax.rl.TransformerConfig` with
    ``positions="column"`` (one attention rule for every length) and the library's other
    defaults; ``vocab_size`` and ``max_len`` follow the task family (see
    :class:`GRPOExperimentConfig`)."""
    return rl.TransformerConfig(**{"vocab_size": T.VOCAB_SIZE, "positions": "column", **overrides})


def experiment_grpo(**overrides) -> rl.GRPOConfig:
    """The experiments' GRPO settings: :class:`curriculax.rl.GRPOConfig` with an entropy bonus
    of 0.01 (the library's default is 0): every study and the main job so far ran with 0.01."""
    return rl.GRPOConfig(**{"entropy_coef": 0.01, **overrides})


@dataclasses.dataclass(frozen=True)
class GRPOExperimentConfig:
    """One GRPO run: the main job's config, and each arm's experiment in a study.

    ``model`` and ``grpo`` are the library's own configs (:func:`experiment_model`,
    :func:`experiment_grpo` give the defaults); ``model.max_len`` is set from the task family
    (its prompt plus answer width), whatever the config says. ``init`` says where the policy
    starts: ``"scratch"`` or a base (built on first use and cached; ``experiments/_base.py``).

    ``eval_rollouts``, ``stop_at_target``, ``evidence``, ``evidence_arm`` and
    ``evidence_best_of`` are the main job's (a study evaluates on its own schedule and never
    stops early).
    """

    steps: int = 500  # one update per generation batch without a gate: 64,000 rollouts
    seed: int = 0
    stall_windows: int = 200  # from scratch, most early groups carry no signal
    batch_groups: int = 16
    groups_per_generation: int = 16
    group_size: int = 8
    eval_rollouts: int = 3200  # rollouts between held-out evaluations (main job)
    checkpoint_every: int = 50
    target: float = 0.5  # held-out exact match on task.target_levels
    stop_at_target: bool = True  # main job: stop at the first evaluation at the target
    evidence: str = "docs/compare/hard-skew.json"  # main job: the study quoted with the result
    evidence_arm: str = "category bandit (|advantage|)"  # ... and its arm for this curriculum
    # main job: the study whose best-against-best comparison (each arm at its best learning
    # rate) is quoted first, the fair one
    evidence_best_of: str = "docs/compare/lr-hard-skew.json"
    task: TaskConfig = dataclasses.field(default_factory=lambda: HARD_SKEW)
    model: rl.TransformerConfig = dataclasses.field(default_factory=experiment_model)
    grpo: rl.GRPOConfig = dataclasses.field(default_factory=experiment_grpo)
    curriculum: dict = dataclasses.field(default_factory=lambda: dict(MAIN_CURRICULUM))
    # Where the policy starts: "scratch" (random weights) or a pretrained base,
    # {base = "NAME"} or {base = {...}} (see experiments/_base.py).
    init: str | dict = "scratch"

    def __post_init__(self):
        check_init(self.init)
        if self.model.vocab_size != T.VOCAB_SIZE:
            raise ValueError(
                f"model.vocab_size is the tasks' vocabulary ({T.VOCAB_SIZE}); got "
                f"{self.model.vocab_size}: leave it out of the config"
            )
        # The position table covers exactly the family's prompt plus answer: its size is part
        # of the initial weights, so a run's init does not depend on a free max_len.
        spec = family_spec(self.task)
        width = spec.prompt_width + spec.answer_width
        if self.model.max_len != width:
            object.__setattr__(self, "model", dataclasses.replace(self.model, max_len=width))


def family_spec(task: TaskConfig):
    """The task family's spec from the config."""
    if task.family == "reversal":
        return T.ReversalSpec(num_symbols=task.num_symbols, num_levels=task.num_levels)
    if task.family == "copy":
        return T.CopySpec(num_symbols=task.num_symbols, num_levels=task.num_levels)
    if task.family == "addition":
        return T.AdditionSpec(num_levels=task.num_levels)
    raise ValueError(f"task.family must be reversal, copy or addition, got {task.family!r}")


# The main job's settings (``experiments/configs/grpo.toml`` spells every one out): the regime
# users are in, a policy warm-started from a base (built on first use and cached, as a user
# downloads a pretrained model once), on the hard-skew pool with its level labels, with the
# curriculum the base-hard-skew study recommends there, quoting that study. Studies and the
# other scripts start from ``GRPOExperimentConfig()`` (random weights) and say what they change.
MAIN_JOB = GRPOExperimentConfig(
    steps=300,  # one update per generation batch without a gate: 38,400 rollouts
    eval_rollouts=1280,
    target=0.9,  # the base starts near 0.66 on the target lengths
    init={"base": "short-lengths"},
    evidence="docs/compare/base-hard-skew.json",
    evidence_arm="category bandit (|advantage|), labels levels",
    evidence_best_of="docs/compare/lr-base-hard-skew.json",
)


def make_solver(config: GRPOExperimentConfig, spec) -> Any:
    """The GRPO solver of ``config``, starting from its base's params when ``config.init``
    names one (built on first use; see ``experiments/_base.py``)."""
    init_params = None if config.init == "scratch" else load_base(config)[0]
    return rl.grpo_solver(
        config.model,
        config.grpo,
        max_new_tokens=spec.answer_width,
        output_tokens=spec.answer_tokens(),
        init_params=init_params,
    )


class Pool(NamedTuple):
    """A study's training pool and held-out set.

    Attributes:
      spec: the family's spec.
      train: ``N`` pool entries (real tasks by level, then the distractors).
      held_out: held-out tasks of every pool level (disjoint from every training pool).
      category: ``i32[N]`` each entry's level, or ``num_levels`` for a coin-flip task.
      category_names: a name per category (``"level 0"``, ..., ``"coin flip"``).
      target: ``bool[M]`` the held-out tasks the target is measured on.
      built_level: ``i32[N]`` the level each entry was built at (a coin flip's too).
    """

    spec: Any
    train: T.TaskSet
    held_out: T.TaskSet
    category: np.ndarray
    category_names: tuple[str, ...]
    target: np.ndarray
    built_level: np.ndarray

    @property
    def num_categories(self) -> int:
        return len(self.category_names)

    @property
    def coin_level(self) -> int | None:
        """The level label of coin-flip tasks (None: the pool has none)."""
        n = len(self.category_names)
        return n - 1 if self.category_names[-1] == "coin flip" else None


class Built(NamedTuple):
    """What :func:`build` returns: the engine, its held-out set and pool, the rollout
    function the env uses (the solver's, with coin flips for distractors), and
    ``pass_probability(solver_state, tasks) -> f32[M]``, each task's exact probability of a
    reward of 1 in one rollout (:func:`make_pass_probability`; None when the reward is not
    exact match)."""

    engine: Engine
    held_out: T.TaskSet
    pool: Pool
    rollout: Callable
    pass_probability: Callable | None = None


def _distractor_spec(task: TaskConfig):
    other = "copy" if task.family == "reversal" else "reversal"
    return family_spec(dataclasses.replace(task, family=other))


def make_study_pool(config: GRPOExperimentConfig) -> Pool:
    """The training pool and held-out set of ``config.task`` (see :class:`TaskConfig`).

    Tasks come from data seed 0 (distractors from seed 1), independent of the run's seed, so
    every arm and seed of a study trains and evaluates on the same tasks.
    """
    task = config.task
    spec = family_spec(task)
    size = task.size
    counts = task.level_counts  # every pool level holds an entry (TaskConfig checks)
    num_coin = size - int(counts.sum())
    train, held_out = T.make_pools(
        jax.random.key(0),
        spec,
        train_per_level=int(counts.max()),
        held_out_per_level=task.held_out_per_level,
        held_out_frac=task.held_out_frac,
    )
    train = set_level_counts(train, counts)
    in_pool = np.isin(np.asarray(held_out.level), task.pool_levels)
    held_out = T.take(held_out, jnp.asarray(np.flatnonzero(in_pool)))
    category = np.asarray(train.level, np.int32)
    built_level = category
    names = tuple(f"level {lv}" for lv in range(task.num_levels))
    if num_coin:
        coin_counts = shares_to_counts(task.mass, num_coin)
        coin, coin_held = T.make_pools(
            jax.random.key(1),
            _distractor_spec(task),
            train_per_level=max(int(coin_counts.max()), 1),
            held_out_per_level=1,
            held_out_frac=task.held_out_frac,
        )
        # Distractors are never evaluated: a small level whose every task fell on the
        # held-out side takes its held-out task instead (levels with training tasks keep them).
        have = np.bincount(np.asarray(coin.level), minlength=coin_counts.size)
        empty = np.flatnonzero((have == 0) & (coin_counts > 0))
        if empty.size:
            spare = np.flatnonzero(np.isin(np.asarray(coin_held.level), empty))
            coin = T.concat_tasksets([coin, T.take(coin_held, jnp.asarray(spare))])
        coin = set_level_counts(coin, coin_counts)
        coin_level = np.asarray(coin.level, np.int32)
        coin = coin._replace(level=jnp.full_like(coin.level, task.num_levels))
        train = T.concat_tasksets([train, coin])
        T.check_unique_keys(train)
        category = np.concatenate([category, np.full(num_coin, task.num_levels, np.int32)])
        built_level = np.concatenate([built_level, coin_level])
        names = (*names, "coin flip")
    target = np.isin(np.asarray(held_out.level), task.target_levels)
    return Pool(spec, train, held_out, category, names, target, built_level)


def set_level_counts(train: T.TaskSet, counts: np.ndarray) -> T.TaskSet:
    """Keeps ``counts[l]`` entries of each level ``l`` (in level order): its first distinct
    tasks, repeated in turn when the level has fewer. A repeat is a separate pool entry (its
    own curriculum state), keyed by the task's content key mixed with its copy index, so keys
    stay unique; the content of every entry is still a training task, never a held-out one.
    """
    level = np.asarray(train.level)
    rows, copies = [], []
    for lv, count in enumerate(counts):
        idx = np.flatnonzero(level == lv)
        if count == 0:
            continue
        if idx.size == 0:
            raise ValueError(f"level {lv} has no training task to fill {count} entries")
        rows.append(np.resize(idx, count))
        copies.append(np.arange(count) // idx.size)
    rows, copies = np.concatenate(rows), np.concatenate(copies).astype(np.uint32)
    out = T.take(train, jnp.asarray(rows))
    keys = np.asarray(out.key) ^ np.asarray(T.mix32(jnp.asarray(copies * np.uint32(0x9E3779B9))))
    keys = np.where(copies == 0, np.asarray(out.key), keys).astype(np.uint32)
    return out._replace(key=jnp.asarray(keys))


def sampler_categories(pool: Pool, labels: str | dict = "levels") -> np.ndarray:
    """``i32[N]`` the category of each pool entry as the samplers are told it (host-side).

    Args:
      pool: the study's pool (its ``category`` holds the true levels, coin flips their own).
      labels: ``"levels"``: the true categories. ``"none"``: 0 for every entry (one
        category). ``"levels_hide_noise"``: each entry's built level (coin flips hide among
        the real levels). ``{"noise": q, "seed": s}``: each distinct task (copies of a task keep one
        label, as a data set labels a problem once) keeps its category with probability
        ``1 - q`` and otherwise gets one drawn uniformly from the categories present in the
        pool (which may be its own); seeded by ``s`` (default 0) only.

    For example, ``sampler_categories(pool, {"noise": 0.5})`` gives about half of the distinct
    tasks a category drawn at random (which may be their own).
    """
    check_labels(labels)
    category = np.asarray(pool.category, np.int32)
    if labels == "levels":
        return category
    if labels == "none":
        return np.zeros_like(category)
    if labels == "levels_hide_noise":
        return np.asarray(pool.built_level, np.int32)
    rng = np.random.default_rng(labels.get("seed", 0))
    first = T.distinct_tasks(pool.train)
    present = np.unique(category)
    n = category.size
    flip = rng.random(n) < labels["noise"]
    drawn = present[rng.integers(0, present.size, n)]
    per_first = np.where(flip, drawn, category)
    return per_first[first].astype(np.int32)


def coin_flip_rollout(rollout: Callable, coin_level: int, p: float) -> Callable:
    """Wraps a solver's ``rollout``: groups whose task has level ``coin_level`` get rewards
    drawn as coin flips (1 with probability ``p``), whatever the completions were. The engine
    takes a per-env rollout, so neither the task record, the verifier nor the solver changes.
    """

    def wrapped(solver_state, tasks: T.TaskSet, key: jax.Array, group_size: int):
        out = rollout(solver_state, tasks, key, group_size)
        flips = jax.random.bernoulli(jax.random.fold_in(key, 0xC011), p, out.rewards.shape)
        coin = (tasks.level == coin_level)[:, None]
        return out._replace(rewards=jnp.where(coin, flips.astype(out.rewards.dtype), out.rewards))

    return wrapped


def make_pass_probability(config: GRPOExperimentConfig, pool: Pool) -> Callable:
    """``pass_probability(solver_state, tasks) -> f32[M]``: each task's exact probability of
    a reward of 1 in one rollout of the run's policy (:func:`curriculax.rl.answer_probability`
    at the run's temperature and output tokens); a coin-flip task's is ``distractor_p``,
    whatever the policy. Pure, jit-able.

    Raises:
      ValueError: the run's reward is not ``"exact"`` (a partial-credit reward's mean has no
        teacher-forced closed form; sample rollouts instead).
    """
    if config.grpo.reward != "exact":
        raise ValueError(
            f"exact pass rates need grpo.reward = 'exact', got {config.grpo.reward!r}; "
            "measure by sampled rollouts instead (oracle exact = false)"
        )
    spec = pool.spec
    graphdef = rl.policy_graphdef(config.model)
    output_tokens = spec.answer_tokens()
    temperature = config.grpo.temperature
    coin_level, coin_p = pool.coin_level, config.task.distractor_p

    def pass_probability(solver_state, tasks: T.TaskSet) -> jax.Array:
        p = rl.answer_probability(
            graphdef,
            solver_state.params,
            tasks.prompt,
            tasks.answer,
            tasks.answer_len,
            temperature=temperature,
            output_tokens=output_tokens,
        )
        if coin_level is not None:
            p = jnp.where(tasks.level == coin_level, jnp.float32(coin_p), p)
        return p

    return pass_probability


def check_target(pool: Pool, task: TaskConfig) -> None:
    """Refuses a pool whose target levels (``task.target_levels``) hold no held-out task: the
    target score would be 0/0 (NaN), so a run could never reach its target.

    Raises:
      ValueError: naming the target levels, ``task.held_out_frac`` and the levels that do
        hold held-out tasks.
    """
    if not np.any(pool.target):
        held = sorted(set(np.asarray(pool.held_out.level).tolist()))
        raise ValueError(
            f"the target levels {list(task.target_levels)} (task.eval_levels) hold no "
            "held-out task, so the held-out target score would be 0/0 (a level whose task "
            f"space is too small for task.held_out_frac={task.held_out_frac} holds none "
            f"out); levels with held-out tasks: {held}; choose task.eval_levels among them or "
            "raise task.held_out_frac"
        )


def build(
    config: GRPOExperimentConfig,
    mesh=None,
    curriculum: dict | None = None,
    *,
    sampler: cx.TaskSampler | None = None,
) -> Built:
    """The engine for one run, with its held-out set and pool.

    Args:
      config: the experiment.
      mesh: optional device mesh.
      curriculum: a curriculum config (None: ``config.curriculum``; ``{}`` is the library's
        default curriculum, as :func:`curriculax.curriculum_from_config` reads it). The pool's
        ``categories`` (each entry's label as ``config.task.labels`` says, see
        :func:`sampler_categories`) and ``entry_task`` (:func:`curriculax.tasks.distinct_tasks`:
        copies of a task share per-task state) go to every sampler and gate factory that takes
        them (e.g. ``category_bandit``, ``learnability``, the ``reward_consistency`` gate), as
        config context.
      sampler: a ready sampler instead of the config's (its gates, a preset's included, still
        come from the config, built with the same context).

    Raises:
      ValueError: the target levels hold no held-out task (:func:`check_target`).
    """
    pool = make_study_pool(config)
    check_target(pool, config.task)
    n = T.num_tasks(pool.train)
    spec = config.curriculum if curriculum is None else curriculum
    context = {
        "categories": sampler_categories(pool, config.task.labels),
        "entry_task": T.distinct_tasks(pool.train),
    }
    if sampler is not None:
        gates = expand_preset(spec).get("gates", {})
        cur = cx.curriculum_from_config({"gates": gates}, n, **context)
        cur = cx.curriculum(sampler, dict(cur.gates))
    else:
        cur = cx.curriculum_from_config(spec, n, **context)
    solver = make_solver(config, pool.spec)
    rollout = solver.rollout
    if pool.coin_level is not None:
        rollout = coin_flip_rollout(rollout, pool.coin_level, config.task.distractor_p)
    env = Env(config.task.family, pool.train, cur, group_size=config.group_size, rollout=rollout)
    engine = Engine(
        solver,
        [env],
        EngineConfig(
            batch_groups=config.batch_groups,
            groups_per_generation=config.groups_per_generation,
            stall_windows=config.stall_windows,
            seed=config.seed,
        ),
        mesh=mesh,
    )
    exact = make_pass_probability(config, pool) if config.grpo.reward == "exact" else None
    return Built(engine, pool.held_out, pool, rollout, exact)


def held_out_report(
    evaluate, state, held_out: T.TaskSet, num_levels: int, target: np.ndarray | None = None
) -> dict[str, float]:
    """Mean greedy exact match on the held-out set: overall, on the ``target`` tasks
    (``bool[M]``, as ``eval/target``), and per level (levels without a held-out task are left
    out)."""
    scores = evaluate(state.solver, held_out, jax.random.key(0))
    per_level = np.asarray(T.per_level_mean(scores, held_out.level, num_levels))
    out = {"eval/held_out_success": float(jnp.mean(scores))}
    if target is not None:
        out["eval/target"] = float(np.mean(np.asarray(scores)[np.asarray(target)]))
    for level, value in enumerate(per_level):
        if np.isfinite(value):
            out[f"eval/level_{level}"] = float(value)
    return out
