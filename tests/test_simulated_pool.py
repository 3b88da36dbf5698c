"""The simulated pool: the learnability sampler's defaults against difficulty pools.

Several seeds run as one compiled program per sampler. The margins leave room: with exactly
this set-up (2026-12-01, 4 seeds) learnability put 0.38-0.39 of its draws on informative
tasks against 0.20-0.22 for difficulty pools, 0.20-0.24 of its late draws on emerging tasks
against 0.11-0.15, and found half of the emerging tasks in a median of 54 steps against 72.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curriculax as cx
from curriculax import simulated_pool as sp

N, NUM, STEPS, SWITCH = 1024, 16, 320, 120


@pytest.fixture(scope="module")
def outcomes():
    pool = sp.make_pool(N, switch_step=SWITCH, seed=3)
    keys = jax.random.split(jax.random.key(7), 4)
    out = {}
    for name, sampler in {
        "learnability": cx.samplers.learnability(N),
        "difficulty_pools": cx.samplers.difficulty_pools(N),
    }.items():
        out[name] = sp.summarize(pool, sp.run(sampler, pool, steps=STEPS, num=NUM, keys=keys))
    return out


def test_learnability_concentrates_on_informative_tasks(outcomes):
    lb, dp = outcomes["learnability"], outcomes["difficulty_pools"]
    assert np.mean(lb["informative_share"]) > 1.4 * np.mean(dp["informative_share"])
    # every seed, not just on average
    assert np.min(lb["informative_share"]) > np.max(dp["informative_share"])


def test_learnability_finds_and_follows_up_newly_learnable_tasks(outcomes):
    lb, dp = outcomes["learnability"], outcomes["difficulty_pools"]
    assert np.median(lb["steps_to_find_half"]) < np.median(dp["steps_to_find_half"])
    assert np.all(np.isfinite(lb["steps_to_find_half"]))
    assert np.mean(lb["emerging_share_late"]) > 1.3 * np.mean(dp["emerging_share_late"])


def test_the_pool_has_the_requested_composition():
    pool = sp.make_pool(1000, trivial=0.2, informative=0.1, emerging=0.05, switch_step=5)
    counts = np.bincount(np.asarray(pool.kind), minlength=4)
    assert counts.tolist() == [650, 200, 100, 50]
    before, after = np.asarray(pool.before), np.asarray(pool.after)
    kind = np.asarray(pool.kind)
    assert np.all(before[kind == sp.EMERGING] == 0)
    assert np.all((after[kind == sp.EMERGING] >= 0.2) & (after[kind == sp.EMERGING] <= 0.8))
    assert np.array_equal(before[kind != sp.EMERGING], after[kind != sp.EMERGING])
    with pytest.raises(ValueError, match="add up to more than 1"):
        sp.make_pool(10, trivial=0.9, informative=0.2)


def test_noisy_pools_hold_coin_flips_and_tasks_learned_by_training():
    pool = sp.make_pool(
        1000,
        trivial=0.2,
        informative=0.0,
        emerging=0.0,
        coin_flip=0.3,
        learning=0.1,
        learn_draws=10,
        coin_p=0.4,
    )
    kind = np.asarray(pool.kind)
    assert np.bincount(kind, minlength=6).tolist() == [400, 200, 0, 0, 300, 100]
    assert np.all(np.asarray(pool.before)[kind == sp.COIN_FLIP] == np.float32(0.4))
    start = np.asarray(pool.before)[kind == sp.LEARNING]
    assert np.all((start >= 0.1) & (start <= 0.3))
    # pools without the new kinds are the ones they were
    old = sp.make_pool(1000, switch_step=5, seed=2)
    assert np.all(np.asarray(old.gain) == 0)
    # a learning task's rate rises with its own draws only: a sampler that always draws
    # task ids 0..15 learns those of them that are learning tasks (8 and 12) and no other
    fixed = cx.TaskSampler(
        lambda key: jnp.zeros((), jnp.int32),
        lambda state, key, num: (jnp.arange(num, dtype=jnp.int32), state),
        lambda state, results: state,
        lambda state: {},
    )
    trace = sp.run(fixed, pool, steps=20, num=16, keys=jax.random.split(jax.random.key(0), 1))
    m = sp.summarize(pool, trace)
    learning_ids = np.flatnonzero(kind == sp.LEARNING)
    assert m["learned_share"][0] == pytest.approx(np.mean(learning_ids < 16))
    assert m["coin_flip_share"][0] == pytest.approx(np.mean(kind[:16] == sp.COIN_FLIP))
    assert 0 < m["learned_share"][0] < 0.05


@pytest.mark.parametrize("n, shares", [(6, [0.25] * 4), (3, [0.5, 0.5])])
def test_shares_that_round_up_past_the_pool_still_make_one(n, shares):
    """Each share rounded on its own (0.25 of 6 is 2) once overfilled the pool and crashed."""
    names = ["trivial", "informative", "emerging", "coin_flip"][: len(shares)]
    given = {"trivial": 0.0, "informative": 0.0, "emerging": 0.0, **dict(zip(names, shares))}
    kinds = np.asarray(sp.make_pool(n, **given).kind)
    assert kinds.shape == (n,)
    for name, share in zip(names, shares):
        assert abs(int((kinds == getattr(sp, name.upper())).sum()) - n * share) <= 1
