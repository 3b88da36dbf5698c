"""Batched autoregressive sampling from the policy, and the log-probabilities training needs.

Completions are generated for a whole batch of left-padded prompts at once with a static number
of new tokens. Sampling runs on a KV cache (one prompt pass, then one token per step); on 2 CPU
cores with ~30-token sequences it is about 4x faster than recomputing the whole sequence for
every new token (``use_cache=False``, kept as a reference implementation).

The policy emits only a given set of output tokens: by default every token that can appear in
an answer of some family; pass the union of the run's ``spec.answer_tokens()`` to restrict it
to the families' alphabets, as a constrained decoder would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from curriculax.rl._model import NEG_INF, Params
from curriculax.tasks import EOS, PAD, PROMPT_ONLY_TOKENS

Array = jax.Array


class Samples(NamedTuple):
    """A batch of completions.

    Attributes:
      tokens: ``i32[B, T]`` generated tokens, PAD after the first EOS.
      logprobs: ``f32[B, T]`` log-probability of each token under the sampling distribution
        (temperature applied), 0 where ``mask`` is False.
      mask: ``bool[B, T]`` positions up to and including the first EOS (all True when no EOS
        was generated).
    """

    tokens: Array
    logprobs: Array
    mask: Array


def default_output_tokens(vocab_size: int) -> tuple[int, ...]:
    """Every token id below ``vocab_size`` that can appear in an answer (not prompt-only)."""
    return tuple(t for t in range(vocab_size) if t not in PROMPT_ONLY_TOKENS)


def check_output_tokens(output_tokens: Sequence[int], vocab_size: int) -> tuple[int, ...]:
    """Validates a set of token ids the policy may emit; returns it sorted, as a tuple."""
    tokens = tuple(sorted({int(t) for t in output_tokens}))
    bad = [t for t in tokens if not 0 <= t < vocab_size or t == PAD]
    if bad or EOS not in tokens:
        raise ValueError(
            f"output_tokens must be ids in [1, {vocab_size}) and include EOS ({EOS}); got "
            f"{tokens} (offending: {bad or 'EOS missing'}). PAD is never emitted."
        )
    return tokens


def policy_log_softmax(
    logits: Array, temperature: float = 1.0, output_tokens: Sequence[int] | None = None
) -> Array:
    """Log-probabilities of the policy's token distribution from raw logits ``f32[..., V]``.

    The distribution is ``softmax(logits / temperature)`` restricted to ``output_tokens``
    (default :func:`default_output_tokens`): every other token gets probability 0 (a finite
    log-probability of about ``-1e9``), at any temperature > 0.

    Args:
      logits: ``f32[..., V]`` raw logits.
      temperature: softmax temperature (> 0).
      output_tokens: token ids the policy may emit: ids in ``[1, V)``, EOS included, else a
        ValueError (checked at trace time).

    Returns:
      ``f32[..., V]`` log-probabilities.
    """
    vocab_size = logits.shape[-1]
    if output_tokens is None:
        output_tokens = default_output_tokens(vocab_size)
    allowed = np.zeros((vocab_size,), bool)
    allowed[list(check_output_tokens(output_tokens, vocab_size))] = True
    # Blocked tokens are masked with -inf, not a finite value: a finite mask (it was -1e9) fell
    # above the allowed tokens once logits / temperature went below it (logits -2 at
    # temperature 1e-9), and they took the mass. The clip keeps an overflowed scaled logit
    # finite (all allowed at -inf would give NaN); the maximum gives blocked tokens a finite
    # log-probability (0 * -inf is NaN in an entropy). At ordinary temperatures the allowed
    # tokens' log-probabilities are bit for bit those of a finite mask.
    big = float(np.finfo(np.float32).max) / 2
    scaled = jnp.where(allowed, jnp.clip(logits / temperature, -big, big), -jnp.inf)
    return jnp.maximum(jax.nn.log_softmax(scaled, axis=-1), NEG_INF)


def completion_mask(tokens: Array) -> Array:
    """``bool[..., T]`` True up to and including the first EOS of each row."""
    eos = tokens == EOS
    return (jnp.cumsum(eos, axis=-1) - eos) == 0


def _pick(
    key: Array, logits: Array, temperature: float, greedy: bool, output_tokens
) -> tuple[Array, Array]:
    logp = policy_log_softmax(logits, temperature, output_tokens)
    token = jnp.argmax(logp, axis=-1) if greedy else jax.random.categorical(key, logp, axis=-1)
    token = token.astype(jnp.int32)
    return token, jnp.take_along_axis(logp, token[:, None], axis=-1)[:, 0]


def sample(
    graphdef: nnx.GraphDef,
    params: Params,
    prompts: Array,
    key: Array,
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    greedy: bool = False,
    output_tokens: Sequence[int] | None = None,
    use_cache: bool = True,
) -> Samples:
    """Generates ``max_new_tokens`` tokens after each prompt.

    Traceable (use inside ``jit``; ``max_new_tokens``, ``temperature``, ``greedy`` and
    ``use_cache`` are static). Rows keep sampling after their EOS so shapes stay static; those
    tokens are replaced by PAD and masked out.

    Args:
      graphdef: the policy's ``GraphDef`` (see :func:`~curriculax.rl.init_policy`).
      params: the policy's params dict.
      prompts: ``i32[B, P]`` left-padded prompts ending in SEP.
      key: PRNG key (unused when ``greedy``).
      max_new_tokens: ``T``.
      temperature: softmax temperature of the sampling distribution; the returned
        log-probabilities are under that same distribution.
      greedy: take the most likely token at every step (evaluation).
      output_tokens: token ids the policy may emit (see :func:`policy_log_softmax`; a
        ValueError unless ids in ``[1, V)`` with EOS); default: every token that is not
        prompt-only.
      use_cache: decode on a KV cache (default) or recompute the whole sequence per token.

    Returns:
      :class:`Samples` with leaves ``[B, T]``.

    Example:
      >>> import functools
      >>> from curriculax.rl import TransformerConfig, init_policy
      >>> from curriculax.tasks import VOCAB_SIZE
      >>> cfg = TransformerConfig(VOCAB_SIZE, width=16, depth=1, heads=2, max_len=16)
      >>> graphdef, params = init_policy(cfg, jax.random.key(0))
      >>> prompts = jnp.array([[1, 5, 17, 18, 2],     # <bos> <rev> s0 s1 <sep>
      ...                      [0, 1, 5, 19, 2]])     # <pad> <bos> <rev> s2 <sep>
      >>> out = jax.jit(functools.partial(sample, graphdef, max_new_tokens=3))(
      ...     params, prompts, jax.random.key(1))
      >>> out.tokens.shape, out.logprobs.shape, out.mask.shape
      ((2, 3), (2, 3), (2, 3))
    """
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens!r}.")
    model = nnx.merge(graphdef, params)
    batch, prompt_width = prompts.shape
    keys = jax.random.split(key, max_new_tokens)
    if use_cache:
        logits, cache = model.prefill(prompts, prompt_width + max_new_tokens)
        first, first_logp = _pick(keys[0], logits, temperature, greedy, output_tokens)
        start = jnp.sum(prompts != PAD, axis=1).astype(jnp.int32)

        def step(carry, xs):
            token, cache = carry
            t, step_key = xs
            logits, cache = model.decode(token, start + t - 1, prompt_width + t - 1, cache)
            token, logp = _pick(step_key, logits, temperature, greedy, output_tokens)
            return (token, cache), (token, logp)

        steps = (jnp.arange(1, max_new_tokens, dtype=jnp.int32), keys[1:])
        _, (rest, rest_logp) = jax.lax.scan(step, (first, cache), steps)
        tokens = jnp.concatenate([first[:, None], rest.T], axis=1)
        logprobs = jnp.concatenate([first_logp[:, None], rest_logp.T], axis=1)
    else:
        seq = jnp.concatenate([prompts, jnp.full((batch, max_new_tokens), EOS, jnp.int32)], 1)

        def step(seq, xs):
            t, step_key = xs
            logits = model(seq)
            column = prompt_width + t - 1
            token, logp = _pick(step_key, logits[:, column], temperature, greedy, output_tokens)
            return jax.lax.dynamic_update_slice_in_dim(seq, token[:, None], column + 1, 1), logp

        steps = (jnp.arange(max_new_tokens, dtype=jnp.int32), keys)
        seq, logprobs = jax.lax.scan(step, seq, steps)
        tokens, logprobs = seq[:, prompt_width:], logprobs.T
    mask = completion_mask(tokens)
    return Samples(
        tokens=jnp.where(mask, tokens, PAD),
        logprobs=jnp.where(mask, logprobs, 0.0),
        mask=mask,
    )


def score_completions(
    graphdef: nnx.GraphDef,
    params: Params,
    prompts: Array,
    completions: Array,
    *,
    temperature: float = 1.0,
    output_tokens: Sequence[int] | None = None,
) -> tuple[Array, Array]:
    """Log-probability and entropy of given completions in one causal forward pass.

    Args:
      graphdef: the policy's ``GraphDef``.
      params: the policy's params dict.
      prompts: ``i32[B, P]`` left-padded prompts.
      completions: ``i32[B, T]`` tokens to score (PAD after EOS, as :func:`sample` returns).
      temperature: the sampling temperature the completions were drawn with.
      output_tokens: the token ids the completions were drawn from (checked as in
        :func:`policy_log_softmax`).

    Returns:
      ``(logprobs f32[B, T], entropy f32[B, T])``: log-probability of each completion token and
      the entropy of the policy's distribution at that position (meaningless past EOS: mask it).
    """
    model = nnx.merge(graphdef, params)
    prompt_width = prompts.shape[1]
    num_new = completions.shape[1]
    h, _ = model.features(jnp.concatenate([prompts, completions], axis=1))
    # Only the columns that predict completion tokens go through the output head.
    logits = model.head(h[:, prompt_width - 1 : prompt_width - 1 + num_new])
    logp_all = policy_log_softmax(logits, temperature, output_tokens)
    logprobs = jnp.take_along_axis(logp_all, completions[..., None], axis=-1)[..., 0]
    # Disallowed tokens have probability exactly 0, so their (finite) log-probability adds 0.
    entropy = -jnp.sum(jnp.exp(logp_all) * logp_all, axis=-1)
    return logprobs, entropy


def answer_probability(
    graphdef: nnx.GraphDef,
    params: Params,
    prompts: Array,
    answers: Array,
    answer_len: Array,
    *,
    temperature: float = 1.0,
    output_tokens: Sequence[int] | None = None,
) -> Array:
    """The exact probability that one sampled completion matches its answer, EOS included.

    Exact match (:func:`~curriculax.tasks.verify`) reads only the first ``answer_len``
    completion positions, so its probability under :func:`sample` is the product, over those
    positions, of the policy's probability of the answer token given the prompt and the
    answer's earlier tokens: one teacher-forced forward pass (:func:`score_completions`)
    instead of many sampled rollouts, with no sampling noise. It assumes the rollouts may
    generate the whole answer (``max_new_tokens >= answer_len``): with fewer new tokens the
    true probability is 0, which this does not see. :func:`~curriculax.rl.grpo_solver`'s
    ``rollout`` and ``evaluate`` refuse tasks whose answer width exceeds its
    ``max_new_tokens``, so for tasks that solver accepts the assumption holds.

    Args:
      graphdef: the policy's ``GraphDef``.
      params: the policy's params dict.
      prompts: ``i32[B, P]`` left-padded prompts.
      answers: ``i32[B, A]`` answer tokens then EOS, right-padded (a task set's ``answer``).
      answer_len: ``i32[B]`` answer tokens including EOS; a row below 1 gets probability 0,
        as :func:`~curriculax.tasks.verify` scores it.
      temperature: the sampling temperature of the rollouts this stands for.
      output_tokens: the token ids the rollouts are drawn from.

    Returns:
      ``f32[B]`` the probability of a reward of 1 under exact match, in [0, 1].

    Example:
      >>> from curriculax.rl import TransformerConfig, init_policy
      >>> from curriculax.tasks import VOCAB_SIZE, ReversalSpec, generate
      >>> tasks = generate(jax.random.key(0), ReversalSpec(num_levels=2), 2)  # 2 per level
      >>> cfg = TransformerConfig(VOCAB_SIZE, width=16, depth=1, heads=2, max_len=16)
      >>> graphdef, params = init_policy(cfg, jax.random.key(1))
      >>> p = jax.jit(answer_probability, static_argnums=0)(
      ...     graphdef, params, tasks.prompt, tasks.answer, tasks.answer_len)
      >>> p.shape, bool(jnp.all((p > 0) & (p < 1)))
      ((4,), True)
    """
    logprobs, _ = score_completions(
        graphdef,
        params,
        prompts,
        answers,
        temperature=temperature,
        output_tokens=output_tokens,
    )
    in_answer = jnp.arange(answers.shape[1]) < answer_len[:, None]
    p = jnp.exp(jnp.sum(jnp.where(in_answer, logprobs, 0.0), axis=1))
    # verify reads no position for answer_len < 1 and scores it 0, not the empty product 1.
    return jnp.where(answer_len >= 1, p, 0.0)
