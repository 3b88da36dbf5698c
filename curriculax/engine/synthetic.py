"""A cheap synthetic solver for tests and demos: thousands of groups per second.

Tasks carry a hidden difficulty in ``[0, 1]``. The solver's skill is a logit per difficulty
bin; a rollout succeeds with probability ``sigmoid(skill[bin])``. Credit is group-relative
(GRPO-style: reward minus the group's mean over valid rollouts). Training on a group raises
the skill at its bin, and a little at nearby bins, in proportion to the group's mean absolute
advantage: like policy-gradient learning, a group the solver always or never solves teaches
nothing, and learning is fastest at the frontier (success near 1/2). An update averages over
its ``B`` groups, so slots spent on zero-advantage groups are wasted, which is what a gate
can save.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from curriculax import _counters
from curriculax.credit import group_signal, grpo_advantages, per_token
from curriculax.engine._solver import Rollouts, Solver, TrainBatch


class SyntheticState(NamedTuple):
    """State of :func:`synthetic_solver`.

    Attributes:
      skill: ``f32[D]`` success logit per difficulty bin.
      updates: ``i32[]`` updates applied.
    """

    skill: jax.Array
    updates: jax.Array


def synthetic_tasks(num_tasks: int, *, seed: int = 0) -> dict[str, jax.Array]:
    """A pool of ``num_tasks`` tasks: ``{"difficulty": f32[N]}``, spread evenly over [0, 1]
    in a ``seed``-shuffled order."""
    difficulty = jnp.linspace(0.0, 1.0, num_tasks, dtype=jnp.float32)
    order = jax.random.permutation(jax.random.key(seed), num_tasks)
    return {"difficulty": difficulty[order]}


def synthetic_solver(
    *,
    bins: int = 20,
    initial_skill: float = 3.0,
    slope: float = 12.0,
    learning_rate: float = 2.0,
    spread: float = 1.0,
    failure_rate: float = 0.0,
    scale_by_std: bool = False,
) -> Solver:
    """The synthetic solver.

    Args:
      bins: difficulty bins ``D``.
      initial_skill: success logit at difficulty 0.
      slope: how fast the initial logit falls with difficulty (logit = initial - slope * d).
      learning_rate: skill gained per update by a batch of maximally informative groups.
      spread: generalisation to neighbouring bins (a Gaussian kernel width, in bins).
      failure_rate: probability that a rollout fails (``valid`` False), for tests.
      scale_by_std: divide advantages by the group's reward std (GRPO's default scaling).

    Returns:
      A :class:`~curriculax.engine.Solver` whose ``rollout`` takes tasks
      ``{"difficulty": f32[G]}``; ``evaluate`` returns the exact success probability.
    """
    centers = (jnp.arange(bins, dtype=jnp.float32) + 0.5) / bins

    def bin_of(difficulty):
        return jnp.clip((difficulty * bins).astype(jnp.int32), 0, bins - 1)

    def init(key):
        del key
        skill = (initial_skill - slope * centers).astype(jnp.float32)
        return SyntheticState(skill, _counters.zero())

    def rollout(state, tasks, key, group_size):
        b = bin_of(tasks["difficulty"])
        g = b.shape[0]
        k_r, k_f = jax.random.split(key)
        p = jax.nn.sigmoid(state.skill[b])
        rewards = jax.random.bernoulli(k_r, p[:, None], (g, group_size)).astype(jnp.float32)
        valid = ~jax.random.bernoulli(k_f, failure_rate, (g, group_size))
        data = {"bin": jnp.broadcast_to(b[:, None], (g, group_size))}
        return Rollouts(rewards, valid, valid[:, :, None], data)

    def credit(rollouts):
        adv = grpo_advantages(rollouts.rewards, rollouts.valid, scale_by_std=scale_by_std)
        return per_token(adv, rollouts.token_mask, rollouts.valid)

    def update(state, batch: TrainBatch, key):
        del key
        signal = group_signal(batch.advantages, batch.rollouts.token_mask, batch.rollouts.valid)
        b = batch.rollouts.data["bin"][:, 0]
        dist = jnp.arange(bins)[None, :] - b[:, None]
        kernel = jnp.exp(-0.5 * (dist / spread) ** 2)
        step = learning_rate * jnp.mean(signal[:, None] * kernel, axis=0)
        skill = state.skill + step
        metrics = {
            "signal": jnp.mean(signal),
            "skill_mean": jnp.mean(jax.nn.sigmoid(skill)),
        }
        return SyntheticState(skill, _counters.add(state.updates, 1)), metrics

    def evaluate(state, tasks, key):
        del key
        return jax.nn.sigmoid(state.skill[bin_of(tasks["difficulty"])])

    return Solver(init, rollout, credit, update, evaluate)
