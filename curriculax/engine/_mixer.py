"""Env mixing: which training source the next generation batch comes from."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import _counters


class MixerState(NamedTuple):
    """Checkpointed mixer state.

    Attributes:
      batches: ``i32[E]`` generation batches drawn from each env so far.
      groups: ``i32[E]`` groups generated from each env so far.
    """

    batches: jax.Array
    groups: jax.Array


def init(num_envs: int) -> MixerState:
    zeros = jnp.zeros((num_envs,), jnp.int32)
    return MixerState(zeros, zeros)


def choose(key: jax.Array, weights: np.ndarray) -> jax.Array:
    """Draws an env index with probability proportional to ``weights`` (static, >= 0)."""
    w = np.asarray(weights, np.float64)
    if len(w) == 1:
        return jnp.zeros((), jnp.int32)
    logits = np.where(w > 0, np.log(np.where(w > 0, w, 1.0)), -np.inf).astype(np.float32)
    return jax.random.categorical(key, jnp.asarray(logits)).astype(jnp.int32)


def record(state: MixerState, env: jax.Array, groups: int) -> MixerState:
    """Counts one batch of ``groups`` groups from ``env`` (saturating, as every counter)."""
    hit = (jnp.arange(state.batches.shape[0]) == env).astype(jnp.int32)
    return MixerState(_counters.add(state.batches, hit), _counters.add(state.groups, hit * groups))
