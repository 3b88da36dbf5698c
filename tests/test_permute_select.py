"""The two building blocks of the samplers: keyed permutations and rank-select over labels."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curriculax import _permute, _select

MAX_N = 300  # the largest domain the traced-n permutation below is compiled for


@jax.jit
def _permute_prefix(n, keys):
    """``permute(i, n)`` for i in [0, MAX_N) with ``n`` traced: one compile for every n."""
    return _permute.permute(jnp.arange(MAX_N), n, keys)


@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_permute_is_a_bijection_for_every_n_including_traced_n(seed):
    keys = _permute.round_keys(_permute.seed_bits(seed))
    sizes = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 127, 128, 129, 255, 257, 300]
    for n in sizes:
        out = np.asarray(_permute_prefix(jnp.int32(n), keys))[:n]
        assert sorted(out.tolist()) == list(range(n)), n


def test_static_n_gives_the_same_permutation_as_traced_n():
    keys = _permute.round_keys(_permute.seed_bits(5))
    n = 17
    static = np.asarray(jax.jit(lambda k: _permute.permute(jnp.arange(n), n, k))(keys))
    np.testing.assert_array_equal(static, np.asarray(_permute_prefix(jnp.int32(n), keys))[:n])


def test_permute_of_one_element_is_zero_and_indices_outside_are_clamped():
    keys = _permute.round_keys(_permute.seed_bits(7))
    assert int(_permute_prefix(jnp.int32(1), keys)[0]) == 0
    # Out-of-range indices are clamped into [0, n) (documented), so the result stays in range.
    out = np.asarray(_permute.permute(jnp.array([-5, 0, 9, 10, 1000]), 10, keys))
    assert out.min() >= 0 and out.max() < 10
    assert out[0] == out[1]  # -5 clamps to 0
    assert out[2] == out[3] == out[4]  # 10 and 1000 clamp to 9


def test_permute_depends_on_the_key():
    n = jnp.int32(50)
    orders = {
        tuple(np.asarray(_permute_prefix(n, _permute.round_keys(_permute.seed_bits(s))))[:50])
        for s in range(5)
    }
    assert len(orders) == 5


def test_per_index_round_keys_give_one_permutation_per_key_set():
    # keys u32[M, R]: index m is permuted with its own key set (how epochs are salted).
    n = 6
    salts = jnp.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1])
    keys = _permute.round_keys(_permute.seed_bits(3), salts)
    assert keys.shape == (12, _permute.NUM_ROUNDS)
    out = np.asarray(_permute.permute(jnp.arange(12) % n, n, keys))
    assert sorted(out[:6].tolist()) == list(range(n))
    assert sorted(out[6:].tolist()) == list(range(n))
    assert out[:6].tolist() != out[6:].tolist()


@pytest.mark.parametrize("n", [3, 10])
def test_permute_is_marginally_uniform_over_keys(n):
    draws = 20_000
    keys = jax.random.split(jax.random.key(0), draws)

    def one(k):
        return _permute.permute(jnp.arange(n), n, _permute.round_keys(_permute.key_bits(k)))

    out = np.asarray(jax.jit(jax.vmap(one))(keys))  # [draws, n]
    expected = draws / n
    for i in range(n):
        counts = np.bincount(out[:, i], minlength=n)
        chi2 = float(((counts - expected) ** 2 / expected).sum())
        # chi-square with n-1 <= 9 degrees of freedom: mean n-1, std sqrt(2(n-1)) <= 4.3;
        # 45 is beyond 8 std (p < 1e-5), so a failure means real bias, not bad luck.
        assert chi2 < 45, (i, counts)


def _reference_select(labels: np.ndarray, group: int, rank: int) -> int:
    return int(np.flatnonzero(labels == group)[rank])


# Pool sizes around the block size (128) and not multiples of it.
@jax.jit
def _build_and_select(labels, groups, ranks):
    index = _select.build_index(labels, 4)
    return index.counts, _select.select(index, groups, ranks)


@pytest.mark.parametrize("n", [1, 5, 127, 128, 129, 300, 1000])
def test_select_returns_the_rank_th_member_of_a_label_group(n):
    rng = np.random.default_rng(n)
    num_groups = 4
    for trial in range(3):
        # -1 and labels >= num_groups are "no group" and must be ignored.
        labels = rng.integers(-1, num_groups + 1, size=n).astype(np.int32)
        if trial == 2:  # one dominant group, one empty group
            labels = np.where(rng.random(n) < 0.9, 1, 3).astype(np.int32)
        expected_counts = [int(np.sum(labels == c)) for c in range(num_groups)]
        # Every (group, rank) that exists, padded to n queries so one compile serves all trials.
        queries = [(c, r) for c in range(num_groups) for r in range(expected_counts[c])]
        queries = (queries + [queries[0]] * n)[:n] if queries else [(0, 0)] * n
        groups = jnp.array([q[0] for q in queries], jnp.int32)
        ranks = jnp.array([q[1] for q in queries], jnp.int32)
        counts, got = _build_and_select(jnp.asarray(labels), groups, ranks)
        assert np.asarray(counts).tolist() == expected_counts
        if not any(expected_counts):
            continue
        want = [_reference_select(labels, c, r) for c, r in queries]
        np.testing.assert_array_equal(np.asarray(got), want)
