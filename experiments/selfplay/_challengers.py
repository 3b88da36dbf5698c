"""Challengers over the embedded task families, shared by the GRPO self-play scripts."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from curriculax import tasks as T
from curriculax.selfplay import (
    Challenger,
    InvalidTask,
    PureChallenger,
    bandit_challenger,
    bandit_spec,
    judged_direction,
    learned_challenger,
    learned_config,
    learned_spec,
    level_direction,
    pure_bandit_challenger,
    pure_bandit_spec,
)

# The study's arms that generate tasks: the old level rule, the level bandit, the random
# generator (the bandit with rate 0: levels uniform, the same generation budget) and the
# learned challenger (a generator policy trained on the judge's gain).
CHALLENGER_ARMS = ("self-play", "bandit", "random generator", "learned")


# The experiment keys only the main job reads (experiments/grpo.py), and what the GRPO self-play
# scripts read instead: a value set for one of them would be recorded but never act.
MAIN_JOB_ONLY = {
    "steps": "a run's budget is rounds x steps_per_round",
    "stall_windows": "the self-play engine keeps its own stall guard (EngineConfig's default)",
    "eval_rollouts": "the held-out set is evaluated once per round",
    "checkpoint_every": "a self-play run keeps no checkpoints",
    "target": "the main job's target; the script reports the held-out score itself",
    "stop_at_target": "a self-play run never stops early",
    "evidence": "it is the main job's study quoted with its result",
    "evidence_arm": "it is the main job's study quoted with its result",
    "evidence_best_of": "it is the main job's study quoted with its result",
    "curriculum": "the seed sampler is the top-level `sampler`",
    "task.eval_levels": "held-out exact match is over every held-out task",
    "task.distractors": "the self-play solver has no coin-flip reward (no distractors)",
    "task.distractor_p": "the self-play solver has no coin-flip reward (no distractors)",
    "task.labels": "no sampler reads category labels (the seed sampler is `sampler`)",
}


def refuse_unread(experiment, default, unread: dict[str, str]) -> None:
    """Refuses every key of ``unread`` that ``experiment`` sets to other than ``default``'s
    value (the script's own defaults): the script never reads it, and a value given would be
    recorded in its summary as if it had acted.

    Args:
      experiment: the run's :class:`~experiments._builders.GRPOExperimentConfig`.
      default: the script's default one.
      unread: dotted keys under ``experiment`` (``"task.level_mass"``), each with what the
        script reads instead (for the message).

    Raises:
      ValueError: naming each such key, its value and what the script reads instead.
    """
    given = []
    for key, instead in unread.items():
        value, base = experiment, default
        for part in key.split("."):
            value, base = getattr(value, part), getattr(base, part)
        if value != base:
            given.append(f"experiment.{key} = {value!r} ({instead})")
    if given:
        raise ValueError(f"not used by this script: {'; '.join(given)}; leave them out")


def _reversal_task(spec: T.ReversalSpec, level: int, digits: jax.Array) -> T.TaskSet:
    """One task (leaves without the task axis) of ``digits: i32[1, length(level)]``, padded to
    the pool's widths."""
    prompt, answer, answer_len = spec.encode(level, digits)
    task = T.TaskSet(
        prompt=prompt,
        prompt_len=jnp.array([prompt.shape[1]], jnp.int32),
        answer=answer,
        answer_len=answer_len,
        level=jnp.array([level], jnp.int32),
        key=T.content_key(prompt, answer),
    )
    task = T.pad_tasks(task, prompt_width=spec.prompt_width, answer_width=spec.answer_width)
    return jax.tree.map(lambda x: x[0], task)


def _validate_reversal(spec: T.ReversalSpec):
    def validate(payload):
        if not isinstance(payload, T.TaskSet):
            raise InvalidTask(f"not a TaskSet: {type(payload).__name__}")
        if payload.prompt.shape != (spec.prompt_width,):
            raise InvalidTask(f"prompt width {payload.prompt.shape}")
        return payload

    return validate


def sequence_challenger(spec: T.ReversalSpec, bandit: dict | None = None) -> Challenger:
    """A challenger over ``{"level": int}`` for the reversal/copy family ``spec``: each task is
    a random symbol sequence of the level's length (``spec.length(level)``).

    The payload is a one-task :class:`~curriculax.tasks.TaskSet` padded to the pool's widths;
    ``validate`` rejects levels outside the family and malformed payloads; ``propose`` moves the
    level by one as :func:`~curriculax.selfplay.level_direction` says, within the family.
    With ``bandit`` (keyword arguments of :func:`~curriculax.selfplay.bandit_challenger`, ``{}``
    for its defaults): each task's level is drawn by the level bandit instead (spec
    ``bandit_spec(spec.num_levels)``).
    """

    @functools.cache
    def builder(level: int):
        """One compiled task builder per level (the generator runs on the host per task)."""

        def build(key):
            digits = jax.random.randint(key, (1, spec.length(level)), 0, spec.num_symbols)
            return _reversal_task(spec, level, digits)

        return jax.jit(build)

    def generate_at(level, key):
        if not 0 <= level < spec.num_levels:
            return {"level": level}  # malformed on purpose: validate rejects it
        return jax.device_get(builder(level)(key))

    def generate(knob, key):
        return generate_at(int(knob["level"]), key)

    validate = _validate_reversal(spec)

    def propose(knob, report):
        level = int(knob["level"]) + level_direction(report)
        return {"level": min(max(level, 0), spec.num_levels - 1)}

    if bandit is not None:
        return bandit_challenger(generate_at, validate, lambda task: int(task.level), **bandit)
    return Challenger(generate, validate, propose)


def sequence_learned_challenger(spec: T.ReversalSpec, learned: dict | None = None):
    """``(challenger, initial spec)``: the learned challenger for the reversal/copy family
    ``spec``: its generator proposes a level and that level's symbols, and the payload is the
    task of those symbols (one :class:`~curriculax.tasks.TaskSet` row padded to the pool's
    widths, as :func:`sequence_challenger` builds).

    Args:
      spec: the family.
      learned: :class:`~curriculax.selfplay.LearnedConfig` keys (a config's ``learned`` table;
        the family's ``num_levels``, ``num_symbols`` and ``min_length`` are filled in).
    """
    cfg = learned_config(
        learned,
        where="learned",
        num_levels=spec.num_levels,
        num_symbols=spec.num_symbols,
        min_length=spec.min_length,
    )
    if (cfg.num_levels, cfg.num_symbols, cfg.min_length) != (
        spec.num_levels,
        spec.num_symbols,
        spec.min_length,
    ):
        raise ValueError(
            "learned: num_levels, num_symbols and min_length are the task family's "
            f"({spec.num_levels}, {spec.num_symbols}, {spec.min_length}); leave them out"
        )

    @functools.cache
    def builder(level: int):
        return jax.jit(lambda digits: _reversal_task(spec, level, digits))

    def build(level, tokens):
        return jax.device_get(builder(level)(jnp.asarray(tokens, jnp.int32)[None]))

    challenger = learned_challenger(
        build, _validate_reversal(spec), lambda task: int(task.key), cfg
    )
    return challenger, learned_spec(cfg)


def _reversal_at(spec: T.ReversalSpec):
    """``build_at(level i32[], key) -> TaskSet row``: what :func:`sequence_challenger`'s
    ``generate_at(int(level), key)`` builds, at a traced level (fixed shapes: every level's
    task is built from the same key and the level's one is picked; the family has a handful
    of levels, so this is cheap next to a solver step)."""

    def build_at(level, key):
        rows = [
            _reversal_task(
                spec, lv, jax.random.randint(key, (1, spec.length(lv)), 0, spec.num_symbols)
            )
            for lv in range(spec.num_levels)
        ]
        row = jax.tree.map(lambda *xs: jnp.stack(xs)[level], *rows)
        # the level asked for, not the clamped row's: validate refuses one outside the family
        return row._replace(level=jnp.asarray(level, row.level.dtype))

    return build_at


def pure_sequence_challenger(spec: T.ReversalSpec, bandit: dict | None = None) -> PureChallenger:
    """:func:`sequence_challenger` as a :class:`~curriculax.selfplay.PureChallenger` (pure
    JAX, for the compiled round loop :func:`~curriculax.selfplay.compiled_evolve`): the same
    tasks from the same keys (it draws like the host's one-task challenger, ``retry``).

    Without ``bandit``: the old level rule, spec ``{"level": i32[]}``; ``propose`` moves the
    level as :func:`~curriculax.selfplay.judged_direction` (the JAX
    :func:`~curriculax.selfplay.level_direction`) says, within the family. With ``bandit``
    (keyword arguments of :func:`~curriculax.selfplay.pure_bandit_challenger`; ``{"rate": 0}``
    is the random generator): spec ``pure_bandit_spec(spec.num_levels)``.
    """
    build_at = _reversal_at(spec)
    top = spec.num_levels - 1

    def validate(payloads):
        level = payloads.level
        return payloads, (level >= 0) & (level <= top)

    if bandit is not None:
        return pure_bandit_challenger(
            build_at, validate, lambda tasks: tasks.level, retry=True, **bandit
        )

    def generate(knob, keys):
        return jax.vmap(build_at, in_axes=(None, 0))(knob["level"], keys)

    def propose(knob, judged):
        return {"level": jnp.clip(knob["level"] + judged_direction(judged), 0, top)}

    return PureChallenger(generate, validate, propose, retry=True)


def check_start_level(start_level: int, spec: T.ReversalSpec) -> None:
    """Refuses a self-play ``start_level`` outside the family's levels (the host challenger
    would build no valid task at it, and a round would be lost)."""
    if not 0 <= start_level < spec.num_levels:
        raise ValueError(
            f"start_level = {start_level} is not a level of the task family (levels 0-"
            f"{spec.num_levels - 1}, experiment.task.num_levels = {spec.num_levels}); set "
            "start_level below it"
        )


def pure_arm_challenger(arm: str, spec: T.ReversalSpec, start_level: int):
    """``(pure challenger, initial spec)`` of a study arm for the compiled round loop
    (``(None, None)`` for no challenger): :func:`arm_challenger`'s challengers in pure JAX.
    The learned arm has none (its generator trains on the host), so it raises."""
    if arm == "self-play":
        check_start_level(start_level, spec)
        return pure_sequence_challenger(spec), {"level": jnp.int32(start_level)}
    if arm == "bandit":
        return pure_sequence_challenger(spec, bandit={}), pure_bandit_spec(spec.num_levels)
    if arm == "random generator":
        return (
            pure_sequence_challenger(spec, bandit={"rate": 0.0}),
            pure_bandit_spec(spec.num_levels),
        )
    if arm == "no challenger":
        return None, None
    if arm == "learned":
        raise ValueError(
            "arm 'learned' runs on the host path only (its generator trains on the host); "
            "run it without --compiled"
        )
    raise ValueError(f"unknown arm {arm!r}; arms are {('no challenger', *CHALLENGER_ARMS)}")


def evolve_arm(config, seed_tasks, *, arm: str, key: int, wrap=None, **options):
    """One arm of the GRPO self-play scripts: :func:`~curriculax.selfplay.curriculum_evolve`
    with the main job's solver and batch shape (``config.experiment``) and the rounds of
    ``config``, and the challenger of ``arm`` (:func:`arm_challenger`).

    Args:
      config: a config with ``experiment`` (:class:`~experiments._builders.GRPOExperimentConfig`),
        ``rounds``, ``steps_per_round``, ``generated_per_round``, ``frontier_share``,
        ``start_level`` and ``sampler`` (``study.StudyConfig``, ``grpo_selfplay.SelfPlayConfig``).
      seed_tasks: the seed pool (a :class:`~curriculax.tasks.TaskSet`).
      arm: ``"no challenger"`` or one of :data:`CHALLENGER_ARMS`.
      key: the run's seed.
      wrap: applied to the arm's challenger, if it has one (the study times its calls).
      **options: the rest of ``curriculum_evolve``'s keywords (``held_out_tasks``,
        ``held_out_frac``, ``max_attempts``, ``on_round``, ``mesh``, ...).

    Returns:
      The :class:`~curriculax.selfplay.EvolutionResult`.
    """
    from curriculax.selfplay import curriculum_evolve
    from experiments._builders import family_spec, make_solver

    exp = config.experiment
    spec = family_spec(exp.task)
    challenger, start = arm_challenger(
        arm, spec, config.start_level, getattr(config, "learned", None)
    )
    if challenger is not None and wrap is not None:
        challenger = wrap(challenger)
    return curriculum_evolve(
        make_solver(exp, spec),
        seed_tasks,
        challenger=challenger,
        spec=start,
        rounds=config.rounds,
        steps_per_round=config.steps_per_round,
        generated_per_round=config.generated_per_round,
        frontier_share=config.frontier_share,
        sampler={"type": config.sampler},
        key=key,
        group_size=exp.group_size,
        batch_groups=exp.batch_groups,
        groups_per_generation=exp.groups_per_generation,
        **options,
    )


def arm_challenger(arm: str, spec: T.ReversalSpec, start_level: int, learned: dict | None = None):
    """``(challenger, initial spec)`` of a study arm (``(None, None)`` for no challenger);
    ``learned``: the learned arm's :class:`~curriculax.selfplay.LearnedConfig` keys."""
    if arm == "self-play":
        check_start_level(start_level, spec)
        return sequence_challenger(spec), {"level": start_level}
    if arm == "bandit":
        return sequence_challenger(spec, bandit={}), bandit_spec(spec.num_levels)
    if arm == "random generator":
        return sequence_challenger(spec, bandit={"rate": 0.0}), bandit_spec(spec.num_levels)
    if arm == "learned":
        return sequence_learned_challenger(spec, learned)
    if arm == "no challenger":
        return None, None
    raise ValueError(f"unknown arm {arm!r}; arms are {('no challenger', *CHALLENGER_ARMS)}")
