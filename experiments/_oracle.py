"""The oracle arms of a study: draws decided from the policy's true pass rates.

A real curriculum only knows what its own rollouts told it. An oracle is told the truth: every
``every`` generation batches a free evaluation (not charged to the rollout budget) samples
``samples`` rollouts of the current policy on ``per_category`` entries of every category
(level) of the pool, and writes a weight per task into the oracle sampler's state. Two rules:

- ``"learnability"``: ``p (1 - p)``, the variance of a task's reward, which is what
  group-relative credit learns from (LILO / SFL with the true ``p``). If this arm cannot beat
  uniform sampling on a pool, no sampler that scores tasks by ``p (1 - p)`` can.
- ``"frontier"``: every draw from the lowest level the policy has not mastered (true pass rate
  below ``mastered``), never from coin-flip tasks; uniform over the real levels once all are
  mastered. The curriculum a teacher who knows the prerequisite chain would run.

Tasks of one level are exchangeable in the embedded families, so the level's pass rate is the
task's; it is measured on ``per_category x samples`` rollouts (256 by default) instead of the
handful one task would get.

Example:
  >>> sampler = oracle(num_tasks)
  >>> probe = make_probe(built, per_category=16, samples=4)
  >>> state = probe(state, key)      # inside the scanned program, every few batches
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import TaskSampler
from curriculax import tasks as T
from curriculax._checks import check_num, check_num_tasks


class OracleState(NamedTuple):
    """State of :func:`oracle`.

    Attributes:
      pass_rate: ``f32[N]`` each task's pass rate under the current policy, as last written
        by the probe (0 before the first probe).
      weight: ``f32[N]`` each task's draw weight, written by the probe (0 before it).
    """

    pass_rate: jax.Array
    weight: jax.Array

    PER_TASK = ("pass_rate", "weight")


MODES = ("learnability", "frontier")


def oracle(num_tasks: int, *, floor: float = 1e-6) -> TaskSampler:
    """Draws tasks in proportion to ``weight + floor``, weights written by :func:`make_probe`.

    ``observe`` ignores results. Draws are systematic (one uniform offset, ``num`` evenly
    spaced points on the cumulative weights), so a call spreads its draws like the weights with
    little noise; O(N + num log N).

    Args:
      num_tasks: pool size ``N``.
      floor: weight added to every task, so a pool with no weight anywhere (before the first
        probe, or every ``p`` 0 or 1) is drawn uniformly.

    Returns:
      A :class:`~curriculax.TaskSampler` with state :class:`OracleState`. Metrics:
      ``mean_pass_rate``, ``learnability`` (mean ``p (1 - p)`` over the pool).
    """
    n = check_num_tasks(num_tasks)
    if not floor > 0:
        raise ValueError(f"oracle: floor must be > 0, got {floor!r}")

    def init(key):
        del key
        return OracleState(jnp.zeros((n,), jnp.float32), jnp.zeros((n,), jnp.float32))

    def sample(state: OracleState, key: jax.Array, num: int):
        num = check_num(num)
        cum = jnp.cumsum(state.weight + floor)
        points = (jnp.arange(num, dtype=jnp.float32) + jax.random.uniform(key)) / num * cum[-1]
        ids = jnp.minimum(jnp.searchsorted(cum, points, side="right"), n - 1)
        return ids.astype(jnp.int32), state

    def observe(state, results):
        del results
        return state

    def metrics(state: OracleState):
        p = state.pass_rate
        return {"mean_pass_rate": jnp.mean(p), "learnability": jnp.mean(p * (1.0 - p))}

    return TaskSampler(init, sample, observe, metrics)


def make_probe(
    built,
    *,
    per_category: int = 32,
    samples: int = 8,
    mode: str = "learnability",
    mastered: float = 0.9,
    env: str | None = None,
):
    """``probe(engine_state, key) -> engine_state``: measures each category's pass rate under
    the current policy and writes pass rates and draw weights into the oracle sampler's state
    (pure, jit-able).

    Args:
      built: :class:`experiments._builders.Built` whose env's sampler is :func:`oracle`.
      per_category: pool entries probed per category (the first distinct ones; fewer where a
        category has fewer).
      samples: sampled rollouts per probed entry (the run's temperature).
      mode: ``"learnability"`` or ``"frontier"`` (see the module docstring).
      mastered: the pass rate at which ``"frontier"`` moves on to the next level.
      env: the env name (default: the engine's only env).
    """
    if mode not in MODES:
        raise ValueError(f"oracle mode must be one of {list(MODES)}, got {mode!r}")
    engine, pool = built.engine, built.pool
    env = env or engine.env_names[0]
    category = np.asarray(pool.category)
    keys = np.asarray(pool.train.key)
    rows = []
    for c in range(pool.num_categories):
        idx = np.flatnonzero(category == c)
        _, first = np.unique(keys[idx], return_index=True)  # distinct entries
        rows.append(idx[np.sort(first)][:per_category])
    rows = np.concatenate(rows)
    tasks = T.take(pool.train, jnp.asarray(rows))
    probed = jnp.asarray(category[rows])
    counts = np.bincount(category[rows], minlength=pool.num_categories)
    cat_all = jnp.asarray(category)
    num_cat = pool.num_categories
    rollout = built.rollout
    # Levels a frontier can sit on: present in the pool, and not coin flips.
    real = counts > 0
    if pool.coin_level is not None:
        real[pool.coin_level] = False
    real = jnp.asarray(real)
    index = jnp.arange(num_cat)

    def weights(per_cat):
        if mode == "learnability":
            return per_cat * (1.0 - per_cat)
        open_ = real & (per_cat < mastered)
        first = jnp.argmax(open_)
        return jnp.where(jnp.any(open_), index == first, real).astype(jnp.float32)

    def probe(state, key):
        out = rollout(state.solver, tasks, key, samples)
        per_task = jnp.mean(out.rewards, axis=1)
        per_cat = jax.ops.segment_sum(per_task, probed, num_segments=num_cat)
        per_cat = per_cat / jnp.maximum(jnp.asarray(counts, jnp.float32), 1.0)
        cur = state.curricula[env]
        w = weights(per_cat)
        sampler = OracleState(per_cat[cat_all].astype(jnp.float32), w[cat_all].astype(jnp.float32))
        cur = cur._replace(sampler=sampler)
        return state._replace(curricula={**state.curricula, env: cur})

    return probe
