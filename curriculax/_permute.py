"""Keyed pseudo-random permutations of ``[0, n)`` evaluated pointwise in expected O(1) per index.

A Feistel network over the smallest even-width bit domain holding ``n`` values, with cycle
walking back into ``[0, n)``. ``permute(i, n, round_keys)`` is a bijection of ``[0, n)`` for
every ``n >= 1`` and every key, so "the i-th task of a shuffled epoch" costs expected O(1)
instead of materialising an O(n log n) shuffle. ``n`` may be a traced value. A batch of ``M``
indices walks until its slowest index is back in range: fewer than 4 Feistel passes per index
on average, about ``log(M) / log(4/3)`` passes for the batch where the domain is near ``4n``
(``n`` just above a power of 4); the samplers permute ``O(num)`` indices per call.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from curriculax._hash import lowbias32

NUM_ROUNDS = 8


def seed_bits(seed: int) -> np.uint32:
    """A static 32-bit seed word for an int seed (host side, no PRNG call)."""
    return np.uint32((int(seed) * 0x9E3779B1 + 0x7F4A7C15) & 0xFFFFFFFF)


def round_keys(seed: jax.Array | np.uint32, *salt: jax.Array | int) -> jax.Array:
    """Feistel round keys ``u32[..., NUM_ROUNDS]`` from a 32-bit seed word and integer salts.

    Pure integer hashing (no PRNG call), so deriving keys per epoch or per group is cheap
    and compiles small. Salts broadcast: an ``int[M]`` salt gives ``u32[M, NUM_ROUNDS]``.
    """
    h = jnp.asarray(seed, jnp.uint32)
    for s in salt:
        h = lowbias32(h ^ lowbias32(jnp.asarray(s).astype(jnp.uint32) + jnp.uint32(0x9E3779B9)))
    rounds = jnp.arange(NUM_ROUNDS, dtype=jnp.uint32)
    return lowbias32(h[..., None] ^ (rounds * jnp.uint32(0x85EBCA6B) + jnp.uint32(0xC2B2AE35)))


def key_bits(key: jax.Array) -> jax.Array:
    """One ``u32[]`` seed word drawn from a PRNG key."""
    return jax.random.bits(key, (), jnp.uint32)


def _half_bits(n: jax.Array) -> jax.Array:
    """Half the bit width of the smallest even-width power-of-two domain holding ``n`` values."""
    n = jnp.maximum(jnp.asarray(n, jnp.uint32), jnp.uint32(2))
    bits = jnp.uint32(32) - jax.lax.clz(n - jnp.uint32(1))
    return (bits + jnp.uint32(1)) // jnp.uint32(2)


def _feistel(x: jax.Array, half: jax.Array, keys: jax.Array) -> jax.Array:
    mask = (jnp.uint32(1) << half) - jnp.uint32(1)

    def round_(r, lr):
        left, right = lr
        k = jax.lax.dynamic_index_in_dim(keys, r, axis=keys.ndim - 1, keepdims=False)
        return right, left ^ (lowbias32(right ^ k) & mask)

    # A rolled loop: the round body is compiled once (unrolling 8 rounds at every call site
    # made XLA's CPU compile several times slower).
    left, right = jax.lax.fori_loop(0, NUM_ROUNDS, round_, (x >> half, x & mask))
    return (left << half) | right


def permute(index: jax.Array, n: jax.Array | int, keys: jax.Array) -> jax.Array:
    """Maps ``index`` through a keyed bijection of ``[0, n)``.

    Args:
      index: ``int[...]`` positions in ``[0, n)``; values outside are clamped into range.
      n: domain size ``>= 1`` (static or traced).
      keys: ``u32[NUM_ROUNDS]`` round keys, or ``u32[..., NUM_ROUNDS]`` one set per index.

    Returns:
      ``i32[...]`` the permuted positions, each in ``[0, n)``.

    Example:
      >>> keys = round_keys(seed_bits(0))
      >>> sorted(permute(jnp.arange(5), 5, keys).tolist())
      [0, 1, 2, 3, 4]
    """
    n32 = jnp.maximum(jnp.asarray(n, jnp.uint32), jnp.uint32(1))
    x = jnp.clip(jnp.asarray(index), 0, None).astype(jnp.uint32)
    x = jnp.minimum(x, n32 - jnp.uint32(1))
    half = _half_bits(n32)
    keys = jnp.asarray(keys, jnp.uint32)
    # Cycle walking: the domain is below 4n, so each index needs fewer than 4 steps on average.
    y = _feistel(x, half, keys)

    def cond(y):
        return jnp.any(y >= n32)

    def body(y):
        return jnp.where(y >= n32, _feistel(y, half, keys), y)

    y = jax.lax.while_loop(cond, body, y)
    return y.astype(jnp.int32)
