"""The simulated pool: the learnability sampler's defaults against difficulty pools.

Several seeds run as one compiled program per sampler. The margins leave room: with exactly
this set-up (2026-12-01, 4 seeds) learnability put 0.36-0.38 of its draws on informative
tasks against 0.20-0.22 for difficulty pools, 0.21-0.23 of its late draws on emerging tasks
against 0.11-0.15, and found half of the emerging tasks in a median of 51 steps against 72.
"""

import jax
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
