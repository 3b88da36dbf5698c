"""Split-half learning progress: evidence that a pass rate *changes*, which noise cannot fake.

A group's valid rollouts are split in two halves (even and odd positions), measured with the
same policy at the same moment. Each half feeds its own fast and slow moving average of the
pass rate, so ``d_a = fast_a - slow_a`` and ``d_b = fast_b - slow_b`` are two independent
readings of the same progress signal (TSCL's ``fast - slow`` gap, arXiv 1707.00183). Their
noises are independent given the true rates, so

- ``cross``, a moving average of ``d_a * d_b``, estimates the squared progress with no noise
  term: 0 in expectation for a task whose rate does not move, however much its reward varies
  (a coin flip), positive for one the policy is learning;
- ``power``, a moving average of ``(d_a**2 + d_b**2) / 2``, estimates squared progress plus
  the noise;
- ``reliability = cross / power`` in [-1, 1] is the split-half reliability of the progress
  signal (the share of the ``fast - slow`` gap that is not noise): near 1 while a rate moves
  steadily, near 0 for noise. It is scale-free, so one threshold serves any group size.

This is the self-play judge's care (:mod:`curriculax.selfplay._frontier`: filter and baseline
never share a rollout) applied to a running estimate: ``|fast - slow|`` alone is positive for
any noisy task (regression to the mean read as learning); the product of two independent
halves is not.

Everything here is elementwise over any shape (tasks, categories), so per-task state can be
split over devices.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class Halves(NamedTuple):
    """Pass-rate means of the two halves of some groups (``f32[M]`` each) and where both
    halves had a valid rollout (``bool[M]``)."""

    a: jax.Array
    b: jax.Array
    ok: jax.Array


def half_sums(rewards: jax.Array, valid: jax.Array, hit: jax.Array | None = None) -> jax.Array:
    """Splits each group's valid rollouts into even and odd positions and sums each half.

    Args:
      rewards: ``f32[G, K]`` (used as successes when ``hit`` is None).
      valid: ``bool[G, K]``.
      hit: optional ``f32[G, K]`` successes in [0, 1] (e.g. rewards clipped or thresholded).

    Returns:
      ``f32[G, 4]``: per group the even half's successes and valid rollouts, then the odd
      half's. Sums of rows (a task's groups in one batch) pool their rollouts;
      :func:`halves_of` turns them into :class:`Halves`.
    """
    k = rewards.shape[1]
    hit = rewards if hit is None else hit
    even = (jnp.arange(k) % 2 == 0)[None, :]
    valid = valid.astype(bool)
    na = jnp.sum(valid & even, axis=1).astype(jnp.float32)
    nb = jnp.sum(valid & ~even, axis=1).astype(jnp.float32)
    sa = jnp.sum(jnp.where(valid & even, hit, 0.0), axis=1)
    sb = jnp.sum(jnp.where(valid & ~even, hit, 0.0), axis=1)
    return jnp.stack([sa, na, sb, nb], axis=1)


def halves_of(sums: jax.Array) -> Halves:
    """:class:`Halves` (``f32[M]`` means, ``bool[M]`` both halves non-empty) from
    :func:`half_sums`' ``f32[M, 4]`` (or sums of its rows)."""
    sa, na, sb, nb = (sums[:, i] for i in range(4))
    return Halves(sa / jnp.maximum(na, 1.0), sb / jnp.maximum(nb, 1.0), (na > 0) & (nb > 0))


def update(
    fast_a: jax.Array,
    fast_b: jax.Array,
    slow_a: jax.Array,
    slow_b: jax.Array,
    cross: jax.Array,
    power: jax.Array,
    a: jax.Array,
    b: jax.Array,
    count: jax.Array,
    *,
    fast: float,
    slow: float,
    evidence: float,
) -> tuple[jax.Array, ...]:
    """One observation per element: the new ``(fast_a, fast_b, slow_a, slow_b, cross, power)``.

    Args:
      fast_a ... power: the current values (``f32[...]``, one shape).
      a, b: the new half means.
      count: ``i32[...]`` observations before this one. The rates are bias-corrected: the
        ``t``-th observation is averaged in with rate ``max(rate, 1 / t)`` (the slow average
        and the evidence are running means until they reach their rate), so early estimates
        use all the data instead of leaning on the zero start. The first observation starts
        both averages at the half means (no gap yet) and leaves ``cross`` and ``power``.
      fast, slow: rates of the two moving averages (``0 < slow < fast <= 1``).
      evidence: rate of the moving averages of ``cross`` and ``power``.
    """
    t = count.astype(jnp.float32) + 1.0  # this observation's number, from 1
    r_fast = jnp.maximum(fast, 1.0 / t)
    r_slow = jnp.maximum(slow, 1.0 / t)
    r_evidence = jnp.maximum(evidence, 1.0 / jnp.maximum(t - 1.0, 1.0))
    fa = r_fast * a + (1 - r_fast) * fast_a
    fb = r_fast * b + (1 - r_fast) * fast_b
    sa = r_slow * a + (1 - r_slow) * slow_a
    sb = r_slow * b + (1 - r_slow) * slow_b
    da, db = fa - sa, fb - sb
    first = t <= 1.0
    cross = jnp.where(first, cross, r_evidence * da * db + (1 - r_evidence) * cross)
    power = jnp.where(
        first, power, r_evidence * 0.5 * (da * da + db * db) + (1 - r_evidence) * power
    )
    return fa, fb, sa, sb, cross, power


def reliability(cross: jax.Array, power: jax.Array) -> jax.Array:
    """``f32[...]`` in [0, 1]: ``cross / power`` clipped below at 0 (0 where nothing moved)."""
    ok = power > 1e-9
    return jnp.where(ok, jnp.clip(cross / jnp.where(ok, power, 1.0), 0.0, 1.0), 0.0)


def looks_like_noise(state: NamedTuple, *, min_mixed: int, max_reliability: float) -> jax.Array:
    """``bool[...]``: the elements (tasks, categories) of ``state`` with at least ``min_mixed``
    updates that carried reward variance, a recent pass rate (the fast averages) still
    strictly inside (0.05, 0.95), and a reliability below ``max_reliability``: variance that
    never turned into progress. "Still varies" keeps an element that was learned (or given up
    on) from being flagged for the variance it once had.

    Args:
      state: holds this module's ``fast_a``, ``fast_b``, ``cross``, ``power`` and a count
        ``mixed`` of updates with reward variance (one shape).
      min_mixed, max_reliability: the sampler's noise thresholds.
    """
    recent = 0.5 * (state.fast_a + state.fast_b)
    varies = (recent > 0.05) & (recent < 0.95)
    unreliable = reliability(state.cross, state.power) < max_reliability
    return (state.mixed >= min_mixed) & unreliable & varies


def flagged(mask: jax.Array) -> np.ndarray:
    """Host side: the indices (``int64[M]``, ascending) where ``mask`` is true."""
    return np.flatnonzero(np.asarray(jax.device_get(mask)))
