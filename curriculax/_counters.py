"""Saturating int32 counters for component state (never wrap to negative on long runs)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

_MAX = jnp.iinfo(jnp.int32).max


def zero() -> jax.Array:
    """A fresh ``i32[]`` counter."""
    return jnp.zeros((), jnp.int32)


def add(count: jax.Array, amount: jax.Array | int) -> jax.Array:
    """``count + amount`` for non-negative ``amount``, saturating at the int32 maximum."""
    amount = jnp.asarray(amount, jnp.int32)
    return jnp.where(count > _MAX - amount, _MAX, count + amount).astype(jnp.int32)
