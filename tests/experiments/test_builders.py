"""The study pools: level mass, distractors with coin-flip rewards, the target levels."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curriculax import tasks as T
from curriculax.engine import Rollouts
from experiments._builders import (
    GRPOExperimentConfig,
    TaskConfig,
    build,
    coin_flip_rollout,
    make_study_pool,
    sampler_categories,
    shares_to_counts,
)


def test_shares_become_counts_that_sum_to_the_total():
    assert shares_to_counts(np.array([0.05, 0.05, 0.0, 0.9]), 40).tolist() == [2, 2, 0, 36]
    assert shares_to_counts(np.array([1.0, 1.0, 1.0]), 10).sum() == 10


def test_pool_follows_the_level_mass_with_distractors_in_their_own_category():
    task = TaskConfig(
        num_levels=4,
        level_mass=(1.0, 1.0, 0.0, 2.0),
        pool_size=40,
        held_out_per_level=4,
        distractors=0.2,
        eval_levels=(1,),
    )
    pool = make_study_pool(GRPOExperimentConfig(task=task))
    level = np.asarray(pool.train.level)
    # 32 real entries split 1:1:0:2, then 8 coin-flip entries labelled level 4
    assert [int((level == lv).sum()) for lv in range(5)] == [8, 8, 0, 16, 8]
    assert pool.category.tolist() == level.tolist()
    assert pool.category_names[-1] == "coin flip" and pool.coin_level == 4
    assert len(set(np.asarray(pool.train.key).tolist())) == 40  # repeats keyed apart
    # level 0 (length 1, 4 symbols) has 4 tasks or fewer: its 8 entries repeat them
    distinct = {row.tobytes() for row in np.asarray(pool.train.prompt)[level == 0]}
    assert len(distinct) <= 4
    held = np.asarray(pool.held_out.level)
    assert set(held.tolist()) <= {0, 1, 3}  # pool levels only, never a distractor
    assert pool.target.tolist() == (held == 1).tolist()
    held_keys = set(np.asarray(pool.held_out.key).tolist())
    assert not held_keys & set(np.asarray(pool.train.key).tolist())


def test_bad_pool_settings_are_named():
    with pytest.raises(ValueError, match="level_mass has 2 entries"):
        TaskConfig(num_levels=3, level_mass=(1.0, 1.0))
    with pytest.raises(ValueError, match=r"eval_levels \[2\]"):
        TaskConfig(num_levels=3, level_mass=(1.0, 1.0, 0.0), eval_levels=(2,))
    with pytest.raises(ValueError, match="too small"):
        task = TaskConfig(level_mass=(1, 1, 1, 1, 1, 50), pool_size=20)
        make_study_pool(GRPOExperimentConfig(task=task))


def test_coin_flip_tasks_pay_a_coin_flip_whatever_the_answer():
    def always_right(state, tasks, key, group_size):
        shape = (tasks.level.shape[0], group_size)
        return Rollouts(jnp.ones(shape), jnp.ones(shape, bool), jnp.ones((*shape, 1), bool), ())

    task = TaskConfig(num_levels=2, pool_size=8, distractors=0.5)
    pool = make_study_pool(GRPOExperimentConfig(task=task))
    rollout = coin_flip_rollout(always_right, pool.coin_level, 0.25)
    out = jax.jit(rollout, static_argnums=3)(None, pool.train, jax.random.key(0), 512)
    coin = pool.category == pool.coin_level
    rewards = np.asarray(out.rewards)
    assert np.all(rewards[~coin] == 1.0)
    assert set(np.unique(rewards[coin]).tolist()) == {0.0, 1.0}
    assert abs(rewards[coin].mean() - 0.25) < 0.03


# ---------------------------------------------------------------- what the samplers are told


def _labelled_pool():
    # Level 0 (length 1, 4 symbols) repeats its 4 tasks over 50 entries; levels 1-2 and the
    # coin flips are distinct tasks.
    task = TaskConfig(num_levels=3, level_mass=(1.0, 1.0, 1.0), pool_size=200, distractors=0.25)
    return make_study_pool(GRPOExperimentConfig(task=task))


def test_labels_levels_none_and_noise():
    pool = _labelled_pool()
    assert np.array_equal(sampler_categories(pool, "levels"), pool.category)
    assert np.array_equal(sampler_categories(pool, "none"), np.zeros_like(pool.category))
    noisy = sampler_categories(pool, {"noise": 0.5})
    first = T.distinct_tasks(pool.train)
    # Copies of a task keep one label; labels stay within the pool's categories.
    assert np.array_equal(noisy, noisy[first])
    assert set(noisy.tolist()) <= set(pool.category.tolist())
    # Per distinct task: kept w.p. 1 - q + q / C (C = 4 categories): 0.625 of ~154 tasks.
    distinct = np.flatnonzero(first == np.arange(first.size))
    kept = np.mean(noisy[distinct] == pool.category[distinct])
    sd = np.sqrt(0.625 * 0.375 / distinct.size)
    assert abs(kept - 0.625) < 5 * sd
    # Seeded: the same labels every call, other ones for another seed; q = 0 and 1.
    assert np.array_equal(noisy, sampler_categories(pool, {"noise": 0.5}))
    assert not np.array_equal(noisy, sampler_categories(pool, {"noise": 0.5, "seed": 1}))
    assert np.array_equal(sampler_categories(pool, {"noise": 0.0}), pool.category)
    mixed = sampler_categories(pool, {"noise": 1.0})
    assert np.mean(mixed[distinct] == pool.category[distinct]) < 0.5


def test_labels_that_hide_the_noise_give_each_coin_flip_the_level_it_was_built_at():
    # The coin flips are spread over the levels like the real tasks (mass 1:1:1 of 50
    # entries: 17, 17, 16), and with "levels_hide_noise" each carries that level's label, so
    # the labels do not single them out; the real entries keep their levels.
    pool = _labelled_pool()
    hidden = sampler_categories(pool, "levels_hide_noise")
    coin = pool.category == pool.coin_level
    assert np.array_equal(hidden[~coin], pool.category[~coin])
    assert np.bincount(hidden[coin]).tolist() == [17, 17, 16]
    assert set(hidden.tolist()) == {0, 1, 2}
    # A label is the level of the entry's task: answers as long as a real task's of that level.
    offset = np.asarray(pool.train.answer_len) - hidden
    assert np.all(offset == offset[0])


@pytest.mark.parametrize(
    "labels, match",
    [
        ("level", r"task.labels must be one of \['levels', 'none', 'levels_hide_noise'\]"),
        ({"nois": 0.5}, r"task.labels as a table takes 'noise'"),
        ({"noise": 1.5}, r"task.labels.noise must be a probability in \[0, 1\], got 1.5"),
        ({"noise": 0.5, "seed": "a"}, r"task.labels.seed must be an int"),
    ],
)
def test_bad_labels_are_named(labels, match):
    with pytest.raises(ValueError, match=match):
        TaskConfig(labels=labels)


def test_build_hands_the_samplers_the_configured_labels_and_shared_tasks():
    # A category bandit told "none" sees one category; learnability pools the copies.
    task = TaskConfig(num_levels=2, level_mass=(1.0, 1.0), pool_size=24, labels="none")
    exp = GRPOExperimentConfig(task=task)
    bandit = build(exp, curriculum={"sampler": {"type": "category_bandit"}})
    metrics = bandit.engine.envs[0].curriculum.metrics(
        bandit.engine.envs[0].curriculum.init(jax.random.key(0))
    )
    assert "sampler/prob/0" in metrics and "sampler/prob/1" not in metrics, sorted(metrics)
    learn = build(exp, curriculum={"sampler": {"type": "learnability"}})
    cur = learn.engine.envs[0].curriculum
    distinct = np.unique(T.distinct_tasks(learn.pool.train)).size
    assert distinct < 24  # level 0 repeats its 4 tasks
    # One warm-up call of as many draws as distinct tasks leaves none unseen.
    _, state = jax.jit(cur.sample, static_argnums=2)(
        cur.init(jax.random.key(0)), jax.random.key(1), distinct
    )
    assert float(cur.metrics(state)["sampler/pool/unseen"]) == 0.0
