"""The uniform baseline sampler."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curriculax as cx


def test_one_call_gives_distinct_tasks_and_calls_differ():
    s = cx.samplers.uniform(50)
    sample = jax.jit(lambda k: s.sample(s.init(k), k, 20)[0])
    a, b = np.asarray(sample(jax.random.key(1))), np.asarray(sample(jax.random.key(2)))
    assert len(set(a.tolist())) == 20 and a.min() >= 0 and a.max() < 50
    assert not np.array_equal(a, b)


def test_more_draws_than_tasks_repeat_evenly():
    s = cx.samplers.uniform(3)
    ids, _ = s.sample(s.init(jax.random.key(0)), jax.random.key(0), 8)
    assert sorted(np.bincount(np.asarray(ids), minlength=3).tolist()) == [2, 3, 3]


def test_draws_are_uniform_over_the_pool():
    n, draws = 10, 20_000
    s = cx.samplers.uniform(n)
    keys = jax.random.split(jax.random.key(0), draws)
    first = jax.jit(jax.vmap(lambda k: s.sample(s.init(k), k, 1)[0][0]))(keys)
    counts = np.bincount(np.asarray(first), minlength=n)
    chi2 = float(((counts - draws / n) ** 2 / (draws / n)).sum())
    assert chi2 < (n - 1) + 8 * np.sqrt(2 * (n - 1)) + 4


def test_it_is_registered_for_configs():
    cur = cx.curriculum_from_config({"sampler": {"type": "uniform"}}, 7)
    ids, _ = cur.sample(cur.init(jax.random.key(0)), jax.random.key(3), 7)
    assert sorted(np.asarray(ids).tolist()) == list(range(7))
    assert cur.metrics(cur.init(jax.random.key(0)))["admission_rate"] == jnp.float32(1.0)


def test_distinct_draws_each_task_alike_however_many_copies_and_returns_first_entries():
    # entries 0-7 hold task A, 8 holds B, 9 holds C: by entry A gets 80%, by task a third
    entry_task = np.array([0] * 8 + [8, 9])
    draws = 6_000
    s = cx.samplers.uniform(10, distinct=True, entry_task=entry_task)
    keys = jax.random.split(jax.random.key(0), draws)
    first = np.asarray(jax.jit(jax.vmap(lambda k: s.sample(s.init(k), k, 1)[0][0]))(keys))
    counts = np.bincount(first, minlength=10)
    assert set(np.flatnonzero(counts)) == {0, 8, 9}  # each task's first entry only
    chi2 = float(((counts[[0, 8, 9]] - draws / 3) ** 2 / (draws / 3)).sum())
    assert chi2 < 2 + 8 * np.sqrt(4) + 4
    ids, _ = s.sample(s.init(jax.random.key(1)), jax.random.key(1), 5)  # 3 tasks, 5 draws
    assert sorted(np.bincount(np.asarray(ids), minlength=10)[[0, 8, 9]].tolist()) == [1, 2, 2]
    np.testing.assert_array_equal(s.entry_task, [0] * 8 + [8, 9])


def test_distinct_without_copies_draws_as_the_default():
    plain = cx.samplers.uniform(12)
    distinct = cx.samplers.uniform(12, distinct=True, entry_task=np.arange(12) + 100)
    for k in range(3):
        key = jax.random.key(k)
        np.testing.assert_array_equal(
            plain.sample(plain.init(key), key, 7)[0], distinct.sample(distinct.init(key), key, 7)[0]
        )


def test_distinct_needs_entry_task_and_a_config_passes_it():
    with pytest.raises(ValueError, match="distinct=True needs entry_task"):
        cx.samplers.uniform(4, distinct=True)
    with pytest.raises(TypeError, match="distinct must be a bool"):
        cx.samplers.uniform(4, distinct=1)
    spec = {"sampler": {"type": "uniform", "distinct": True}}
    cur = cx.curriculum_from_config(spec, 6, entry_task=np.array([3, 3, 3, 3, 4, 5]))
    ids, _ = cur.sample(cur.init(jax.random.key(0)), jax.random.key(2), 3)
    assert sorted(np.asarray(ids).tolist()) == [0, 4, 5]
    # the default ignores the entry_task a config offers every factory that takes one
    cur = cx.curriculum_from_config({"sampler": {"type": "uniform"}}, 6, entry_task=[3] * 6)
    ids, _ = cur.sample(cur.init(jax.random.key(0)), jax.random.key(2), 6)
    assert sorted(np.asarray(ids).tolist()) == list(range(6))
