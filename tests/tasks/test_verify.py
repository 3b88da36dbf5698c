"""verify: exact match up to and including EOS, and partial credit, on hand-made completions."""

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import tasks as T

S0, S1, S2 = T.SYMBOL_0, T.SYMBOL_0 + 1, T.SYMBOL_0 + 2
EOS, PAD = T.EOS, T.PAD
ANSWER = jnp.array([S2, S1, S0, EOS, PAD])  # width A = 5, answer_len = 4


def _verify(completion):
    exact, partial = jax.jit(T.verify)(ANSWER, jnp.array(4), jnp.array(completion))
    return float(exact), float(partial)


def test_right_answer_then_anything():
    assert _verify([S2, S1, S0, EOS, PAD, PAD]) == (1.0, 1.0)
    assert _verify([S2, S1, S0, EOS, S1, S1]) == (1.0, 1.0)  # after EOS is ignored


def test_wrong_and_partial():
    assert _verify([S2, S0, S0, EOS, PAD, PAD]) == (0.0, 0.75)
    assert _verify([S0, S0, S2, S0, S1, EOS]) == (0.0, 0.0)


def test_missing_eos_and_extra_tokens():
    assert _verify([S2, S1, S0, S0, EOS, PAD]) == (0.0, 0.75)  # an extra token before EOS
    assert _verify([S2, S1, S0, S1, S1, S1]) == (0.0, 0.75)  # never stops
    assert _verify([S2, S1, EOS, PAD, PAD, PAD]) == (0.0, 0.5)  # stops early


def test_tokens_after_an_early_eos_earn_no_credit():
    """Positions after the completion's first EOS count as PAD: a completion that stops early
    and then "writes" the rest of the answer once earned partial credit for it."""
    assert _verify([S2, EOS, S0, EOS, PAD, PAD]) == (0.0, 0.25)  # once (0.0, 0.75)
    assert _verify([S2, EOS, PAD, PAD, PAD, PAD]) == (0.0, 0.25)  # as sample() returns it
    assert _verify([EOS, S1, S0, EOS, PAD, PAD]) == (0.0, 0.0)
    assert _verify([S2, S1, S0, EOS, S0, EOS]) == (1.0, 1.0)  # after the right EOS: ignored
    # Broadcast over a group, in traced code: the same rule per completion.
    completions = jnp.array([[S2, S1, EOS, EOS], [S2, EOS, S0, S0], [S2, S1, S0, S0]])
    exact, partial = jax.jit(T.verify)(ANSWER[None], jnp.array([4]), completions)
    np.testing.assert_array_equal(exact, [0.0, 0.0, 0.0])
    np.testing.assert_allclose(partial, [0.5, 0.25, 0.75])


def test_completion_shorter_than_answer():
    assert _verify([S2, S1, S0]) == (0.0, 0.75)
    assert _verify([S2, S1, S0, EOS]) == (1.0, 1.0)


def test_broadcasts_over_groups():
    answers = jnp.array([[S0, EOS, PAD], [S1, S2, EOS]])  # G = 2
    answer_len = jnp.array([2, 3])
    completions = jnp.array(
        [
            [[S0, EOS, S1], [S1, EOS, PAD]],
            [[S1, S2, EOS], [S1, S1, EOS]],
        ]
    )  # [G=2, K=2, T=3]
    exact, partial = T.verify(answers[:, None], answer_len[:, None], completions)
    np.testing.assert_array_equal(exact, [[1.0, 0.0], [1.0, 0.0]])
    np.testing.assert_allclose(partial, [[1.0, 0.5], [1.0, 2 / 3]])
    assert exact.dtype == partial.dtype == jnp.float32


def test_an_answer_len_below_one_is_never_exact():
    """An ``answer_len`` of 0 or less reads no position, and once scored every completion
    exact (1.0) while its partial credit was 0: exact is now 0 too, in traced code."""
    lens = jnp.array([0, -1, -(2**31), 4])
    completion = jnp.array([S0, S0, S0, S0, S0])
    exact, partial = jax.jit(jax.vmap(T.verify, in_axes=(None, 0, None)))(ANSWER, lens, completion)
    np.testing.assert_array_equal(exact, [0.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(partial, [0.0, 0.0, 0.0, 0.25])
    assert _verify([S2, S1, S0, EOS]) == (1.0, 1.0)  # a valid answer_len is unchanged


def test_an_answer_len_above_the_width_is_never_exact():
    """An ``answer_len`` above the answer width ``A`` asks for positions the answer does not
    hold; it once scored exact (1.0) with partial credit below 1. Exact is now 0, in traced
    code, and partial credit is unchanged."""
    lens = jnp.array([5, 6, 2**31 - 1])
    completion = jnp.array([S2, S1, S0, EOS, PAD, PAD])
    exact, partial = jax.jit(jax.vmap(T.verify, in_axes=(None, 0, None)))(ANSWER, lens, completion)
    np.testing.assert_array_equal(exact, [1.0, 0.0, 0.0])
    np.testing.assert_allclose(partial, [1.0, 5 / 6, 5 / (2**31 - 1)])
