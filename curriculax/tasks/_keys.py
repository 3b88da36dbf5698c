"""Stable 32-bit content keys for tasks, and the hash that splits train from held-out.

A task's key is FNV-1a over its non-PAD prompt tokens followed by its non-PAD answer tokens
(each token id is one byte: the vocabulary has fewer than 256 ids), finished with MurmurHash3's
``fmix32`` avalanche. Only uint32 integer arithmetic is involved, so the key is identical across
runs, machines, backends and JAX versions, and does not depend on how much padding a
:class:`~curriculax.tasks.TaskSet` carries.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from curriculax._hash import mix32
from curriculax.tasks._vocab import PAD

Array = jax.Array

FNV_OFFSET_BASIS = 0x811C9DC5
FNV_PRIME = 0x01000193
# Salt of the held-out split hash, so the split is not a function of the key's low bits alone.
SPLIT_SALT = 0x5BD1E995


def content_key(prompt: Array, answer: Array) -> Array:
    """Hashes tasks' token content into stable keys.

    Args:
      prompt: ``i32[..., P]`` prompt tokens (any padding with PAD, on either side).
      answer: ``i32[..., A]`` answer tokens (any padding with PAD).

    Returns:
      ``u32[...]`` one key per task: ``mix32(fnv1a(non-PAD prompt tokens ++ non-PAD answer
      tokens))``.

    Example:
      >>> int(content_key(jnp.array([1, 5, 17, 2]), jnp.array([17, 3])))
      3869509429
    """
    tokens = jnp.concatenate([jnp.asarray(prompt), jnp.asarray(answer)], axis=-1)
    return mix32(_fnv1a(tokens, skip_pad=True))


def sequence_key(tokens: Array) -> Array:
    """Hashes token sequences position by position (PAD included), for telling completions
    apart: equal sequences get equal keys; different ones collide with probability about
    ``2**-32`` per pair.

    Args:
      tokens: ``i32[..., T]`` token ids (each below 256).

    Returns:
      ``u32[...]``: ``mix32(fnv1a(tokens))``.

    Example:
      >>> bool(sequence_key(jnp.array([5, 2])) == sequence_key(jnp.array([2, 5])))
      False
    """
    return mix32(_fnv1a(tokens, skip_pad=False))


def _fnv1a(tokens: Array, *, skip_pad: bool) -> Array:
    """``u32[...]`` FNV-1a over the last axis of ``i32[..., T]`` (one byte per token),
    skipping PAD tokens when ``skip_pad``."""
    tokens = jnp.moveaxis(jnp.asarray(tokens).astype(jnp.uint32), -1, 0)

    def absorb(h, t):
        step = (h ^ t) * np.uint32(FNV_PRIME)
        return (jnp.where(t != PAD, step, h) if skip_pad else step), None

    h0 = jnp.full(tokens.shape[1:], FNV_OFFSET_BASIS, jnp.uint32)
    h, _ = jax.lax.scan(absorb, h0, tokens)
    return h


def _split_threshold(held_out_frac: float) -> int:
    if not 0.0 < held_out_frac < 1.0:
        raise ValueError(
            f"held_out_frac must be in (0, 1), got {held_out_frac!r}: it is the share of the task"
            " space reserved for evaluation."
        )
    return int(held_out_frac * 2**32)


def held_out_mask(keys: Array, held_out_frac: float) -> Array:
    """Which tasks belong to the held-out side of the split.

    The decision is a function of the key alone, so a held-out task is held out in every pool
    built with the same ``held_out_frac``, whatever the seed or the pool's order, and can never
    appear in training. The one split of the library: the task pools
    (:func:`~curriculax.tasks.make_pools`) and self-play's seed tasks
    (:func:`~curriculax.selfplay.curriculum_evolve`) both use it.

    Args:
      keys: ``u32[...]`` task keys.
      held_out_frac: share of the task space held out, in (0, 1).

    Returns:
      ``bool[...]`` True for held-out tasks.
    """
    threshold = np.uint32(_split_threshold(held_out_frac))
    return mix32(jnp.asarray(keys, jnp.uint32) ^ np.uint32(SPLIT_SALT)) < threshold
