"""Token layout and the exact encodings of known tasks in every family."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curriculax import tasks as T


def test_vocabulary_layout_is_fixed():
    assert (T.PAD, T.BOS, T.SEP, T.EOS, T.PLUS, T.REVERSE, T.COPY) == (0, 1, 2, 3, 4, 5, 6)
    assert (T.DIGIT_0, T.SYMBOL_0, T.NUM_SYMBOLS, T.VOCAB_SIZE) == (7, 17, 16, 33)
    assert T.decode([0, 1, 5, 17, 32, 2, 7, 16, 4, 3]) == "<bos> <rev> s0 s15 <sep> 0 9 + <eos>"
    with pytest.raises(ValueError, match="outside the vocabulary"):
        T.token_name(33)


def test_reversal_encoding():
    spec = T.ReversalSpec(num_symbols=8, min_length=1, num_levels=12)
    prompt, answer, answer_len = spec.encode(2, jnp.array([[0, 5, 7]]))
    np.testing.assert_array_equal(prompt, [[1, 5, 17, 22, 24, 2]])
    np.testing.assert_array_equal(answer, [[24, 22, 17, 3]])
    np.testing.assert_array_equal(answer_len, [4])
    assert (spec.prompt_width, spec.answer_width) == (15, 13)
    assert spec.radices(2) == (8, 8, 8)
    assert spec.answer_tokens() == (3, 17, 18, 19, 20, 21, 22, 23, 24)


def test_copy_encoding():
    prompt, answer, answer_len = T.CopySpec().encode(1, jnp.array([[3, 1]]))
    assert T.decode(prompt[0]) == "<bos> <copy> s3 s1 <sep>"
    assert T.decode(answer[0]) == "s3 s1 <eos>"
    assert int(answer_len[0]) == 3


def test_addition_encoding_is_little_endian():
    spec = T.AdditionSpec(min_digits=1, num_levels=8)
    # 47 + 85 = 132. Digits are drawn most-significant first with the leading radix 9 (1..9).
    digits = jnp.array([[4 - 1, 7, 8 - 1, 5], [1 - 1, 2, 3 - 1, 4]])
    prompt, answer, answer_len = spec.encode(1, digits)
    assert T.decode(prompt[0]) == "<bos> 7 4 + 5 8 <sep>"
    assert T.decode(answer[0]) == "2 3 1 <eos>"
    assert T.decode(prompt[1]) == "<bos> 2 1 + 4 3 <sep>"  # 12 + 34 = 46: no carry out
    np.testing.assert_array_equal(answer[1], [T.DIGIT_0 + 6, T.DIGIT_0 + 4, T.EOS, T.PAD])
    np.testing.assert_array_equal(answer_len, [4, 3])
    assert spec.radices(0) == (10, 10)  # one-digit operands include 0
    assert spec.radices(1) == (9, 10, 9, 10)
    assert (spec.prompt_width, spec.answer_width) == (19, 10)


def test_addition_answers_are_the_sums():
    spec = T.AdditionSpec()
    pool = T.generate(jax.random.key(0), spec, 100)
    for prompt, answer in zip(np.asarray(pool.prompt), np.asarray(pool.answer)):
        text = T.decode(prompt).split()
        plus = text.index("+")
        a = int("".join(text[1:plus][::-1]))
        b = int("".join(text[plus + 1 : -1][::-1]))
        got = T.decode(answer).split()
        assert got[-1] == "<eos>"
        assert int("".join(got[:-1][::-1])) == a + b
        assert len(text[1:plus]) == len(text[plus + 1 : -1])


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: T.ReversalSpec(num_symbols=17), "num_symbols"),
        (lambda: T.ReversalSpec(num_symbols=0), "num_symbols"),
        (lambda: T.CopySpec(min_length=0), "min_length"),
        (lambda: T.ReversalSpec(num_levels=0), "num_levels"),
        (lambda: T.AdditionSpec(min_digits=2, num_levels=9), "at most 9"),
        (lambda: T.AdditionSpec(min_digits=0), "min_digits"),
    ],
)
def test_bad_specs_fail_at_construction(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: T.ReversalSpec(num_symbols=2.5, num_levels=2), r"ReversalSpec\.num_symbols"),
        (lambda: T.ReversalSpec(num_symbols=4, num_levels=2.0), r"ReversalSpec\.num_levels"),
        (lambda: T.ReversalSpec(min_length=1.5, num_levels=2), r"ReversalSpec\.min_length"),
        (lambda: T.CopySpec(num_symbols=True), r"CopySpec\.num_symbols .*bool"),
        (lambda: T.CopySpec(num_levels="3"), r"CopySpec\.num_levels"),
        (lambda: T.AdditionSpec(min_digits=1.5, num_levels=2), r"AdditionSpec\.min_digits"),
        (lambda: T.AdditionSpec(num_levels=2.0), r"AdditionSpec\.num_levels"),
    ],
)
def test_non_integer_spec_fields_fail_at_construction(make, match):
    """Floats (2.0 included), bools and strings were accepted and failed later, in generate,
    with a TypeError that named no field."""
    with pytest.raises(TypeError, match=match):
        make()


def test_integer_spec_fields_are_python_ints():
    spec = T.ReversalSpec(num_symbols=np.int64(4), min_length=np.int32(2), num_levels=np.int8(3))
    assert spec == T.ReversalSpec(num_symbols=4, min_length=2, num_levels=3)
    assert all(type(getattr(spec, f)) is int for f in ("num_symbols", "min_length", "num_levels"))
    assert type(T.AdditionSpec(num_levels=np.int64(3)).num_levels) is int


def test_level_out_of_range():
    with pytest.raises(ValueError, match="outside"):
        T.ReversalSpec(num_levels=3).radices(3)


def _python_carries(prompt):
    text = T.decode(prompt).split()
    plus = text.index("+")
    a, b = [int(t) for t in text[1:plus]], [int(t) for t in text[plus + 1 : -1]]
    carry = count = 0
    for x, y in zip(a, b, strict=True):  # least-significant digit first
        carry = int(x + y + carry >= 10)
        count += carry
    return count


def test_addition_carries_vary_within_a_level():
    # Every level adds numbers of one digit count, but its tasks need 0 .. d carries: a
    # difficulty the level label does not show.
    spec = T.AdditionSpec(num_levels=5)
    pool = T.generate(jax.random.key(0), spec, 200)
    got = np.asarray(jax.jit(T.carries)(pool.prompt))
    want = [_python_carries(p) for p in np.asarray(pool.prompt)]
    np.testing.assert_array_equal(got, want)
    level = np.asarray(pool.level)
    for lv in range(1, spec.num_levels):
        d = spec.digits(lv)
        seen = set(got[level == lv].tolist())
        assert {0, 1, 2} <= seen and max(seen) <= d, (lv, seen)


def test_a_study_pool_of_additions_has_levels_with_mixed_carries():
    from experiments._builders import GRPOExperimentConfig, TaskConfig, make_study_pool

    task = TaskConfig(family="addition", num_levels=4, pool_size=200, held_out_per_level=8)
    pool = make_study_pool(GRPOExperimentConfig(task=task))
    c = np.asarray(T.carries(pool.train.prompt))
    for lv in (1, 2, 3):
        assert len(set(c[pool.category == lv].tolist())) >= 3
