"""A deterministic toy for self-play: a solver with a capability cap and a level challenger.

The solver's capability is one number, the cap. A task has a difficulty ``level``; a rollout
succeeds with probability ``sigmoid(sharpness * (cap + 0.5 - level))``: tasks at or below the
cap are mostly solved, tasks two levels above almost never. Training on a group raises the
cap in proportion to the group's learning signal (mean absolute advantage) when the task
sits just above the cap (``cap <= level <= cap + reach``): easy tasks teach nothing, tasks far
above the cap produce no signal. The challenger generates tasks around ``spec["level"]`` and
moves the level by the measured learnability: up when generated tasks get learned (r0 > 0),
down when they only get stuck.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import _counters
from curriculax.credit import group_signal, grpo_advantages, per_token
from curriculax.engine._solver import Rollouts, Solver, TrainBatch
from curriculax.selfplay._bandit import bandit_challenger, pure_bandit_challenger
from curriculax.selfplay._bandit import pure_bandit_spec as _pure_bandit_spec
from curriculax.selfplay._challenger import Challenger, InvalidTask, level_direction


class CapState(NamedTuple):
    """State of :func:`capped_solver`: ``cap: f32[]`` and ``updates: i32[]``."""

    cap: jax.Array
    updates: jax.Array


def level_tasks(levels: int = 8, per_level: int = 40) -> dict[str, jax.Array]:
    """Seed tasks: ``{"level": f32[N], "variant": i32[N]}`` for levels ``0..levels-1``."""
    level = np.repeat(np.arange(levels, dtype=np.float32), per_level)
    variant = np.tile(np.arange(per_level, dtype=np.int32), levels)
    return {"level": jnp.asarray(level), "variant": jnp.asarray(variant)}


def capped_solver(
    *,
    initial_cap: float = 1.0,
    sharpness: float = 3.0,
    learning_rate: float = 0.5,
    reach: float = 1.5,
) -> Solver:
    """The toy solver (``learning_rate=0``: a solver that never learns)."""

    def success(cap, level):
        return jax.nn.sigmoid(sharpness * (cap + 0.5 - level))

    def init(key):
        del key
        return CapState(jnp.float32(initial_cap), _counters.zero())

    def rollout(state, tasks, key, group_size):
        level = tasks["level"]
        g = level.shape[0]
        p = success(state.cap, level)
        rewards = jax.random.bernoulli(key, p[:, None], (g, group_size)).astype(jnp.float32)
        valid = jnp.ones((g, group_size), bool)
        data = {"level": jnp.broadcast_to(level[:, None], (g, group_size))}
        return Rollouts(rewards, valid, valid[:, :, None], data)

    def credit(rollouts):
        adv = grpo_advantages(rollouts.rewards, rollouts.valid, scale_by_std=False)
        return per_token(adv, rollouts.token_mask, rollouts.valid)

    def update(state, batch: TrainBatch, key):
        del key
        signal = group_signal(batch.advantages, batch.rollouts.token_mask, batch.rollouts.valid)
        level = batch.rollouts.data["level"][:, 0]
        useful = (level >= state.cap) & (level <= state.cap + reach)
        gain = learning_rate * jnp.mean(jnp.where(useful, signal, 0.0))
        cap = (state.cap + gain).astype(jnp.float32)
        return CapState(cap, _counters.add(state.updates, 1)), {"cap": cap, "gain": gain}

    def evaluate(state, tasks, key):
        del key
        return success(state.cap, tasks["level"])

    return Solver(init, rollout, credit, update, evaluate)


def _task_at(level: float, key: jax.Array) -> dict:
    """A payload ``{"level": f32[], "variant": i32[]}``, the level uniform in
    ``[level, level + 1)``."""
    k_level, k_variant = jax.random.split(key)
    level = level + float(jax.random.uniform(k_level))
    variant = int(jax.random.randint(k_variant, (), 0, 2**30))
    return {"level": np.float32(level), "variant": np.int32(variant)}


def _level_gate(max_level: float):
    def validate(payload):
        level = float(payload["level"])
        if not math.isfinite(level) or not 0.0 <= level <= max_level:
            raise InvalidTask(f"level {level} outside [0, {max_level}]")
        return payload

    return validate


def level_challenger(*, step_up: float = 1.0, step_down: float = 0.5, max_level: float = 64.0):
    """A challenger over ``spec = {"level": float}``.

    ``generate`` draws a level uniformly in ``[spec.level, spec.level + 1)`` (a payload
    ``{"level": f32[], "variant": i32[]}``); ``validate`` rejects non-finite or out-of-range
    levels; ``propose`` raises the level by ``step_up`` or lowers it by ``step_down`` as
    :func:`~curriculax.selfplay.level_direction` says.
    """

    def generate(spec, key):
        return _task_at(float(spec["level"]), key)

    validate = _level_gate(max_level)

    def propose(spec, report):
        level = float(spec["level"])
        direction = level_direction(report)
        if direction > 0:
            level += step_up
        elif direction < 0:
            level = max(0.0, level - step_down)
        return {**spec, "level": level}

    return Challenger(generate, validate, propose)


def level_bandit(*, max_level: int = 12, **bandit) -> Challenger:
    """A :func:`~curriculax.selfplay.bandit_challenger` over the toy's integer levels
    ``0..max_level-1`` (a task at level ``l`` has a difficulty in ``[l, l + 1)``); spec
    ``bandit_spec(max_level)``. ``bandit`` goes to ``bandit_challenger`` (``rate=0``: the
    random generator).
    """
    return bandit_challenger(
        lambda level, key: _task_at(float(level), key),
        _level_gate(float(max_level)),
        lambda task: int(task["level"]),
        **bandit,
    )


def learned_level_challenger(cfg) -> Challenger:
    """A :func:`~curriculax.selfplay.learned_challenger` over the toy's integer levels
    ``0..cfg.num_levels-1`` (spec ``learned_spec(cfg)``): a proposal's symbols, read as a
    base-``num_symbols`` number ``code``, give the variant and the difficulty's fraction, so a
    task at level ``l`` has difficulty ``l + code / num_symbols ** length`` in ``[l, l + 1)``
    and equal proposals are equal tasks.
    """
    from curriculax.selfplay._learned import learned_challenger

    base = cfg.num_symbols

    def build(level, tokens):
        code = int(sum(int(t) * base**i for i, t in enumerate(tokens)))
        frac = code / base ** len(tokens)
        return {"level": np.float32(level + frac), "variant": np.int32(code % 2**31)}

    def key_of(task):
        # floor(level) and the variant fix the task (the fraction is the variant's).
        level = math.floor(float(np.asarray(task["level"])))
        return (level * 1_000_003 + int(np.asarray(task["variant"]))) % 2**32

    return learned_challenger(build, _level_gate(float(cfg.num_levels)), key_of, cfg)


def pure_level_bandit(
    *, max_level: int = 12, temperature: float = 0.05, floor: float = 0.1, rate: float = 0.5
):
    """:func:`level_bandit` as a :class:`~curriculax.selfplay.PureChallenger` (pure JAX, for
    the compiled round loop): spec ``{"level": i32[], "values": f32[max_level]}``, the same
    draws per key as :func:`level_bandit` up to the vectorized draw (one try per slot)."""

    def build_at(level, key):
        k_l, k_v = jax.random.split(key)
        return {
            "level": level.astype(jnp.float32) + jax.random.uniform(k_l),
            "variant": jax.random.randint(k_v, (), 0, 2**30),
        }

    def validate(payloads):
        level = payloads["level"]
        return payloads, jnp.isfinite(level) & (level >= 0.0) & (level <= max_level)

    return pure_bandit_challenger(
        build_at,
        validate,
        lambda tasks: jnp.floor(tasks["level"]).astype(jnp.int32),
        temperature=temperature,
        floor=floor,
        rate=rate,
    )


def pure_bandit_spec(max_level: int = 12) -> dict:
    """The initial spec of :func:`pure_level_bandit` (values 0: levels uniform)."""
    return _pure_bandit_spec(max_level)
