"""The ``k`` best-scored tasks of a pool whose per-task state may be split over devices.

Scores become ``f32`` ranking keys in ``[1, 2)`` (15 bits of score, 8 hashed random bits
that break most ties at random); ``0`` marks a task that must not be chosen. Eight bits leave
equal keys wherever more than a few tasks share a score (a fresh pool scored by a posterior
mean: every task), and ``lax.top_k`` gives equal keys to the lowest ids, so :func:`top_k`
given a ``tie`` word settles the key the selection cuts through by a second, fresh hashed
draw among the tasks holding it: ties fall at random, not by pool order.
``jax.lax.top_k`` over the keys is the fastest exact selection measured on CPU, against a
radix histogram plus rank-select and a sort; ``top_k`` over ``int32`` keys was far slower
than over float keys, hence float keys (the timings: docs/studies.md). Split over devices,
each device takes its local top ``k`` and one all-gather of ``D * k`` candidates decides the
global top ``k``: the same ids as the unsplit selection, ties included (equal keys go to
the lower global id in both).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from curriculax import _random, _shard

SCORE_BITS = 15
_TIE_BITS = 8


def ranking_key(score: jax.Array, word: jax.Array, ids: jax.Array, salt: int) -> jax.Array:
    """``f32[...]`` order-preserving keys in ``[1, 2)`` for ``score`` in ``[0, 1]``.

    Scores in one bucket of width ``2**-15`` (``floor(score * 2**15)``) tie and are ordered
    by 8 hashed bits of ``(word, ids, salt)``; equal keys remain (:func:`top_k`'s ``tie``
    settles them).
    """
    q = jnp.clip(jnp.floor(score * 2.0**SCORE_BITS), 0, 2**SCORE_BITS - 1).astype(jnp.uint32)
    tie = _random.bits(word, ids, salt) >> (32 - _TIE_BITS)
    word_bits = jnp.uint32(0x3F800000) | (q << _TIE_BITS) | tie
    return jax.lax.bitcast_convert_type(word_bits, jnp.float32)


def top_k(
    keys: jax.Array,
    k: int,
    start: jax.Array,
    axis: str | None,
    tie: tuple[jax.Array, int] | None = None,
) -> tuple[jax.Array, jax.Array]:
    """The ``min(k, N)`` largest keys over the whole pool, best first.

    Args:
      keys: ``f32[n_local]`` this device's keys (``n_local = N`` when unsplit).
      k: static count.
      start: ``i32[]`` global id of this device's first task.
      axis: the bound device axis, or None.
      tie: ``(word u32[], salt)``: where more tasks hold the smallest chosen key than the
        selection keeps, the ones kept are drawn at random among them (a fresh hashed uniform
        of ``(word, id, salt)`` each, :func:`settle`; one more O(N) pass and ``top_k``).
        None: equal keys go to the lowest ids.

    Returns:
      ``(f32[min(k, N)] keys, i32[min(k, N)] global ids)``, identical on every device.
    """
    values, ids = _top_k(keys, k, start, axis)
    if tie is None:
        return values, ids
    # Without the barrier XLA on CPU turns a top_k whose values are sliced into a sort of the
    # whole pool (1.5 ms -> 280 ms at N = 2**20, k = 256).
    values, ids = jax.lax.optimization_barrier((values, ids))
    word, salt = tie
    local_ids = start + jnp.arange(keys.shape[0], dtype=jnp.int32)
    again = jnp.where(keys == values[-1], 1.0 + _random.unit(word, local_ids, salt), 0.0)
    return values, settle(values, ids, _top_k(again, k, start, axis)[1])


def settle(values: jax.Array, ids: jax.Array, again: jax.Array) -> jax.Array:
    """``ids`` with the positions holding the smallest key ``values[..., -1]`` taken from
    ``again`` instead: the best of those tasks by a fresh random key (every task that holds
    that key, where ``ids`` has the lowest ids among them).

    Args:
      values: ``f32[..., k]`` the chosen keys, best first.
      ids: ``i32[..., k]`` the tasks (or columns) holding them.
      again: ``i32[..., k]`` the tasks holding the key ``values[..., -1]``, best first by a
        fresh random key.

    Returns:
      ``i32[..., k]``.
    """
    k = values.shape[-1]
    above = jnp.sum(values > values[..., -1:], axis=-1, keepdims=True, dtype=jnp.int32)
    pos = jnp.arange(k, dtype=jnp.int32)
    fill = jnp.take_along_axis(again, jnp.clip(pos - above, 0, k - 1), axis=-1)
    return jnp.where(pos < above, ids, fill)


def _top_k(
    keys: jax.Array, k: int, start: jax.Array, axis: str | None
) -> tuple[jax.Array, jax.Array]:
    """:func:`top_k` without ``tie``."""
    n_local = keys.shape[0]
    values, local = jax.lax.top_k(keys, min(k, n_local))
    ids = (local + start).astype(jnp.int32)
    if axis is None:
        return values, ids
    values = _shard.gather(values, axis).reshape(-1)
    ids = _shard.gather(ids, axis).reshape(-1)
    values, pick = jax.lax.top_k(values, min(k, values.shape[0]))
    return values, ids[pick]
