"""Family-agnostic verification: every task is "prompt tokens -> answer tokens"."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from curriculax.tasks._vocab import EOS, PAD

Array = jax.Array


def verify(answer: Array, answer_len: Array, completion: Array) -> tuple[Array, Array]:
    """Scores completions against answers.

    Only the first ``answer_len`` completion positions are read: the answer tokens and the EOS
    that must follow them. Whatever comes after that EOS is ignored (sampling stops there), and
    so is whatever comes after the completion's own first EOS: those positions count as PAD,
    so a completion that stops early earns no credit for tokens past its stop.

    - **exact**: 1.0 iff every one of those positions matches, EOS included. A completion that
      is right but keeps going instead of emitting EOS, or stops early, scores 0.
    - **partial**: the fraction of those ``answer_len`` positions that match, so a correct
      answer with a missing EOS scores ``(answer_len - 1) / answer_len``.

    Leading axes broadcast, e.g. ``answer`` ``[G, 1, A]`` against ``completion`` ``[G, K, T]``.
    ``T`` may differ from ``A``: a completion shorter than the answer cannot match it in full.

    Args:
      answer: ``i32[..., A]`` answer tokens then EOS, right-padded with PAD.
      answer_len: ``i32[...]`` answer tokens including EOS (at least 1).
      completion: ``i32[..., T]`` generated tokens.

    Returns:
      ``(exact, partial)``, both ``f32[...]`` in [0, 1].

    Example:
      >>> exact, partial = verify(jnp.array([19, 18, 3]), jnp.array(3), jnp.array([19, 17, 3, 0]))
      >>> float(exact), float(partial)
      (0.0, 0.6666666865348816)
    """
    answer = jnp.asarray(answer)
    completion = jnp.asarray(completion)
    answer_len = jnp.asarray(answer_len)
    width = answer.shape[-1]
    if completion.shape[-1] < width:
        pad = [(0, 0)] * (completion.ndim - 1) + [(0, width - completion.shape[-1])]
        completion = jnp.pad(completion, pad, constant_values=PAD)
    completion = completion[..., :width]
    in_answer = jnp.arange(width) < answer_len[..., None]
    correct = (completion == answer) & in_answer
    exact = jnp.all(correct | ~in_answer, axis=-1)
    # Positions after the completion's first EOS are PAD (as sample() returns them): no partial
    # credit for tokens written after stopping. Exact is unaffected, read on the raw tokens: a
    # right completion's first EOS is its last answer position.
    is_eos = completion == EOS
    after_eos = jnp.cumsum(is_eos, axis=-1) - is_eos > 0
    stopped = jnp.where(after_eos, PAD, completion)
    credited = (stopped == answer) & in_answer
    # An answer_len below 1 reads no position: nothing was matched, so nothing is exact. One
    # above the answer width asks for positions the answer does not hold: not exact either.
    exact = jnp.where((answer_len >= 1) & (answer_len <= width), exact, False)
    exact = exact.astype(jnp.float32)
    partial = jnp.sum(credited, axis=-1) / jnp.maximum(answer_len, 1)
    return exact, partial.astype(jnp.float32)
