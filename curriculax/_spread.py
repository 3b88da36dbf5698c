"""The range of a group's valid values, for deciding exactly whether they are all equal.

Credit and several samplers treat a group whose valid rewards are all equal specially (zero
advantage, no variance, a score equal to that reward). That must be decided from the
smallest and largest valid value, never by comparing the values with their mean: a float32
mean of equal values is not always equal to them (the mean of eight 0.2s is 0.20000002).
A maximum and a minimum are exact: each returns one of its inputs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def valid_range(
    values: jax.Array, valid: jax.Array, axis: int = -1, keepdims: bool = False
) -> tuple[jax.Array, jax.Array]:
    """``(low, high)``: the smallest and largest of ``values`` where ``valid``, along ``axis``.

    A row without a valid entry has ``low = +inf`` and ``high = -inf`` (so ``high > low`` is
    False and ``high == low`` is False there).

    Args:
      values: ``f32[G, K]`` (any shape; ``valid`` broadcasts against it).
      valid: ``bool[G, K]``; invalid entries are ignored, whatever their value.
      axis: the axis to reduce.
      keepdims: keep ``axis`` with size 1 (``f32[G, 1]``) instead of dropping it.

    Returns:
      ``(low, high)``, each ``f32[G]`` (``f32[G, 1]`` with ``keepdims``).

    Example:
      >>> low, high = valid_range(jnp.array([[1.0, 5.0, 3.0]]), jnp.array([[True, False, True]]))
      >>> low.tolist(), high.tolist()
      ([1.0], [3.0])
    """
    low = jnp.min(jnp.where(valid, values, jnp.inf), axis=axis, keepdims=keepdims)
    high = jnp.max(jnp.where(valid, values, -jnp.inf), axis=axis, keepdims=keepdims)
    return low, high


def varies(
    values: jax.Array, valid: jax.Array, axis: int = -1, keepdims: bool = False
) -> jax.Array:
    """Whether some two valid ``values`` along ``axis`` differ, decided exactly: ``high > low``
    of :func:`valid_range`, whose arguments these are.

    Returns:
      ``bool[G]`` (``bool[G, 1]`` with ``keepdims``): False for a row with zero or one valid
      entry, or whose valid entries are all equal.

    Example:
      >>> valid = jnp.array([[True, True, False], [True, True, True]])
      >>> varies(jnp.array([[0.2, 0.2, 0.7], [0.2, 0.5, 0.2]]), valid).tolist()
      [False, True]
    """
    low, high = valid_range(values, valid, axis=axis, keepdims=keepdims)
    return high > low
