"""Per-task random numbers keyed by (call word, global task id): the same on any device split.

A sampler that scores every task with a random draw (a Thompson sample, a tie-break) cannot
use ``jax.random.uniform(key, (N,))`` when its per-task state may be split over devices: the
local shape changes the stream. Hashing the global task id with one 32-bit word drawn per
call gives each task its own numbers, whatever slice of the pool a device holds, at the cost
of a few integer operations per task (no PRNG call over N).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from curriculax._checks import check_seed
from curriculax._hash import lowbias32


def seed_key(seed: object, name: str = "seed") -> jax.Array:
    """``jax.random.key(seed)`` as JAX's 64-bit mode builds it, whichever mode is on: every
    signed 64-bit seed (:func:`~curriculax._checks.check_seed`) gets its own key.

    With 64-bit mode off (JAX's default) ``jax.random.key`` keeps only a seed's low 32 bits, so
    ``1`` and ``2**32 + 1`` (or ``-1`` and ``2**32 - 1``) would give one key and the same run.
    A seed in ``[0, 2**32)`` gets the key ``jax.random.key(seed)`` gives in either mode (the
    key every stored run used); any other seed gets the key of its two 32-bit words, high and
    low (64-bit mode's), which for a negative seed differs from the key it got with 64-bit mode
    off (that of ``seed % 2**32``, which it shared with that seed).

    Raises:
      TypeError, ValueError: ``seed`` is not an int that a signed 64-bit word holds (naming
        ``name`` and the seed).
    """
    seed = check_seed(seed, name)
    if 0 <= seed < 2**32:
        return jax.random.key(seed)
    with jax.enable_x64(True):  # both words reach the key; its data is u32 in either mode
        return jax.random.key(seed)


def bits(word: jax.Array, ids: jax.Array, salt: int) -> jax.Array:
    """``u32[...]`` hashed bits of ``(word, ids, salt)``; independent across salts."""
    salted = lowbias32(
        jnp.asarray(word, jnp.uint32) ^ jnp.uint32((0x9E3779B9 * (salt + 1)) & 0xFFFFFFFF)
    )
    return lowbias32(lowbias32(ids.astype(jnp.uint32) + jnp.uint32(0x632BE5AB)) ^ salted)


def unit(word: jax.Array, ids: jax.Array, salt: int) -> jax.Array:
    """``f32[...]`` uniforms in (0, 1) (24 bits, never exactly 0 or 1)."""
    u = ((bits(word, ids, salt) >> 8).astype(jnp.float32) + 0.5) * jnp.float32(2.0**-24)
    # The top value, 1 - 2^-25, rounds to 1.0 in float32 (normal() would give inf, beta() nan):
    # it becomes the largest float32 below 1; every other value is unchanged.
    return jnp.minimum(u, jnp.float32(1.0 - 2.0**-24))


def normal(word: jax.Array, ids: jax.Array, salt: int) -> jax.Array:
    """``f32[...]`` approximately standard normals: Polya's inverse of ``erf``,
    ``sign(y) sqrt(-(pi / 2) log(1 - y^2))`` with ``y = 2u - 1`` (one log and one square root
    per id; Box-Muller's cos and sin and ``erfinv`` cost several times more on CPU). Quantiles
    within 0.01 of the normal's up to 2.5%/97.5%, the 0.1% tails ~5% short (2.95 for 3.09).
    """
    y = 2.0 * unit(word, ids, salt) - 1.0
    return jnp.sign(y) * jnp.sqrt(jnp.float32(-jnp.pi / 2) * jnp.log1p(-y * y))


def _gamma_wilson_hilferty(shape: jax.Array, z: jax.Array) -> jax.Array:
    """A Gamma(shape, 1) draw from a standard normal ``z`` (Wilson-Hilferty cube approximation).

    Close to exact quantiles for ``shape >= 1`` (within ~0.007 in the Beta ratios below) and
    usable down to ``shape = 0.5``; the rare negative cube is clipped to 0.
    """
    c = 1.0 / (9.0 * shape)
    return shape * jnp.maximum(1.0 - c + z * jnp.sqrt(c), 0.0) ** 3


def beta(word: jax.Array, ids: jax.Array, a: jax.Array, b: jax.Array, salt: int) -> jax.Array:
    """``f32[...]`` one Beta(a, b) draw per id: X / (X + Y) of two approximate Gamma draws.

    With ``a, b >= 1`` and the normals of :func:`normal`, the quantiles (5%, 25%, 50%, 75%,
    95%) match the exact Beta's within 0.007 (checked for Beta(1, 9), (5, 5), (2, 30), (9, 1);
    ``tests/test_random_topk.py`` checks them within 0.012). Below ``a = 0.5`` the draws are
    too small: :func:`~curriculax.samplers.hierarchical_learnability` passes such shapes for a
    task of a category near 0 (``strength * m_c``), and there, measured over 400,000 ids,
    Beta(0.3, 7.7) keeps its quantiles within 0.022 (mean 0.036 for 0.0375), while
    Beta(0.08, 7.92) draws exactly 0 where the Gamma cube is clipped and has a short upper tail
    (mean 0.0064 for 0.010; 95% quantile 0.037 for 0.060, 99% 0.119 for 0.173): such a task's
    learnability score stays near 0 either way, a little nearer than an exact draw would put
    it. Every stored study ran these draws. Cost: a few elementwise operations per id.
    """
    z1, z2 = normal(word, ids, salt), normal(word, ids, salt + 1)
    x = _gamma_wilson_hilferty(a, z1)
    y = _gamma_wilson_hilferty(b, z2)
    total = x + y
    return jnp.where(total > 0, x / jnp.where(total > 0, total, 1.0), a / (a + b))


def stochastic_round(x: jax.Array, u: jax.Array) -> jax.Array:
    """``i32``: ``floor(x)`` plus one with probability ``frac(x)`` (``u`` uniform in [0, 1)), so
    the expected value is exactly ``x`` even when ``x < 1`` (a share of a small call). A whole
    ``x`` is never rounded up (``floor(x + u)`` was, in float32, when ``u`` lay within half an
    ulp of 1: a share of 512 came out 513 once in ~65,000 calls)."""
    whole = jnp.floor(x)
    # u >= 1 - frac(x) is floor(x + u) > floor(x) decided without rounding x + u (so the same
    # draws as before wherever that sum did not round up)
    return (whole + (u >= 1.0 - (x - whole))).astype(jnp.int32)
