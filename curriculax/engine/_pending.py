"""The pending batch: admitted groups waiting for a training slot, in a fixed-size buffer."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from curriculax.engine._solver import Rollouts, TrainBatch


class PendingBatch(NamedTuple):
    """Admitted groups in arrival order; rows ``[0, count)`` are live.

    Attributes:
      groups: a :class:`TrainBatch` whose leaves have leading axis ``C`` (the capacity).
      count: ``i32[]`` live rows.
    """

    groups: TrainBatch
    count: jax.Array


def empty(example: TrainBatch, capacity: int) -> PendingBatch:
    """An empty buffer of ``capacity`` rows shaped like the rows of ``example``."""
    groups = jax.tree.map(lambda x: jnp.zeros((capacity, *x.shape[1:]), x.dtype), example)
    return PendingBatch(groups, jnp.zeros((), jnp.int32))


def append(pending: PendingBatch, rows: TrainBatch, admitted: jax.Array) -> PendingBatch:
    """Appends the admitted rows (``bool[G]``) after the live ones, keeping their order. O(G).

    The caller makes room (capacity >= live rows + G; see ``EngineConfig``): admitted rows
    past the capacity are dropped, and the count stays at the capacity.
    """
    capacity = jax.tree.leaves(pending.groups)[0].shape[0]
    admitted = admitted.astype(bool)
    slot = pending.count + jnp.cumsum(admitted.astype(jnp.int32)) - 1
    slot = jnp.where(admitted, slot, capacity)  # out of range: dropped
    groups = jax.tree.map(
        lambda buf, new: buf.at[slot].set(new.astype(buf.dtype), mode="drop"),
        pending.groups,
        rows,
    )
    count = pending.count + jnp.sum(admitted, dtype=jnp.int32)
    return PendingBatch(groups, jnp.minimum(count, capacity).astype(jnp.int32))


def take(pending: PendingBatch, size: int) -> tuple[TrainBatch, PendingBatch]:
    """Removes the oldest ``size`` rows (the caller checked ``count >= size``).

    Returns the batch (leaves ``[size, ...]``) and the buffer with the surplus moved to the
    front, in order, so nothing admitted is lost.
    """
    capacity = jax.tree.leaves(pending.groups)[0].shape[0]
    batch = jax.tree.map(lambda x: x[:size], pending.groups)
    shift = jnp.arange(capacity) + size
    keep = shift < capacity
    rest = jax.tree.map(
        lambda x: jnp.where(
            keep.reshape((-1,) + (1,) * (x.ndim - 1)), x[jnp.minimum(shift, capacity - 1)], 0
        ).astype(x.dtype),
        pending.groups,
    )
    count = jnp.maximum(pending.count - size, 0).astype(jnp.int32)
    return batch, PendingBatch(rest, count)


def pad_k(x: jax.Array, k: int) -> jax.Array:
    """Zero-pads axis 1 (the group axis ``K``) of ``x`` to length ``k``."""
    widths = [(0, 0), (0, k - x.shape[1])] + [(0, 0)] * (x.ndim - 2)
    return jnp.pad(x, widths) if x.shape[1] != k else x


def pad_group_axis(rollouts: Rollouts, advantages: jax.Array, k: int) -> tuple[Rollouts, Any]:
    """Pads ``[G, K_env, ...]`` rollouts and advantages to ``K = k`` with invalid rollouts
    (``valid`` and ``token_mask`` False, zeros elsewhere)."""
    return jax.tree.map(lambda x: pad_k(x, k), rollouts), pad_k(advantages, k)
