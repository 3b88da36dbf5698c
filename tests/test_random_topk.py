"""Per-task hashed random numbers (``_random``) and the shard-aware top-k (``_topk``)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from curriculax import _random, _topk

IDS = jnp.arange(200_000, dtype=jnp.int32)


@pytest.mark.parametrize("a, b", [(1.0, 1.0), (1.0, 9.0), (5.0, 5.0), (2.0, 30.0), (9.0, 1.0)])
def test_beta_draws_match_the_exact_quantiles(a, b):
    draws = jax.jit(_random.beta, static_argnums=4)(
        jnp.uint32(11), IDS, jnp.float32(a), jnp.float32(b), 0
    )
    q = [0.05, 0.25, 0.5, 0.75, 0.95]
    got = np.quantile(np.asarray(draws), q)
    np.testing.assert_allclose(got, stats.beta(a, b).ppf(q), atol=0.012)


def test_hashed_uniforms_are_uniform_and_depend_on_word_id_and_salt():
    u = np.asarray(_random.unit(jnp.uint32(3), IDS, 0))
    assert u.min() > 0 and u.max() < 1
    counts = np.histogram(u, bins=20, range=(0, 1))[0]
    expected = u.size / 20
    assert ((counts - expected) ** 2 / expected).sum() < 19 + 8 * np.sqrt(38) + 4
    other_word = np.asarray(_random.unit(jnp.uint32(4), IDS, 0))
    other_salt = np.asarray(_random.unit(jnp.uint32(3), IDS, 1))
    assert abs(np.corrcoef(u, other_word)[0, 1]) < 0.01
    assert abs(np.corrcoef(u, other_salt)[0, 1]) < 0.01


def test_ranking_keys_keep_the_order_of_scores_and_break_ties_at_random():
    scores = jnp.array([0.1, 0.9, 0.5, 0.5, 0.0, 1.0])
    keys = np.asarray(_topk.ranking_key(scores, jnp.uint32(1), jnp.arange(6), 0))
    assert np.all((keys >= 1) & (keys < 2))
    assert list(np.argsort(-keys)[:2]) == [5, 1] and np.argmin(keys) == 4
    # equal scores: which of two tasks ranks first varies with the call word
    firsts = {
        int(
            np.argmax(
                np.asarray(_topk.ranking_key(jnp.full(2, 0.5), jnp.uint32(w), jnp.arange(2), 0))
            )
        )
        for w in range(16)
    }
    assert firsts == {0, 1}


def test_top_k_returns_the_best_first_and_ties_to_the_lower_id():
    keys = jnp.array([1.5, 1.2, 1.5, 0.0, 1.9], jnp.float32)
    values, ids = _topk.top_k(keys, 3, jnp.int32(10), None)
    assert ids.tolist() == [14, 10, 12]
    np.testing.assert_allclose(values, [1.9, 1.5, 1.5])
    values, ids = _topk.top_k(keys, 9, jnp.int32(0), None)
    assert ids.shape == (5,)


def test_the_top_hash_value_stays_below_one_so_normals_and_betas_stay_finite():
    """Hash bits ``0xFFFFFF`` gave ``(2^24 - 0.5) 2^-24``, which rounds to 1.0 in float32: a
    normal of +inf and a Beta draw of nan (a task then ranked last in that call)."""
    word = jnp.uint32(12345)
    at = jnp.asarray([16_349_733], jnp.int32)  # found by a search over ids
    assert int(_random.bits(word, at, 0)[0] >> 8) == 0xFFFFFF
    assert 0 < float(_random.unit(word, at, 0)[0]) < 1
    assert np.isfinite(float(_random.normal(word, at, 0)[0]))
    assert np.isfinite(float(_random.beta(word, at, jnp.float32(3.0), jnp.float32(5.0), 0)[0]))


def _low_share(pick, n, calls=200):
    """The share of ``pick(word)``'s ids in the first eighth of ``n`` over ``calls`` words."""
    words = jax.random.bits(jax.random.key(0), (calls,), jnp.uint32)
    got = np.concatenate([np.asarray(pick(w)) for w in words])
    return float(np.mean(got < n // 8))


def test_a_large_tie_is_settled_at_random_not_by_pool_order():
    # 8 tie bits leave 65,536 equal scores in 256 key values: the 16 kept all hold the top
    # one, and without the tie pass the lowest ids among those win (the first eighth of the
    # pool took 99.9% of the picks)
    n, k = 65_536, 16
    ids = jnp.arange(n, dtype=jnp.int32)

    def pick(tie):
        def f(word):
            keys = _topk.ranking_key(jnp.full((n,), 0.5), word, ids, 7)
            return _topk.top_k(keys, k, jnp.int32(0), None, tie=(word, 9) if tie else None)[1]

        return jax.jit(f)

    assert _low_share(pick(False), n) > 0.9
    assert 0.09 < _low_share(pick(True), n) < 0.16


def test_the_tie_pass_keeps_the_keys_above_the_cut_and_draws_only_among_the_cut_key():
    keys = jnp.array([1.5, 1.2, 1.5, 0.0, 1.9, 1.5, 1.5], jnp.float32)
    seen = set()
    for w in range(32):
        values, ids = _topk.top_k(keys, 3, jnp.int32(10), None, tie=(jnp.uint32(w), 1))
        np.testing.assert_allclose(values, [1.9, 1.5, 1.5])
        assert ids[0] == 14 and len(set(ids.tolist())) == 3
        assert set(ids[1:].tolist()) <= {10, 12, 15, 16}
        seen |= set(ids[1:].tolist())
    assert seen == {10, 12, 15, 16}
    # fewer keys than k: every task, the best first
    values, ids = _topk.top_k(keys, 9, jnp.int32(0), None, tie=(jnp.uint32(3), 1))
    assert sorted(ids.tolist()) == list(range(7)) and ids[0] == 4


def test_stochastic_round_never_rounds_a_whole_number_up():
    """``floor(x + u)`` in float32 rounded ``512 + u`` up to 513 when ``u`` lay within half an
    ulp of 1 (about one call in 65,000 at a share of 512): floor then drew one more stale task
    than its top_k held and repeated one within a call."""
    from curriculax import _random

    u_top = jnp.float32(1 - 2**-24)  # the largest uniform the 24-bit draws give
    for x in (1.0, 512.0, 1024.0, 65536.0):
        assert int(_random.stochastic_round(jnp.float32(x), u_top)) == int(x)
    x = jnp.float32(2.25)
    got = _random.stochastic_round(x, jnp.asarray([0.0, 0.74, 0.76, float(u_top)], jnp.float32))
    assert got.tolist() == [2, 2, 3, 3]  # one more with probability frac(x), as floor(x + u)
