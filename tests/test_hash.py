"""The library's two 32-bit hashes against independent pure-Python references."""

import numpy as np
import pytest

from curriculax import _hash

M = 0xFFFFFFFF


def _fmix32(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x85EBCA6B) & M
    x ^= x >> 13
    x = (x * 0xC2B2AE35) & M
    return x ^ (x >> 16)


def _lowbias32(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x7FEB352D) & M
    x ^= x >> 15
    x = (x * 0x846CA68B) & M
    return x ^ (x >> 16)


@pytest.mark.parametrize(("fn", "ref"), [(_hash.mix32, _fmix32), (_hash.lowbias32, _lowbias32)])
def test_hash_matches_the_reference_on_numpy_and_jax_input(fn, ref):
    xs = np.array([0, 1, 2, 0x7FFFFFFF, 0x80000000, 0xDEADBEEF, M], np.uint32)
    want = [ref(int(x)) for x in xs]
    assert np.asarray(fn(xs)).tolist() == want
    assert np.asarray(fn(np.asarray(xs))).dtype == np.uint32


def test_the_split_and_the_permutations_use_the_shared_hashes():
    # One home: the modules that hash import these functions rather than keeping copies.
    from curriculax import _permute, _random
    from curriculax.tasks import _keys

    assert _keys.mix32 is _hash.mix32
    assert _permute.lowbias32 is _hash.lowbias32 and _random.lowbias32 is _hash.lowbias32
