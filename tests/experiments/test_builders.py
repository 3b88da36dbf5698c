"""The study pools: level mass, distractors with coin-flip rewards, the target levels."""

import doctest
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curriculax as cx
from curriculax import tasks as T
from curriculax.engine import Rollouts
from curriculax.samplers import SequentialState
from curriculax.testing import group_results
from experiments import _builders
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
    with pytest.raises(ValueError, match=r"task.pool_size=20 leaves some level .* no entry"):
        TaskConfig(level_mass=(1, 1, 1, 1, 1, 50), pool_size=20)


@pytest.mark.parametrize(
    "share, levels, counts",
    [
        (0.96, 2, r"0 real entries once task.distractors=0.96 took 10 .*\[0, 0\]"),
        (0.85, 3, r"2 real entries once task.distractors=0.85 took 8 .*\[1, 1, 0\]"),
    ],
)
def test_distractors_that_leave_a_level_empty_are_named(share, levels, counts):
    """Too many coin flips for the real levels was blamed on pool_size and level_mass (the
    default, printed as []), and only once the pool was built."""
    with pytest.raises(ValueError, match=rf"^task.pool_size=10 .*{counts}.*lower task.distr"):
        TaskConfig(num_levels=levels, pool_size=10, distractors=share)


@pytest.mark.parametrize("mass", [(math.inf, 1.0, 1.0), (math.nan, 1.0, 1.0), (1e308, 1e308, 1.0)])
def test_a_level_mass_that_is_not_finite_is_named(mass):
    """``[inf, 1, 1]`` once passed and failed later as "eval_levels [...] are not levels of the
    pool []" (every share over an infinite sum is 0 or NaN)."""
    with pytest.raises(ValueError, match=r"task.level_mass must be finite shares >= 0"):
        TaskConfig(num_levels=3, level_mass=mass)


def test_distractors_that_round_to_no_entry_are_refused():
    """``distractors = 0.001`` of 300 entries once rounded to no coin flip: the run without
    distractors under another name."""
    with pytest.raises(
        ValueError, match=r"task.distractors=0.001 gives no coin-flip entry in a pool of 300 "
    ):
        TaskConfig(pool_size=300, distractors=0.001)
    assert TaskConfig(pool_size=300, distractors=1 / 300).distractors == 1 / 300


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


def test_a_distractor_level_all_held_out_takes_its_held_out_tasks():
    """With 2 symbols at held_out_frac 0.8 every copy task of level 0 falls on the held-out
    side: the pool once failed with "level 0 has no training task to fill 2 entries", though
    the same study without distractors builds. Distractors are never evaluated, so the level
    takes its held-out task instead."""
    task = TaskConfig(
        num_levels=3, num_symbols=2, held_out_frac=0.8, distractors=0.2, train_per_level=10
    )
    pool = make_study_pool(GRPOExperimentConfig(task=task))
    coin = pool.category == pool.coin_level
    assert np.bincount(pool.category).tolist() == [8, 8, 8, 6]
    assert np.bincount(pool.built_level[coin]).tolist() == [2, 2, 2]
    assert len(set(np.asarray(pool.train.key).tolist())) == 30  # repeats keyed apart


# ---------------------------------------------------------------- what the samplers are told


def test_the_builders_docstring_examples_run():
    """``sampler_categories``' example once called it on a ``pool`` it never defined."""
    result = doctest.testmod(_builders, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


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
        # numpy's "expected non-negative integer" once came at the build, not at the load.
        ({"noise": 0.5, "seed": -1}, r"task.labels.seed must be an int in \[0, 2\*\*32\).*-1"),
        ({"noise": 0.5, "seed": 2**32}, r"task.labels.seed must be an int in \[0, 2\*\*32\)"),
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


def test_an_empty_curriculum_builds_the_library_default_not_the_experiments():
    """``curriculum = {}`` (an arm's, say) is the library's default curriculum (sequential, no
    gates), as the study checks it; the build once took the experiment's curriculum instead."""
    exp = GRPOExperimentConfig(task=TaskConfig(num_levels=2, pool_size=8))
    assert exp.curriculum["sampler"]["type"] != "sequential"
    cur = build(exp, curriculum={}).engine.envs[0].curriculum
    assert isinstance(cur.sampler.init(jax.random.key(0)), SequentialState)
    assert dict(cur.gates) == {}


def _marks_copies(built, name):
    """Whether the gate ``name`` marks entry 0 and a copy of its task after a group of entry 0
    proves its reward ignores the answer."""
    entry_task = np.asarray(T.distinct_tasks(built.pool.train))
    copy = int(np.flatnonzero(entry_task == entry_task[0])[1])
    gate = built.engine.envs[0].curriculum.gates[name]
    results = group_results([0], [[1.0, 0.0]])._replace(answers=jnp.array([[7, 7]]))
    _, state = gate.admit(gate.init(jax.random.key(0)), results)
    return bool(state.contradicted[0]), bool(state.contradicted[copy])


def test_a_ready_sampler_gets_the_configs_gates_with_the_pool_context_and_a_presets_gates():
    """The oracle arms' path (a ready sampler) once built the gates without ``entry_task`` (a
    proof on one copy of a task left its other copies unmarked) and dropped a preset's."""
    exp = GRPOExperimentConfig(task=TaskConfig(num_levels=2, pool_size=16))
    sampler = cx.samplers.uniform(16)
    gates = {"consistency": {"type": "reward_consistency"}}
    built = build(exp, curriculum={"gates": gates}, sampler=sampler)
    assert _marks_copies(built, "consistency") == (True, True)
    curriculum_arm = build(exp, curriculum={"sampler": {"type": "uniform"}, "gates": gates})
    assert _marks_copies(curriculum_arm, "consistency") == (True, True)
    robust = build(exp, curriculum={"preset": "robust"}, sampler=sampler)
    assert sorted(robust.engine.envs[0].curriculum.gates) == ["consistency"]


def test_build_refuses_target_levels_without_a_held_out_task():
    """Level 0 of 2 symbols has 2 tasks, of which a held-out share of 0.2 holds none out: the
    target score would be 0/0 (NaN) and a run could never stop at its target."""
    task = TaskConfig(num_levels=3, num_symbols=2, eval_levels=(0,))
    exp = GRPOExperimentConfig(task=task)
    assert not np.any(make_study_pool(exp).target)
    with pytest.raises(
        ValueError,
        match=r"the target levels \[0\] \(task.eval_levels\) hold no held-out task.*"
        r"levels with held-out tasks: \[2\]",
    ):
        build(exp)
