"""A level bandit: the challenger's level drawn from a distribution the judge's verdicts update.

The hand-written level controller (:func:`~curriculax.selfplay.level_direction`) moves one level
up or down per round, and a frontier it cannot read gets it stuck: with fresh tasks at level
2 all stuck it drops to 1, where tasks are easy, so it rises to 2 again, and it can alternate
between an easy level and a stuck one for a whole run (two of eight seeds of the self-play
study did, 2026-12-01). The bandit keeps a value per level, the running mean of the judge's
gain (latest - baseline pass rate) on tasks generated at that level, and draws each task's
level from ``softmax(values / temperature)`` mixed with a uniform floor. Tasks the solver
already passes are dropped before they are judged, so an easy level earns nothing and its
value decays to 0; a level where the solver gains is drawn more, whatever the round before
did. With ``rate=0`` the values never move and every level is drawn uniformly: the random
generator with the same generation budget, the control a bandit's gain is measured against.

The value arithmetic is pure JAX (fixed shapes, explicit keys), so it can run inside a
compiled round; :func:`bandit_challenger` wraps it as a host :class:`Challenger`, and
:func:`pure_bandit_challenger` as a :class:`~curriculax.selfplay.PureChallenger` for the
compiled round loop (the same draws per key).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from curriculax.selfplay._challenger import Challenger
from curriculax.selfplay._compiled import PureChallenger


def level_probs(values: jax.Array, temperature: float, floor: float) -> jax.Array:
    """``f32[L]``: the draw distribution, ``(1 - floor) * softmax(values / temperature) +
    floor / L``.

    Args:
      values: ``f32[L]`` per-level values (mean judged gain).
      temperature: softmax temperature (in units of gain).
      floor: probability mass spread uniformly over all levels (exploration).
    """
    values = jnp.asarray(values, jnp.float32)
    p = jax.nn.softmax(values / temperature)
    return (1.0 - floor) * p + floor / values.shape[0]


def draw_levels(
    values: jax.Array, key: jax.Array, count: int, temperature: float, floor: float
) -> jax.Array:
    """``i32[count]``: levels drawn i.i.d. from :func:`level_probs`."""
    logits = jnp.log(level_probs(values, temperature, floor))
    return jax.random.categorical(key, logits, shape=(count,)).astype(jnp.int32)


def update_values(
    values: jax.Array, levels: jax.Array, gains: jax.Array, mask: jax.Array, rate: float
) -> jax.Array:
    """``f32[L]``: values after one round of verdicts.

    A level with judged tasks moves ``rate`` of the way to their mean gain; a level with
    none (not drawn, or every task dropped as easy) decays by ``1 - rate`` toward 0, so a
    level the solver has mastered stops being drawn.

    Args:
      values: ``f32[L]``.
      levels: ``i32[M]`` level of each judged task (clipped into ``[0, L)``).
      gains: ``f32[M]`` its gain.
      mask: ``bool[M]`` which entries are real (fixed ``M`` for compiled callers).
      rate: step size in ``[0, 1]``; 0 keeps the values (the random generator).
    """
    values = jnp.asarray(values, jnp.float32)
    num = values.shape[0]
    levels = jnp.clip(jnp.asarray(levels, jnp.int32), 0, num - 1)
    mask = jnp.asarray(mask, bool)
    sums = jax.ops.segment_sum(jnp.where(mask, gains, 0.0), levels, num)
    counts = jax.ops.segment_sum(mask.astype(jnp.float32), levels, num)
    target = jnp.where(counts > 0, sums / jnp.maximum(counts, 1.0), 0.0)
    return (1.0 - rate) * values + rate * target


def bandit_spec(num_levels: int) -> dict:
    """The initial spec of :func:`bandit_challenger`: all values 0 (levels drawn uniformly).

    ``{"level": int, "values": tuple[float, ...]}``; ``level`` is the most likely level
    (for tables and records; the draw uses ``values``).
    """
    return {"level": 0, "values": (0.0,) * num_levels}


def _check(temperature: float, floor: float, rate: float) -> None:
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if not 0.0 <= floor <= 1.0:
        raise ValueError(f"floor must be in [0, 1], got {floor}")
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate must be in [0, 1], got {rate}")


def bandit_challenger(
    generate_at: Callable[[int, jax.Array], Any],
    validate: Callable[[Any], Any],
    level_of: Callable[[Any], int],
    *,
    temperature: float = 0.05,
    floor: float = 0.1,
    rate: float = 0.5,
) -> Challenger:
    """A :class:`Challenger` over ``spec = {"level", "values"}`` (see :func:`bandit_spec`).

    ``generate(spec, key)`` draws a level from the spec's values and calls
    ``generate_at(level, key')``; ``propose(spec, report)`` credits each of the report's
    :attr:`~curriculax.selfplay.RoundReport.judged` verdicts to ``level_of(verdict.task)``
    and updates the values (:func:`update_values`).

    Args:
      generate_at: ``(level, key) -> payload``: one task at an integer level.
      validate: the validity gate (as :attr:`Challenger.validate`).
      level_of: ``(task) -> int``: the level a judged task was generated at (the task as
        the report holds it: leaves as Python lists/scalars).
      temperature: softmax temperature, in units of gain (0.05: a level whose tasks gain
        0.1 more is drawn e^2 ~ 7x as often).
      floor: probability mass drawn uniformly, so every level keeps being tried.
      rate: value step size per round; 0 gives the random generator (uniform levels).
    """
    _check(temperature, floor, rate)
    draw = jax.jit(draw_levels, static_argnums=(2, 3, 4))
    update = jax.jit(update_values, static_argnums=(4,))

    def generate(spec, key):
        k_level, k_task = jax.random.split(key)
        values = jnp.asarray(spec["values"], jnp.float32)
        level = int(draw(values, k_level, 1, temperature, floor)[0])
        return generate_at(level, k_task)

    def propose(spec, report):
        judged = report.judged
        m = max(len(judged), 1)
        levels = np.zeros(m, np.int32)
        gains = np.zeros(m, np.float32)
        mask = np.zeros(m, bool)
        for i, v in enumerate(judged):
            levels[i], gains[i], mask[i] = level_of(v.task), v.gain, True
        values = update(jnp.asarray(spec["values"], jnp.float32), levels, gains, mask, rate)
        probs = np.asarray(level_probs(values, temperature, floor))
        return {**spec, "level": int(np.argmax(probs)), "values": tuple(map(float, values))}

    return Challenger(generate, validate, propose)


def pure_bandit_spec(num_levels: int) -> dict:
    """The initial spec of :func:`pure_bandit_challenger`: ``{"level": i32[], "values":
    f32[L]}``, values 0 (levels drawn uniformly)."""
    return {"level": jnp.int32(0), "values": jnp.zeros((num_levels,), jnp.float32)}


def pure_bandit_challenger(
    build_at: Callable[[jax.Array, jax.Array], Any],
    validate: Callable[[Any], Any],
    level_of: Callable[[Any], jax.Array],
    *,
    temperature: float = 0.05,
    floor: float = 0.1,
    rate: float = 0.5,
    retry: bool = False,
) -> PureChallenger:
    """:func:`bandit_challenger` as a :class:`~curriculax.selfplay.PureChallenger` (pure JAX,
    for :func:`~curriculax.selfplay.compiled_evolve`), spec :func:`pure_bandit_spec`.

    Each key draws like ``bandit_challenger``'s ``generate``: ``k_level, k_task =
    split(key)``, a level from the values, then ``build_at(level, k_task)``; so with
    ``build_at(level, key)`` computing what ``generate_at(int(level), key)`` returns, the two
    draw the same tasks from the same keys. ``propose`` credits each judged task's gain to
    ``level_of(tasks)`` (:func:`update_values`) and sets ``level`` to the most likely one.

    Args:
      build_at: ``(level i32[], key) -> payload``: one task at a traced level.
      validate: ``(payloads) -> (tasks, valid bool[P])``.
      level_of: ``(tasks) -> i32[F]``: the levels of the judged tasks (a batch).
      temperature, floor, rate: as :func:`bandit_challenger` (``rate=0``: the random
        generator).
      retry: the host's one-task-per-key draw (:attr:`PureChallenger.retry`), as
        ``bandit_challenger`` (a one-task challenger) does on the host path.
    """
    _check(temperature, floor, rate)

    def one(values, key):
        k_level, k_task = jax.random.split(key)
        level = draw_levels(values, k_level, 1, temperature, floor)[0]
        return build_at(level, k_task)

    def generate(spec, keys):
        return jax.vmap(one, in_axes=(None, 0))(spec["values"], keys)

    def propose(spec, judged):
        levels = level_of(judged.tasks)
        values = update_values(spec["values"], levels, judged.gain, judged.mask, rate)
        level = jnp.argmax(level_probs(values, temperature, floor)).astype(jnp.int32)
        return {"level": level, "values": values}

    return PureChallenger(generate, validate, propose, retry)
