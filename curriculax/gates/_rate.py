"""The admission-rate metric the built-in gates share."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def admit_rate(admitted: jax.Array, judged: jax.Array, previous: jax.Array) -> jax.Array:
    """``f32[]`` share of the ``judged`` groups (``bool[G]``) that were ``admitted``
    (``bool[G]``); ``previous`` when none was judged, so a group passed without a judgement
    (no trainable token, padding) does not dilute the rate."""
    n = jnp.sum(judged, dtype=jnp.int32)
    passed = jnp.sum(admitted & judged, dtype=jnp.int32)
    return jnp.where(
        n > 0, passed.astype(jnp.float32) / jnp.maximum(n, 1).astype(jnp.float32), previous
    )
