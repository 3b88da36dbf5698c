"""The 32-bit integer hashes of the library, in one place.

Two finalizers, both bijections of ``u32`` with full avalanche, kept apart because each one's
outputs are part of a contract:

- :func:`mix32` (MurmurHash3's ``fmix32``) makes the tasks' content keys and decides the
  train / held-out split (:func:`curriculax.tasks.held_out_mask`): a key or a split that moves
  is a different task set, so these constants are frozen.
- :func:`lowbias32` drives the keyed permutations and the per-task random numbers of the
  samplers (``_permute``, ``_random``): changing it changes every sampler's draws.

Both are uint32 arithmetic only (identical on every backend and JAX version), take numpy or
JAX input, and run on the host or inside ``jit``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def mix32(x: jax.Array | np.ndarray) -> jax.Array:
    """MurmurHash3's ``fmix32`` finalizer. ``u32[...] -> u32[...]``.

    Example:
      >>> int(mix32(np.uint32(1)))
      1364076727
    """
    x = jnp.asarray(x, jnp.uint32)
    x = x ^ (x >> 16)
    x = x * np.uint32(0x85EBCA6B)
    x = x ^ (x >> 13)
    x = x * np.uint32(0xC2B2AE35)
    return x ^ (x >> 16)


def lowbias32(x: jax.Array | np.ndarray) -> jax.Array:
    """Chris Wellons' ``lowbias32`` hash. ``u32[...] -> u32[...]``.

    Example:
      >>> int(lowbias32(np.uint32(1)))
      1753845952
    """
    x = jnp.asarray(x, jnp.uint32)
    x = x ^ (x >> 16)
    x = x * np.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * np.uint32(0x846CA68B)
    return x ^ (x >> 16)
