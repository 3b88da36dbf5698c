"""The ``k`` best-scored tasks of a pool whose per-task state may be split over devices.

Scores become ``f32`` ranking keys in ``[1, 2)`` (15 bits of score, 8 hashed random bits
that break ties at random, not by pool order); ``0`` marks a task that must not be chosen.
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

    Scores closer than ``2**-15`` tie and are ordered by hashed bits of ``(word, ids, salt)``.
    """
    q = jnp.clip(jnp.floor(score * 2.0**SCORE_BITS), 0, 2**SCORE_BITS - 1).astype(jnp.uint32)
    tie = _random.bits(word, ids, salt) >> (32 - _TIE_BITS)
    word_bits = jnp.uint32(0x3F800000) | (q << _TIE_BITS) | tie
    return jax.lax.bitcast_convert_type(word_bits, jnp.float32)


def top_k(
    keys: jax.Array, k: int, start: jax.Array, axis: str | None
) -> tuple[jax.Array, jax.Array]:
    """The ``min(k, N)`` largest keys over the whole pool, best first.

    Args:
      keys: ``f32[n_local]`` this device's keys (``n_local = N`` when unsplit).
      k: static count.
      start: ``i32[]`` global id of this device's first task.
      axis: the bound device axis, or None.

    Returns:
      ``(f32[min(k, N)] keys, i32[min(k, N)] global ids)``, identical on every device.
    """
    n_local = keys.shape[0]
    values, local = jax.lax.top_k(keys, min(k, n_local))
    ids = (local + start).astype(jnp.int32)
    if axis is None:
        return values, ids
    values = _shard.gather(values, axis).reshape(-1)
    ids = _shard.gather(ids, axis).reshape(-1)
    values, pick = jax.lax.top_k(values, min(k, values.shape[0]))
    return values, ids[pick]
