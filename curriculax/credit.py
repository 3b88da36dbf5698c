"""Credit assignment shared by every solver: group-relative advantages (GRPO).

Example:
  >>> adv = grpo_advantages(rewards, valid)                 # f32[G, K]
  >>> credit = per_token(adv, token_mask, valid)            # f32[G, K, T]
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array


def grpo_advantages(
    rewards: Array, valid: Array, *, scale_by_std: bool = True, eps: float = 1e-6
) -> Array:
    """Group-relative advantages: each reward minus its group's mean, optionally over its std.

    Mean and (population, ``ddof=0``) standard deviation are taken over the group's valid
    rollouts with a finite reward. Invalid rollouts and rollouts with a non-finite reward get
    0 (one NaN does not poison its group). Every rollout of a group whose valid rewards are
    all equal gets exactly 0 (nothing to prefer): this is decided by comparing the group's
    largest and smallest valid reward, not by subtracting the mean, whose rounding would leave
    a residue that dividing by ``std + eps`` amplifies (0.7 repeated 8 times has a float32
    mean one step away from 0.7). A group with no valid rollout gets 0 too.

    Args:
      rewards: ``f32[G, K]`` one reward per rollout.
      valid: ``bool[G, K]``.
      scale_by_std: divide by ``std + eps``; otherwise mean-centring only.
      eps: added to the standard deviation.

    Returns:
      ``f32[G, K]``.

    Example:
      >>> grpo_advantages(jnp.array([[1.0, 0.0, 0.0, 0.0]]), jnp.ones((1, 4), bool))
      Array([[ 1.7320468 , -0.57734895, -0.57734895, -0.57734895]], dtype=float32)
    """
    rewards = jnp.asarray(rewards, jnp.float32)
    valid = jnp.asarray(valid, bool) & jnp.isfinite(rewards)
    rewards = jnp.where(valid, rewards, 0.0)
    count = jnp.maximum(jnp.sum(valid, axis=-1, keepdims=True), 1)
    mean = jnp.sum(rewards, axis=-1, keepdims=True) / count
    high = jnp.max(jnp.where(valid, rewards, -jnp.inf), axis=-1, keepdims=True)
    low = jnp.min(jnp.where(valid, rewards, jnp.inf), axis=-1, keepdims=True)
    centred = jnp.where(valid & (high > low), rewards - mean, 0.0)
    if scale_by_std:
        std = jnp.sqrt(jnp.sum(centred**2, axis=-1, keepdims=True) / count)
        centred = centred / (std + eps)
    return centred


def per_token(advantages: Array, token_mask: Array, valid: Array) -> Array:
    """Broadcasts ``f32[G, K]`` advantages over ``T`` positions: ``f32[G, K, T]``, zero where
    ``token_mask`` is False or the rollout is invalid."""
    mask = jnp.asarray(token_mask, bool) & jnp.asarray(valid, bool)[..., None]
    return jnp.where(mask, advantages[..., None], 0.0)


def group_signal(advantages: Array, token_mask: Array) -> Array:
    """``f32[G]``: each group's mean absolute advantage over its trainable positions, a
    stand-in for how much a policy-gradient step on the group can teach (0 for a group whose
    rollouts all scored the same). ``advantages``/``token_mask``: ``[G, K, T]``."""
    mask = jnp.asarray(token_mask, bool)
    count = jnp.maximum(jnp.sum(mask, axis=(1, 2)), 1)
    return jnp.sum(jnp.abs(jnp.where(mask, advantages, 0.0)), axis=(1, 2)) / count
