"""Weighted draws of group labels without replacement across groups of finite size.

Shared by the samplers that draw a band or category first and a member second
(``difficulty_pools``, ``category_bandit``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def draw_groups(
    uniforms: jax.Array, weights: np.ndarray, counts: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Draws ``num`` group labels: each draw picks a non-exhausted group with probability
    proportional to its weight; a group is exhausted once it gave out all of its members.

    Vectorized exactly: draw every remaining position i.i.d. over the active groups, keep the
    prefix up to the first draw that overflows a group, retire that group, redraw the rest.
    Rejecting draws of retired groups leaves the others' probabilities proportional to their
    weights, so this is the sequential process. A group retires only after it gave out all of
    its members (at least one) among the positions kept, so at most ``min(C, num - 1)`` rounds
    retire one and ``min(C, num) + 1`` rounds finish the draw (a round after that changes
    nothing): O(num * C * min(C, num)), where ``C + 1`` rounds cost seconds a call for
    thousands of categories.

    Args:
      uniforms: ``f32[C + 1, num]`` uniform numbers in [0, 1), one row per round (the
        first ``min(C, num) + 1`` are used).
      weights: ``f32[C]`` static group weights.
      counts: ``i32[C]`` members per group.

    Returns:
      ``(labels i32[num], ranks i32[num], drawable i32[])``: the group of each draw, its rank
      among that group's draws (0-based), and how many distinct draws exist in total. Only
      the first ``min(num, drawable)`` positions are meaningful.
    """
    c = len(weights)
    num = uniforms.shape[1]
    w = jnp.asarray(weights, jnp.float32)
    groups = jnp.arange(c, dtype=jnp.int32)
    pos = jnp.arange(num, dtype=jnp.int32)
    counts = counts.astype(jnp.int32)

    def round_(r, carry):
        labels, ranks, filled, active = carry
        cum = jnp.cumsum(jnp.where(active, w, 0.0))
        total = cum[-1]
        u = uniforms[r] * total
        u = jnp.minimum(u, total * (1.0 - 2.0**-22))  # rounding must not reach past the end
        fresh = jnp.minimum(jnp.sum(u[:, None] >= cum[None, :], axis=1, dtype=jnp.int32), c - 1)
        labels = jnp.where(pos < filled, labels, fresh)
        onehot = labels[:, None] == groups[None, :]
        running = jnp.cumsum(onehot, axis=0, dtype=jnp.int32)
        ranks = jnp.sum(jnp.where(onehot, running, 0), axis=1) - 1
        over = (pos >= filled) & ((ranks >= counts[labels]) | (total <= 0))
        any_over = jnp.any(over)
        first = jnp.where(any_over, jnp.argmax(over), num).astype(jnp.int32)
        retired = labels[jnp.minimum(first, num - 1)]
        active = active & ~(any_over & (groups == retired))
        return labels, ranks, first, active

    init = (
        jnp.zeros((num,), jnp.int32),
        jnp.zeros((num,), jnp.int32),
        jnp.zeros((), jnp.int32),
        (counts > 0) & (w > 0),
    )
    labels, ranks, _, _ = jax.lax.fori_loop(0, min(c, num) + 1, round_, init)
    drawable = jnp.sum(jnp.where(w > 0, counts, 0), dtype=jnp.int32)
    return labels, ranks, drawable
