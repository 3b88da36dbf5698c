"""Task keys: FNV-1a + fmix32 over non-PAD tokens, stable and padding-independent."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curriculax import tasks as T


def _reference_key(tokens):
    """Independent pure-Python FNV-1a (one byte per token) + MurmurHash3 fmix32."""
    h = 0x811C9DC5
    for t in tokens:
        if t != 0:
            h = ((h ^ t) * 0x01000193) & 0xFFFFFFFF
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    return h ^ (h >> 16)


def test_known_task_has_a_hard_coded_key():
    # Reversal of (s0, s5, s7): <bos> <rev> s0 s5 s7 <sep> -> s7 s5 s0 <eos>.
    prompt, answer, _ = T.ReversalSpec().encode(2, jnp.array([[0, 5, 7]]))
    key = int(T.content_key(prompt, answer)[0])
    assert key == _reference_key([1, 5, 17, 22, 24, 2, 24, 22, 17, 3])
    assert key == 0x8716E949


def test_keys_match_reference_and_ignore_padding():
    pool = T.generate(jax.random.key(3), T.AdditionSpec(), 100)
    for prompt, answer, key in zip(*map(np.asarray, (pool.prompt, pool.answer, pool.key))):
        assert int(key) == _reference_key([*prompt.tolist(), *answer.tolist()])
    padded = T.pad_tasks(pool, prompt_width=30, answer_width=20)
    np.testing.assert_array_equal(T.content_key(padded.prompt, padded.answer), pool.key)
    assert pool.key.dtype == jnp.uint32


def test_keys_are_unique_within_pools():
    for spec in (T.ReversalSpec(), T.CopySpec(), T.AdditionSpec()):
        pool = T.generate(jax.random.key(0), spec, 100)
        assert np.unique(np.asarray(pool.key)).size == pool.key.shape[0]
        T.check_unique_keys(pool)
    with pytest.raises(ValueError, match="more than once"):
        T.check_unique_keys(T.concat_tasksets([pool, T.take(pool, jnp.arange(3))]))


def test_held_out_mask_is_a_function_of_the_key():
    keys = jnp.arange(20000, dtype=jnp.uint32)
    held = np.asarray(T.held_out_mask(keys, 0.25))
    assert abs(held.mean() - 0.25) < 0.02
    # Nested: what is held out at 0.1 is held out at 0.25 too.
    assert not np.any(np.asarray(T.held_out_mask(keys, 0.1)) & ~held)
