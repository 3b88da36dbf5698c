"""curriculax._spread: the range of a group's valid values, and whether they vary, exactly."""

import doctest

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curriculax import _spread
from curriculax._spread import valid_range, varies

# Values whose float32 group mean is off by a rounding step from the value itself.
AWKWARD = [0.1, 1 / 3, 0.7, 2 / 3, 5 / 6, 5 / 7, 0.3, 0.9, 1 / 7]


@pytest.mark.parametrize("k", [8, 16])
def test_equal_values_whose_mean_differs_do_not_vary(k):
    values = jnp.asarray(np.repeat(np.float32(AWKWARD)[:, None], k, axis=1))
    valid = jnp.ones(values.shape, bool)
    mean = jnp.sum(values, axis=1) / k
    # The point of the module: a mean test would call some of these groups varied.
    assert bool(jnp.any(mean != values[:, 0]))
    assert not bool(jnp.any(varies(values, valid, axis=1)))
    low, high = valid_range(values, valid, axis=1)
    np.testing.assert_array_equal(low, values[:, 0])
    np.testing.assert_array_equal(high, values[:, 0])


def test_a_one_ulp_difference_varies():
    a = np.float32(0.1)
    b = np.nextafter(a, np.float32(1.0))
    values = jnp.asarray([[a, a, b, a]], jnp.float32)
    assert varies(values, jnp.ones((1, 4), bool)).tolist() == [True]


def test_invalid_entries_are_ignored():
    values = jnp.asarray([[0.2, 0.2, 9.0, 0.2], [0.2, -5.0, 0.2, 0.2]], jnp.float32)
    valid = jnp.asarray([[True, True, False, True], [True, False, True, True]])
    assert varies(values, valid).tolist() == [False, False]
    low, high = valid_range(values, valid)
    np.testing.assert_array_equal(low, np.float32([0.2, 0.2]))
    np.testing.assert_array_equal(high, np.float32([0.2, 0.2]))
    # the same entries made valid do vary
    assert varies(values, jnp.ones(values.shape, bool)).tolist() == [True, True]


def test_rows_with_zero_or_one_valid_entry():
    values = jnp.asarray([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [4.0, 4.0, 5.0]], jnp.float32)
    valid = jnp.asarray([[False, False, False], [False, True, False], [False, False, True]])
    assert varies(values, valid).tolist() == [False, False, False]
    low, high = valid_range(values, valid)
    assert low.tolist() == [np.inf, 2.0, 5.0]
    assert high.tolist() == [-np.inf, 2.0, 5.0]
    # an empty row is neither varied nor equal: high == low is False there too
    assert (high == low).tolist() == [False, True, True]


def test_non_finite_values_in_invalid_entries_are_ignored():
    values = jnp.asarray([[0.5, jnp.nan, jnp.inf, -jnp.inf, 0.5]], jnp.float32)
    valid = jnp.asarray([[True, False, False, False, True]])
    assert varies(values, valid).tolist() == [False]
    low, high = valid_range(values, valid)
    assert (low.tolist(), high.tolist()) == ([0.5], [0.5])


def test_axis_and_keepdims():
    values = jnp.asarray([[1.0, 1.0], [2.0, 3.0], [1.0, 4.0]], jnp.float32)  # f32[3, 2]
    valid = jnp.ones(values.shape, bool)
    assert varies(values, valid).shape == (3,)
    assert varies(values, valid, axis=1).tolist() == [False, True, True]
    assert varies(values, valid, axis=0).tolist() == [True, True]
    kept = varies(values, valid, axis=1, keepdims=True)
    assert kept.shape == (3, 1) and kept.dtype == jnp.bool_
    low, high = valid_range(values, valid, axis=0, keepdims=True)
    assert low.shape == high.shape == (1, 2)
    assert low.tolist() == [[1.0, 1.0]] and high.tolist() == [[2.0, 4.0]]
    # keepdims broadcasts back against the rows, as credit uses it
    adv = jnp.where(valid & varies(values, valid, axis=-1, keepdims=True), values, 0.0)
    assert adv.tolist() == [[0.0, 0.0], [2.0, 3.0], [1.0, 4.0]]


def test_three_dimensional_values():
    values = jnp.zeros((2, 3, 4), jnp.float32).at[1, 2, 3].set(1.0)
    valid = jnp.ones(values.shape, bool)
    assert varies(values, valid).tolist() == [[False] * 3, [False, False, True]]
    assert varies(values, valid.at[1, 2, 3].set(False)).tolist() == [[False] * 3] * 2


def test_under_jit_matches_eager():
    rng = np.random.default_rng(0)
    values = jnp.asarray(rng.integers(0, 3, (16, 8)) / 4, jnp.float32)
    valid = jnp.asarray(rng.random((16, 8)) < 0.6)
    jitted_range = jax.jit(valid_range, static_argnames=("axis", "keepdims"))
    jitted_varies = jax.jit(varies, static_argnames=("axis", "keepdims"))
    for axis, keepdims in ((1, False), (-1, True), (0, False)):
        low, high = jitted_range(values, valid, axis=axis, keepdims=keepdims)
        e_low, e_high = valid_range(values, valid, axis=axis, keepdims=keepdims)
        np.testing.assert_array_equal(low, e_low)
        np.testing.assert_array_equal(high, e_high)
        np.testing.assert_array_equal(
            jitted_varies(values, valid, axis=axis, keepdims=keepdims),
            varies(values, valid, axis=axis, keepdims=keepdims),
        )
    # against numpy, row by row
    v, m = np.asarray(values), np.asarray(valid)
    want = [len(set(v[i][m[i]].tolist())) > 1 for i in range(v.shape[0])]
    assert jitted_varies(values, valid, axis=1, keepdims=False).tolist() == want


def test_docstring_examples():
    failures, tried = doctest.testmod(_spread, extraglobs={"jnp": jnp})
    assert tried > 0 and failures == 0
