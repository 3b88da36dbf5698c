"""Credit assignment shared by every solver: group-relative advantages (GRPO).

Example:
  >>> import jax.numpy as jnp
  >>> rewards = jnp.array([[1.0, 0.0, 0.0, 1.0]])           # f32[G, K]
  >>> valid = jnp.ones((1, 4), bool)                        # bool[G, K]
  >>> token_mask = jnp.ones((1, 4, 3), bool)                # bool[G, K, T]
  >>> adv = grpo_advantages(rewards, valid)                 # f32[G, K]
  >>> credit = per_token(adv, token_mask, valid)            # f32[G, K, T]
  >>> credit.shape
  (1, 4, 3)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from curriculax import _spread

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
    mean one step away from 0.7). A group with no valid rollout gets 0 too. Large finite
    rewards are safe: the sums are taken over rewards scaled by a power of two (exact), so
    rewards of 1e20 do not overflow the standard deviation. Rewards that differ from their
    mean by less than about 1e-19 read as equal (their squares fall below float32's normal
    range), far below any verifier's resolution.

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
    rewards, valid = finite_rewards(rewards, valid)
    # Work on rewards divided by a power of two near the group's largest |reward| (when above
    # 1): exact, since a power-of-two scale changes only exponents, so ordinary rewards give
    # the same bits, and finite rewards of any size (1e20, 3e38) overflow neither the sum nor
    # the squares. Between 2**0 and 2**126, so neither the scale nor its inverse is subnormal
    # (XLA:CPU flushes those to zero, and divides by multiplying with the inverse).
    magnitude = jnp.max(jnp.abs(rewards), axis=-1, keepdims=True)
    _, exponent = jnp.frexp(magnitude)
    power = jnp.clip(exponent - 1, 0, 126)
    scale = jnp.ldexp(jnp.float32(1.0), power)
    scaled = rewards * jnp.ldexp(jnp.float32(1.0), -power)  # |scaled| < 4
    count = jnp.maximum(jnp.sum(valid, axis=-1, keepdims=True), 1)
    mean = jnp.sum(scaled, axis=-1, keepdims=True) / count
    centred = jnp.where(
        valid & _spread.varies(scaled, valid, axis=-1, keepdims=True), scaled - mean, 0.0
    )
    if scale_by_std:
        std = jnp.sqrt(jnp.sum(centred**2, axis=-1, keepdims=True) / count)
        # = (r - mean) / (std(r) + eps); a group with std 0 is all zeros (eps / scale may
        # flush to 0 for huge rewards, and 0 / 0 must not give NaN)
        return jnp.where(std > 0, centred / (std + eps / scale), 0.0)
    return centred * scale


def finite_rewards(rewards: Array, valid: Array) -> tuple[Array, Array]:
    """``(f32[G, K] rewards, bool[G, K] valid)`` with every non-finite reward replaced by 0 and
    its rollout made invalid: what credit may see, so that one NaN or inf does not poison its
    group's baseline (the engine and the host driver pass this to any solver's credit; the
    raw rewards still go to ``observe``, which counts such rollouts as non-finite)."""
    rewards = jnp.asarray(rewards, jnp.float32)
    valid = jnp.asarray(valid, bool) & jnp.isfinite(rewards)
    return jnp.where(valid, rewards, 0.0), valid


def per_token(advantages: Array, token_mask: Array, valid: Array) -> Array:
    """Broadcasts ``f32[G, K]`` advantages over ``T`` positions: ``f32[G, K, T]``, zero where
    ``token_mask`` is False or the rollout is invalid."""
    mask = jnp.asarray(token_mask, bool) & jnp.asarray(valid, bool)[..., None]
    return jnp.where(mask, advantages[..., None], 0.0)


def group_signal(advantages: Array, token_mask: Array, valid: Array | None = None) -> Array:
    """``f32[G]``: each group's mean absolute advantage over its trainable positions (the
    ``token_mask`` positions of its valid rollouts), a stand-in for how much a policy-gradient
    step on the group can teach (0 for a group whose rollouts all scored the same).
    ``advantages``/``token_mask``: ``[G, K, T]``; ``valid``: ``bool[G, K]`` (None: all)."""
    mask = jnp.asarray(token_mask, bool)
    if valid is not None:  # a rollout made invalid later (a NaN reward) keeps its token mask
        mask = mask & jnp.asarray(valid, bool)[..., None]
    count = jnp.maximum(jnp.sum(mask, axis=(1, 2)), 1)
    return jnp.sum(jnp.abs(jnp.where(mask, advantages, 0.0)), axis=(1, 2)) / count
