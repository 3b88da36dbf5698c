"""The uniform baseline sampler."""

import jax
import jax.numpy as jnp
import numpy as np

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
