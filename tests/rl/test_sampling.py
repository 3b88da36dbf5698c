"""Batched sampling: shapes, masks, determinism, and agreement with the scoring pass."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curriculax import rl
from curriculax import tasks as T

CFG = rl.TransformerConfig(T.VOCAB_SIZE, width=32, depth=2, heads=4, max_len=32)
SPEC = T.ReversalSpec(num_levels=6)
MAX_NEW = SPEC.answer_width  # 7


@functools.cache
def _setup():
    graphdef, params = rl.init_policy(CFG, jax.random.key(0))
    pool = T.generate(jax.random.key(1), SPEC, 8)
    return graphdef, params, pool.prompt


@functools.cache
def _sampler(**kwargs):
    graphdef, _, _ = _setup()
    return jax.jit(functools.partial(rl.sample, graphdef, max_new_tokens=MAX_NEW, **kwargs))


def test_shapes_masks_and_padding():
    _, params, prompts = _setup()
    out = _sampler()(params, prompts, jax.random.key(2))
    n = prompts.shape[0]
    assert out.tokens.shape == out.logprobs.shape == out.mask.shape == (n, MAX_NEW)
    assert (out.tokens.dtype, out.logprobs.dtype, out.mask.dtype) == (jnp.int32, jnp.float32, bool)
    tokens, mask = np.asarray(out.tokens), np.asarray(out.mask)
    for row, m in zip(tokens, mask):
        eos = np.flatnonzero(row == T.EOS)
        length = eos[0] + 1 if eos.size else MAX_NEW
        np.testing.assert_array_equal(m, np.arange(MAX_NEW) < length)
        assert np.all(row[length:] == T.PAD) and np.all(row[:length] != T.PAD)
    assert np.all(np.asarray(out.logprobs)[~mask] == 0.0)
    assert np.all(np.asarray(out.logprobs)[mask] < 0.0)
    assert 0 < mask.sum() < mask.size  # some rows stop early, some run to the end


def test_completion_mask_hand_made():
    tokens = jnp.array([[20, 3, 20, 3], [20, 20, 20, 20], [3, 0, 0, 0]])
    np.testing.assert_array_equal(
        rl.completion_mask(tokens),
        [[True, True, False, False], [True] * 4, [True, False, False, False]],
    )


def test_same_key_same_samples_and_greedy_ignores_the_key():
    _, params, prompts = _setup()
    a = _sampler()(params, prompts, jax.random.key(3))
    b = _sampler()(params, prompts, jax.random.key(3))
    c = _sampler()(params, prompts, jax.random.key(4))
    np.testing.assert_array_equal(a.tokens, b.tokens)
    assert not np.array_equal(a.tokens, c.tokens)
    g1 = _sampler(greedy=True)(params, prompts, jax.random.key(3))
    g2 = _sampler(greedy=True)(params, prompts, jax.random.key(4))
    np.testing.assert_array_equal(g1.tokens, g2.tokens)


def test_cache_and_full_recompute_agree():
    _, params, prompts = _setup()
    cached = _sampler()(params, prompts, jax.random.key(5))
    full = _sampler(use_cache=False)(params, prompts, jax.random.key(5))
    np.testing.assert_array_equal(cached.tokens, full.tokens)
    np.testing.assert_allclose(cached.logprobs, full.logprobs, atol=1e-5)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampled_logprobs_match_the_scoring_pass(temperature):
    graphdef, params, prompts = _setup()
    out = _sampler(temperature=temperature)(params, prompts, jax.random.key(6))
    score = jax.jit(functools.partial(rl.score_completions, graphdef, temperature=temperature))
    logprobs, entropy = score(params, prompts, out.tokens)
    np.testing.assert_allclose(jnp.where(out.mask, logprobs, 0.0), out.logprobs, atol=1e-5)
    assert np.all(np.asarray(entropy) > 0) and np.all(np.asarray(entropy) <= np.log(27) + 1e-4)


def test_output_tokens_restrict_the_policy():
    _, params, prompts = _setup()
    allowed = SPEC.answer_tokens()
    out = _sampler(output_tokens=allowed)(params, prompts, jax.random.key(7))
    emitted = np.asarray(out.tokens)[np.asarray(out.mask)]
    assert set(emitted.tolist()) <= set(allowed)
    default = _sampler()(params, prompts, jax.random.key(7))
    assert not set(np.asarray(default.tokens).ravel().tolist()) <= set(T.PROMPT_ONLY_TOKENS[1:])
    assert T.PAD not in rl.default_output_tokens(T.VOCAB_SIZE)


def test_blocked_tokens_stay_blocked_at_a_tiny_temperature():
    """The mask was applied after dividing by the temperature: at ``temperature=1e-9`` (which
    ``GRPOConfig`` accepts) logits of -2 became -2e9, below the -1e9 mask, so PAD and the
    other blocked tokens took the probability mass."""
    logits = jnp.full((2, T.VOCAB_SIZE), -2.0).at[1, 20].set(-1.0)
    allowed = rl.default_output_tokens(T.VOCAB_SIZE)
    blocked = np.setdiff1d(np.arange(T.VOCAB_SIZE), allowed)
    for temperature in (1e-9, 1e-30):
        p = np.exp(np.asarray(rl.policy_log_softmax(logits, temperature)))
        assert np.all(p[:, blocked] == 0.0)
        np.testing.assert_allclose(p[0, list(allowed)], 1 / len(allowed), rtol=1e-5)
        np.testing.assert_allclose(p[1, 20], 1.0)
    graphdef, params, prompts = _setup()
    out = _sampler(temperature=1e-9)(params, prompts, jax.random.key(8))
    emitted = np.asarray(out.tokens)[np.asarray(out.mask)]
    assert set(emitted.tolist()) <= set(allowed)
    score = jax.jit(functools.partial(rl.score_completions, graphdef, temperature=1e-9))
    logprobs, entropy = score(params, prompts, out.tokens)
    np.testing.assert_allclose(jnp.where(out.mask, logprobs, 0.0), out.logprobs, atol=1e-5)
    assert np.all(np.isfinite(np.asarray(entropy)))


def test_log_softmax_unchanged_at_ordinary_temperatures():
    """Robust masking must keep the restricted softmax of ``logits / temperature``."""
    logits = jax.random.normal(jax.random.key(0), (3, T.VOCAB_SIZE)) * 3.0
    allowed = list(SPEC.answer_tokens())
    for temperature in (0.3, 1.0, 2.0):
        got = np.asarray(rl.policy_log_softmax(logits, temperature, allowed))
        want = jax.nn.log_softmax(np.asarray(logits)[:, allowed] / temperature, axis=-1)
        np.testing.assert_allclose(got[:, allowed], want, atol=1e-5)
        assert np.all(np.exp(np.delete(got, allowed, axis=1)) == 0.0)


@pytest.mark.parametrize(
    ("output_tokens", "match"),
    [((), "EOS missing"), ((-1, T.EOS), r"offending: \[-1\]"), ((T.PAD, T.EOS), r"\[0\]")],
)
def test_public_sampling_functions_check_output_tokens(output_tokens, match):
    """``sample``, ``score_completions`` and ``policy_log_softmax`` once took any
    ``output_tokens``: ``()`` sampled the whole vocabulary, PAD included, and ``-1`` wrapped
    round to the last id."""
    graphdef, params, prompts = _setup()
    with pytest.raises(ValueError, match=match):
        rl.policy_log_softmax(jnp.zeros((T.VOCAB_SIZE,)), 1.0, output_tokens)
    with pytest.raises(ValueError, match=match):
        rl.sample(
            graphdef,
            params,
            prompts,
            jax.random.key(0),
            max_new_tokens=2,
            output_tokens=output_tokens,
        )
    with pytest.raises(ValueError, match=match):
        rl.score_completions(graphdef, params, prompts, prompts[:, :2], output_tokens=output_tokens)


def test_answer_probability_is_zero_where_verify_scores_zero():
    """``answer_probability`` gave 1 (an empty product) for ``answer_len <= 0``, while
    :func:`curriculax.tasks.verify` scores such a task 0 even for the answer itself."""
    graphdef, params, _ = _setup()
    pool = T.generate(jax.random.key(1), SPEC, 1)
    for fill in (0, -1):
        alen = jnp.full_like(pool.answer_len, fill)
        p = rl.answer_probability(graphdef, params, pool.prompt, pool.answer, alen)
        exact, _ = T.verify(pool.answer, alen, pool.answer)
        np.testing.assert_array_equal(p, exact)
        np.testing.assert_array_equal(p, 0.0)
    p = rl.answer_probability(graphdef, params, pool.prompt, pool.answer, pool.answer_len)
    assert np.all((np.asarray(p) > 0) & (np.asarray(p) < 1))
