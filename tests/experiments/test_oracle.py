"""The oracle weighs each task by its own measured p (1 - p), not its level's."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax.engine import Rollouts
from experiments._builders import GRPOExperimentConfig, TaskConfig, make_study_pool
from experiments._oracle import OracleState, make_probe, probe_rows


class _Built(NamedTuple):
    pool: object
    rollout: object
    engine: object = None


class _Cur(NamedTuple):
    sampler: object


class _State(NamedTuple):
    solver: object
    curricula: dict


def _pool():
    # 4 symbols: level 0 (length 1) has 4 distinct tasks for its 12 entries; level 1 has 16.
    task = TaskConfig(num_levels=2, level_mass=(1.0, 1.0), pool_size=24, held_out_per_level=2)
    return make_study_pool(GRPOExperimentConfig(task=task))


def test_probe_rows_are_the_distinct_tasks_capped_per_category():
    pool = _pool()
    rows = probe_rows(pool)
    prompts = np.asarray(pool.train.prompt)
    assert len({r.tobytes() for r in prompts[rows.rows]}) == rows.rows.size  # distinct
    assert rows.distinct.tolist() == rows.probed.tolist()
    assert rows.probed[0] <= 4 and rows.probed[1] == 12
    # every entry points at the probed task with its prompt
    assert np.array_equal(prompts[rows.rows[rows.row_of_entry]], prompts)
    capped = probe_rows(pool, per_category=3)
    assert capped.probed.tolist() == [3, 3]
    assert (capped.row_of_entry == -1).sum() == 24 - 3 * (12 // rows.probed[0]) - 3


def test_learnability_oracle_scores_tasks_not_levels():
    pool = _pool()
    rows = probe_rows(pool)
    # Level 1: the first half of its probed tasks always pass, the rest never (level mean
    # 0.5, level-mean p(1-p) 0.25, no task with signal); level 0: every task passes half
    # the time (every task has signal).
    solved = jnp.asarray(np.asarray(pool.train.key)[rows.rows[rows.category == 1][:6]])

    def rollout(state, tasks, key, group_size):
        half = (jnp.arange(group_size) % 2).astype(jnp.float32)
        always = jnp.isin(tasks.key, solved).astype(jnp.float32)[:, None]
        rewards = jnp.where((tasks.level == 0)[:, None], half, always * jnp.ones_like(half))
        shape = rewards.shape
        return Rollouts(rewards, jnp.ones(shape, bool), jnp.ones((*shape, 1), bool), ())

    built = _Built(pool, rollout)
    probe = make_probe(built, per_category=None, samples=4, env="e")
    n = pool.category.size
    state = _State(None, {"e": _Cur(OracleState(jnp.zeros(n), jnp.zeros(n)))})
    out = jax.jit(probe)(state, jax.random.key(0)).curricula["e"].sampler
    weight, rate = np.asarray(out.weight), np.asarray(out.pass_rate)
    level = pool.category
    assert np.allclose(weight[level == 0], 0.25) and np.allclose(weight[level == 1], 0.0)
    assert np.allclose(rate[level == 0], 0.5) and set(rate[level == 1].tolist()) == {0.0, 1.0}
