"""Pools: distinct tasks per level, held-out sets disjoint by key and stratified over levels."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curriculax import tasks as T

SPEC = T.ReversalSpec(num_symbols=8, min_length=1, num_levels=12)
ADDITION = T.AdditionSpec()


@functools.cache
def _generated(spec, seed=0):
    # One (spec, num_per_level) everywhere: generate compiles once per spec for the session.
    return T.generate(jax.random.key(seed), spec, 100)


@functools.cache
def _pools(seed):
    return T.make_pools(
        jax.random.key(seed), SPEC, train_per_level=64, held_out_per_level=16, held_out_frac=0.2
    )


def _rows(tasks):
    return {
        (tuple(p), tuple(a))
        for p, a in zip(np.asarray(tasks.prompt).tolist(), np.asarray(tasks.answer).tolist())
    }


def test_generate_counts_widths_and_order():
    pool = _generated(SPEC)
    counts = T.num_tasks_per_level(SPEC, 100)
    assert counts == (8, 64) + (100,) * 10
    np.testing.assert_array_equal(np.bincount(pool.level), counts)
    assert np.all(np.diff(np.asarray(pool.level)) >= 0)  # level order
    assert pool.prompt.shape == (sum(counts), 15) and pool.answer.shape == (sum(counts), 13)
    assert [x.dtype for x in pool] == [jnp.int32] * 5 + [jnp.uint32]
    np.testing.assert_array_equal(pool.prompt[:, -1], T.SEP)  # left-padded: SEP is last
    np.testing.assert_array_equal(pool.prompt_len, pool.level + 4)
    np.testing.assert_array_equal(pool.answer_len, pool.level + 2)
    assert len(_rows(pool)) == pool.level.shape[0]  # distinct tasks
    # A level whose space is smaller than asked contributes all of it.
    level0 = np.asarray(pool.answer[pool.level == 0, 0])
    assert sorted(level0.tolist()) == list(range(T.SYMBOL_0, T.SYMBOL_0 + 8))


def test_generate_is_deterministic_and_jittable():
    a = _generated(SPEC, 5)
    b = jax.jit(T.generate, static_argnums=(1, 2))(jax.random.key(5), SPEC, 100)
    c = _generated(SPEC, 6)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a.key, c.key)
    with pytest.raises(ValueError, match="num_per_level"):
        T.generate(jax.random.key(0), SPEC, 0)


def test_generate_draws_each_task_equally_often():
    spec = T.ReversalSpec(num_symbols=8, min_length=2, num_levels=1)  # 64 tasks, draw 32
    keys = jax.random.split(jax.random.key(1), 400)
    pools = jax.vmap(lambda k: T.generate(k, spec, 32))(keys)
    first, second = pools.prompt[..., 2] - T.SYMBOL_0, pools.prompt[..., 3] - T.SYMBOL_0
    freq = np.bincount(np.asarray(first * 8 + second).ravel(), minlength=64) / 400
    assert np.all(np.abs(freq - 0.5) < 0.1), freq


def test_held_out_is_disjoint_from_every_training_pool():
    train0, held0 = _pools(0)
    train1, held1 = _pools(1)
    for train, held in [(train0, held0), (train1, held1), (train1, held0), (train0, held1)]:
        assert np.intersect1d(np.asarray(train.key), np.asarray(held.key)).size == 0
        assert not _rows(train) & _rows(held)
    T.check_unique_keys(T.concat_tasksets([train0, held0]))


def test_held_out_is_stratified_over_levels():
    train, held = _pools(0)
    train_counts = np.bincount(train.level, minlength=12)
    held_counts = np.bincount(held.level, minlength=12)
    np.testing.assert_array_equal(train_counts[2:], 64)
    np.testing.assert_array_equal(held_counts[2:], 16)
    # Tiny levels keep what their space has on each side: 8 and 64 tasks in all.
    assert train_counts[0] + held_counts[0] == 8 and held_counts[1] > 0
    assert train_counts[1] + held_counts[1] <= 64


def test_split_by_key_partitions():
    pool = _generated(SPEC, 2)
    train, held = T.split_by_key(pool, 0.3)
    assert train.level.shape[0] + held.level.shape[0] == pool.level.shape[0]
    assert _rows(train) | _rows(held) == _rows(pool)
    assert 0.2 < held.level.shape[0] / pool.level.shape[0] < 0.4
    with pytest.raises(ValueError, match="held_out_frac"):
        T.split_by_key(pool, 1.0)


def test_take_and_concat():
    rev = T.take(_generated(SPEC), jnp.arange(0, 900, 3))
    add = T.take(_generated(ADDITION), jnp.arange(0, 800, 4))
    both = T.concat_tasksets([rev, add])
    assert both.prompt.shape == (500, 19)  # addition prompts are wider: 2 * 8 + 3
    assert both.answer.shape[1] == 13  # reversal answers are longer
    np.testing.assert_array_equal(T.content_key(both.prompt, both.answer), both.key)
    picked = jax.jit(T.take)(both, jnp.array([[0, 1], [2, 3]]))
    assert picked.prompt.shape == (2, 2, 19) and picked.level.shape == (2, 2)
    np.testing.assert_array_equal(picked.key[1], both.key[2:4])
    with pytest.raises(ValueError, match="at least one"):
        T.concat_tasksets([])


def test_per_level_mean():
    values = jnp.array([1.0, 0.0, 1.0, 1.0])
    levels = jnp.array([0, 0, 2, 2])
    np.testing.assert_array_equal(
        jax.jit(T.per_level_mean, static_argnums=2)(values, levels, 4), [0.5, np.nan, 1.0, np.nan]
    )


@pytest.mark.parametrize("spec", [SPEC, ADDITION])
def test_random_policy_never_solves_hard_levels(spec):
    """Uniformly random answers over the family's own alphabet (its best blind guess)."""
    _, held = T.split_by_key(_generated(spec), 0.2)
    alphabet = jnp.asarray(spec.answer_tokens())
    k = 256
    guesses = alphabet[
        jax.random.randint(jax.random.key(9), (held.level.shape[0], k, 13), 0, alphabet.size)
    ]
    exact, _ = T.verify(held.answer[:, None], held.answer_len[:, None], guesses)
    rate = np.asarray(T.per_level_mean(exact.mean(1), held.level, spec.num_levels))
    hard = rate[spec.num_levels // 2 :]
    assert np.all(hard == 0.0), rate
    assert rate[0] < 0.05


BIG = T.ReversalSpec(num_symbols=16, min_length=6, num_levels=1)


def test_a_large_level_has_spares_for_the_collisions_of_structured_contents(monkeypatch):
    """126,066 reversals of length 6 hold about 9 colliding key pairs (4x a uniform hash's
    1.85): with 8 spares per level, seed 3 kept a duplicate key and make_pools refused it."""
    from curriculax.tasks import _generate

    train, held = T.make_pools(
        jax.random.key(3), BIG, train_per_level=100_000, held_out_per_level=32
    )
    keys = np.concatenate([np.asarray(train.key), np.asarray(held.key)])
    assert train.key.shape == (100_000,) and np.unique(keys).size == keys.size

    # The further spares come last: where the first 8 suffice (seed 0), the pool is the one
    # drawn without them.
    def draw():  # traced afresh each time (generate's own jit would reuse its program)
        return jax.jit(_generate.generate.__wrapped__, static_argnums=(1, 2))(
            jax.random.key(0), BIG, 30_000
        )

    assert _generate._more_spares(30_000, 30_000) > 0
    with_more = draw()
    monkeypatch.setattr(_generate, "_more_spares", lambda num, total: 0)
    without = draw()
    for a, b in zip(jax.tree.leaves(with_more), jax.tree.leaves(without), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_among_equal_keys_and_priorities_the_earliest_candidate_is_kept():
    """generate keeps the first of equal (key, priority) candidates: the sort that finds
    them is stable (lax.sort's default; a guard against is_stable=False, which may keep any
    of them)."""
    from curriculax.tasks._generate import _collides_with_earlier

    keys = np.random.default_rng(0).integers(0, 300, 4096).astype(np.uint32)  # many ties
    priority = np.repeat(np.arange(4, dtype=np.int32), 1024)
    got = np.asarray(jax.jit(lambda k: _collides_with_earlier(k, priority))(jnp.asarray(keys)))
    _, first = np.unique(keys, return_index=True)  # priority grows with the index
    want = np.ones(keys.size, bool)
    want[first] = False
    np.testing.assert_array_equal(got, want)


def test_take_refuses_concrete_indices_out_of_range():
    """``jnp.take`` fills an out-of-range row with fill values (``answer_len`` -2**31, a level
    of -2**31) without an error; concrete indices are checked instead."""
    pool = T.take(_generated(SPEC), jnp.arange(6))
    np.testing.assert_array_equal(T.take(pool, np.array([-6, 5])).key, pool.key[jnp.array([0, 5])])
    for idx in (jnp.array([0, 6]), np.array([-7]), [2, 100], 6):
        with pytest.raises(ValueError, match=r"take: idx must be in \[-6, 6\)"):
            T.take(pool, idx)
    assert T.take(pool, np.zeros((0,), np.int32)).level.shape == (0,)
    # Traced indices cannot be checked (the documented precondition): jit still works.
    assert jax.jit(T.take)(pool, jnp.array([1, 2])).level.shape == (2,)


@pytest.mark.parametrize("name", ["train_per_level", "held_out_per_level"])
@pytest.mark.parametrize("value", [2.5, True])
def test_a_count_that_is_not_an_int_is_named(name, value):
    """2.5 failed after the draw as an unnamed slice error; True was taken as 1."""
    counts = {"train_per_level": 2, "held_out_per_level": 2, name: value}
    with pytest.raises(TypeError, match=rf"^{name} must be an int >= 1"):
        T.make_pools(jax.random.key(0), T.ReversalSpec(num_levels=2), **counts)
