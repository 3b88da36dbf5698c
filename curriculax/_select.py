"""Rank-select over task labels: "the r-th member of group c" without sorting the pool.

Tasks carry a small integer label (their band, say). :func:`build_index` makes one pass over
the labels and counts members per block of ``BLOCK`` tasks; :func:`select` finds the block by
binary search over the block prefix counts and the member inside it by a scan of one block.
Building costs O(N * ceil(C / 4)) for ``C`` groups (one pass per four labels); each query
O(log N + BLOCK). No sort, no per-group prefix sum over N.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

BLOCK = 128  # at most 255: a block's member count must fit an 8-bit field


class GroupIndex(NamedTuple):
    """Block counts of a label array.

    Attributes:
      labels: ``i32[NB, S]`` labels in blocks of ``S`` (padding holds -1).
      ends: ``i32[NB, C]`` inclusive prefix count of each label over blocks.
      counts: ``i32[C]`` members per label.
    """

    labels: jax.Array
    ends: jax.Array
    counts: jax.Array


def build_index(labels: jax.Array, num_groups: int) -> GroupIndex:
    """Indexes ``labels: i32[N]`` (values in ``[0, num_groups)``; anything else is ignored)."""
    n = labels.shape[0]
    block = min(BLOCK, max(1, n))
    num_blocks = -(-n // block)
    padded = jnp.full((num_blocks * block,), -1, jnp.int32).at[:n].set(labels.astype(jnp.int32))
    blocks = padded.reshape(num_blocks, block)
    # Count members per block in 8-bit fields, four labels to a u32 word (a block holds at
    # most 128 tasks): one sum per word instead of materialising [NB, S, C] compares.
    cols = []
    for first in range(0, num_groups, 4):
        width = min(4, num_groups - first)
        rel = blocks - first
        inside = (rel >= 0) & (rel < width)
        shift = (8 * jnp.clip(rel, 0, width - 1)).astype(jnp.uint32)
        word = jnp.where(inside, jnp.left_shift(jnp.uint32(1), shift), jnp.uint32(0))
        total = jnp.sum(word, axis=1, dtype=jnp.uint32)
        cols += [((total >> (8 * c)) & 0xFF).astype(jnp.int32) for c in range(width)]
    per_block = jnp.stack(cols, axis=1)
    ends = jnp.cumsum(per_block, axis=0, dtype=jnp.int32)
    return GroupIndex(blocks, ends, ends[-1])


def select(index: GroupIndex, group: jax.Array, rank: jax.Array) -> jax.Array:
    """Pool position of the ``rank``-th member (0-based, pool order) of ``group``.

    Args:
      index: from :func:`build_index`.
      group: ``i32[M]`` label per query.
      rank: ``i32[M]`` rank per query, in ``[0, counts[group])`` (else the result is undefined).

    Returns:
      ``i32[M]`` positions in the pool.
    """
    num_blocks, block = index.labels.shape
    group = group.astype(jnp.int32)
    rank = rank.astype(jnp.int32)

    # First block whose inclusive prefix count exceeds the rank.
    def halve(_, bounds):
        lo, hi = bounds
        mid = (lo + hi) // 2
        right = index.ends[mid, group] > rank
        return jnp.where(right, lo, mid + 1), jnp.where(right, mid, hi)

    lo, _ = jax.lax.fori_loop(
        0,
        max(1, num_blocks.bit_length()),
        halve,
        (jnp.zeros_like(rank), jnp.full_like(rank, num_blocks - 1)),
    )
    blk = jnp.minimum(lo, num_blocks - 1)
    before = jnp.where(blk > 0, index.ends[jnp.maximum(blk - 1, 0), group], 0)
    local = rank - before
    members = index.labels[blk] == group[:, None]  # [M, S]
    running = jnp.cumsum(members, axis=1, dtype=jnp.int32)
    offset = jnp.argmax(members & (running == local[:, None] + 1), axis=1)
    return (blk * block + offset).astype(jnp.int32)
