"""Challengers over the embedded task families, shared by the GRPO self-play scripts."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from curriculax import tasks as T
from curriculax.selfplay import Challenger, InvalidTask, level_direction


def sequence_challenger(spec: T.ReversalSpec) -> Challenger:
    """A challenger over ``{"level": int}`` for the reversal/copy family ``spec``: each task is
    a random symbol sequence of the level's length (``spec.length(level)``).

    The payload is a one-task :class:`~curriculax.tasks.TaskSet` padded to the pool's widths;
    ``validate`` rejects levels outside the family and malformed payloads; ``propose`` moves the
    level by one as :func:`~curriculax.selfplay.level_direction` says, within the family.
    """

    @functools.cache
    def builder(level: int):
        """One compiled task builder per level (the generator runs on the host per task)."""

        def build(key):
            digits = jax.random.randint(key, (1, spec.length(level)), 0, spec.num_symbols)
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

        return jax.jit(build)

    def generate(knob, key):
        level = int(knob["level"])
        if not 0 <= level < spec.num_levels:
            return {"level": level}  # malformed on purpose: validate rejects it
        return jax.device_get(builder(level)(key))

    def validate(payload):
        if not isinstance(payload, T.TaskSet):
            raise InvalidTask(f"not a TaskSet: {type(payload).__name__}")
        if payload.prompt.shape != (spec.prompt_width,):
            raise InvalidTask(f"prompt width {payload.prompt.shape}")
        return payload

    def propose(knob, report):
        level = int(knob["level"]) + level_direction(report)
        return {"level": min(max(level, 0), spec.num_levels - 1)}

    return Challenger(generate, validate, propose)


def evolve_arm(config, seed_tasks, *, self_play: bool, key: int, **options):
    """One arm of the GRPO self-play scripts: :func:`~curriculax.selfplay.curriculum_evolve`
    with the main job's solver and batch shape (``config.experiment``) and the rounds of
    ``config``, the :func:`sequence_challenger` starting at ``config.start_level`` when
    ``self_play``, none otherwise.

    Args:
      config: a config with ``experiment`` (:class:`~experiments._builders.GRPOExperimentConfig`),
        ``rounds``, ``steps_per_round``, ``generated_per_round``, ``frontier_share``,
        ``start_level`` and ``sampler`` (``study.StudyConfig``, ``grpo_selfplay.SelfPlayConfig``).
      seed_tasks: the seed pool (a :class:`~curriculax.tasks.TaskSet`).
      self_play: with the challenger (the "self-play" arm) or without ("no challenger").
      key: the run's seed.
      **options: the rest of ``curriculum_evolve``'s keywords (``held_out_tasks``,
        ``held_out_frac``, ``max_attempts``, ``on_round``, ``mesh``, ...).

    Returns:
      The :class:`~curriculax.selfplay.EvolutionResult`.
    """
    from curriculax.selfplay import curriculum_evolve
    from experiments._builders import family_spec, make_solver

    exp = config.experiment
    spec = family_spec(exp.task)
    challenger = sequence_challenger(spec) if self_play else None
    return curriculum_evolve(
        make_solver(exp, spec),
        seed_tasks,
        challenger=challenger,
        spec={"level": config.start_level} if challenger else None,
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
