"""64-bit task keys: distinct tasks stay distinct far past the 32-bit birthday bound, keys are
the same in every process and version (the low word is the 32-bit key of earlier versions),
and the held-out split of the studies' pools does not move."""

import hashlib
import tomllib

import numpy as np
import pytest

from curriculax.engine import Env, content_keys
from curriculax.engine._env import check_unique_keys, key_ints, key_words
from experiments import _cli
from experiments._builders import GRPOExperimentConfig, make_study_pool

# Two distinct rows whose 32-bit FNV-1a keys collide (found by a birthday search over 300,000
# random int32 pairs, seed 0), and their 64-bit keys.
COLLIDING = np.array([[1481555612, 836449610], [1865005812, 1304274041]], np.int32)
KEY32 = 637464462
KEYS64 = [12477833912048873358, 10593110650911649678]


def _reference_key(row: np.ndarray) -> int:
    """Pure-Python 64-bit key of one row of an ``{"x": i32[N, 2]}`` pool: FNV-1a-32 in the low
    word, the top of fmix64(FNV-1a-64) in the high word, over the dtype/shape tag then the
    row's little-endian bytes."""
    data = b"<i4(2,)" + row.astype("<i4").tobytes()
    h32, h64, m64 = 0x811C9DC5, 0xCBF29CE484222325, (1 << 64) - 1
    for b in data:
        h32 = ((h32 ^ b) * 0x01000193) & 0xFFFFFFFF
        h64 = ((h64 ^ b) * 0x100000001B3) & m64
    h64 ^= h64 >> 33
    h64 = (h64 * 0xFF51AFD7ED558CCD) & m64
    h64 ^= h64 >> 33
    h64 = (h64 * 0xC4CEB9FE1A85EC53) & m64
    h64 ^= h64 >> 33
    return (h64 & ~0xFFFFFFFF) | h32


def test_two_tasks_whose_32_bit_keys_collide_get_distinct_keys():
    pool = {"x": COLLIDING}
    assert content_keys(pool, bits=32).tolist() == [KEY32, KEY32]
    env = Env("e", pool)
    assert env.keys.dtype == np.uint64
    assert env.keys.tolist() == KEYS64
    assert [_reference_key(r) for r in COLLIDING] == KEYS64  # an independent implementation
    assert [k & 0xFFFFFFFF for k in KEYS64] == [KEY32, KEY32]  # the low word: the old key


def test_a_pool_past_the_32_bit_birthday_bound_builds():
    """300,000 random distinct rows hold 14 colliding 32-bit pairs; the Env takes them all."""
    rows = np.random.default_rng(0).integers(0, 2**31, size=(300_000, 2), dtype=np.int32)
    assert np.unique(rows, axis=0).shape[0] == len(rows)
    with pytest.raises(ValueError, match="task keys must be unique"):
        check_unique_keys(content_keys({"x": rows}, bits=32), "32-bit")
    env = Env("big", {"x": rows})
    assert np.unique(env.keys).size == len(rows)
    low = (env.keys & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    np.testing.assert_array_equal(low, content_keys({"x": rows}, bits=32))


def test_words_round_trip_and_given_keys_are_kept():
    keys = np.array([0, 5, 2**32 - 1, 2**32, 2**64 - 1], np.uint64)
    words = key_words(keys)
    assert words.dtype == np.uint32 and words.shape == (5, 2)
    np.testing.assert_array_equal(key_ints(words), keys)
    env = Env("given", {"x": np.arange(5, dtype=np.int32)}, keys=keys)
    assert env.keys.tolist() == keys.tolist()
    with pytest.raises(ValueError, match=r"env 'neg': keys must be >= 0, got -1"):
        Env("neg", {"x": np.arange(2, dtype=np.int32)}, keys=np.array([3, -1]))
    with pytest.raises(ValueError, match=r"shape \(N=2,\)"):
        Env("shape", {"x": np.arange(2, dtype=np.int32)}, keys=np.array([1, 2, 3]))


# sha256 of each study pool's train and held-out keys, computed with the code before 64-bit
# keys (commit 379f1e5); one config per distinct pool.
SPLITS = {
    "balanced.toml": "2dadbcb72a7ee9b7",
    "distractors.toml": "8ccc8f5327615c92",
    "easy-skew.toml": "daf068ce938ae2ac",
    "hard-skew.toml": "1c8dbb5fe0c06be4",
    "prerequisites.toml": "9a571e754861e8e4",
}


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_the_study_pools_split_is_unchanged(name):
    path = f"experiments/configs/compare/{name}"
    with open(path, "rb") as f:
        exp = tomllib.load(f)["experiment"]
    pool = make_study_pool(_cli.apply_mapping(GRPOExperimentConfig(), exp, path))
    h = hashlib.sha256()
    for keys in (pool.train.key, pool.held_out.key):
        h.update(np.ascontiguousarray(np.asarray(keys), "<u4").tobytes())
    assert h.hexdigest()[:16] == SPLITS[name]
