"""The oracle arms of a study, and the free pass-rate probe behind them.

A real curriculum only knows what its own rollouts told it. An oracle is told the truth: every
``every`` generation batches a free evaluation (not charged to the rollout budget) samples
``samples`` rollouts of the current policy, at the run's temperature, on every distinct task of
the pool (at most ``per_category`` per category), and writes a weight per pool entry into the
oracle sampler's state. Two rules:

- ``"learnability"``: ``p (1 - p)`` of each task's own measured pass rate ``p``, the variance
  of its reward, which is what group-relative credit learns from (LILO / SFL with the true
  ``p``). Per task, not per level: a level with half its tasks solved and half unsolved has a
  level-mean ``p (1 - p)`` of 0.25 and no task with any signal. A pool entry whose task was not
  probed (a category with more than ``per_category`` distinct tasks) gets the mean ``p (1 - p)``
  of its category's probed tasks, the expected value for an exchangeable task. If this arm
  cannot beat uniform sampling on a pool, no sampler that scores tasks by ``p (1 - p)`` can.
- ``"frontier"``: every draw from the lowest level the policy has not mastered (mean pass rate
  of its probed tasks below ``mastered``), never from coin-flip tasks; uniform over the real
  levels once all are mastered. The curriculum a teacher who knows the prerequisite chain would
  run.

The same probe measures, for the study's pass-rate diagnostics, how the pool's tasks split
into never solved, sometimes solved and always solved (:func:`make_measure`): a task whose
probe group of ``samples`` rollouts has both outcomes is exactly a task whose group would carry
a learning signal.

Example:
  >>> sampler = oracle(num_tasks)
  >>> probe = make_probe(built, per_category=32, samples=8)
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
      pass_rate: ``f32[N]`` each entry's pass rate under the current policy, as last written
        by the probe (0 before the first probe).
      weight: ``f32[N]`` each entry's draw weight, written by the probe (0 before it).
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

    return TaskSampler(init, sample, observe, metrics, num_tasks=n)


class ProbeRows(NamedTuple):
    """Which tasks a probe rolls out (host-side, static).

    Attributes:
      rows: ``i64[R]`` pool entries probed: the first entry of each distinct task (by prompt),
        at most ``per_category`` per category, in pool order.
      row_of_entry: ``i64[N]`` the index into ``rows`` of the task each pool entry holds, or
        -1 where that task was not probed.
      category: ``i64[R]`` the category of each probed task.
      probed: ``i64[C]`` probed tasks per category.
      distinct: ``i64[C]`` distinct tasks per category in the pool.
    """

    rows: np.ndarray
    row_of_entry: np.ndarray
    category: np.ndarray
    probed: np.ndarray
    distinct: np.ndarray


def probe_rows(pool, per_category: int | None = None) -> ProbeRows:
    """The distinct tasks of ``pool`` (a :class:`experiments._builders.Pool`) a probe rolls
    out: every one, or the first ``per_category`` of each category."""
    if per_category is not None and per_category < 0:
        raise ValueError(f"per_category must be >= 0 (0 or None: every task), got {per_category}")
    per_category = per_category or None
    category = np.asarray(pool.category)
    prompt = np.asarray(pool.train.prompt)
    _, first, inverse = np.unique(prompt, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    keep = np.zeros(first.size, bool)
    for c in range(pool.num_categories):
        of_c = np.flatnonzero(category[first] == c)
        of_c = of_c[np.argsort(first[of_c], kind="stable")]
        keep[of_c if per_category is None else of_c[:per_category]] = True
    distinct_ids = np.flatnonzero(keep)
    distinct_ids = distinct_ids[np.argsort(first[distinct_ids], kind="stable")]
    rows = first[distinct_ids]
    index = np.full(first.size, -1, np.int64)
    index[distinct_ids] = np.arange(distinct_ids.size)
    num_cat = pool.num_categories
    return ProbeRows(
        rows=rows,
        row_of_entry=index[inverse],
        category=category[rows],
        probed=np.bincount(category[rows], minlength=num_cat),
        distinct=np.bincount(category[first], minlength=num_cat),
    )


def make_measure(built, *, per_category: int | None = None, samples: int = 8):
    """``measure(solver_state, key) -> f32[R]``: the pass rate of each probed task (mean exact
    match of ``samples`` rollouts at the run's temperature; coin-flip tasks pay what they pay),
    with :class:`ProbeRows` ``probe_rows(built.pool, per_category)`` naming the tasks. Pure,
    jit-able; charged to nothing."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    rows = probe_rows(built.pool, per_category)
    tasks = T.take(built.pool.train, jnp.asarray(rows.rows))
    rollout = built.rollout

    def measure(solver_state, key):
        out = rollout(solver_state, tasks, key, samples)
        return jnp.mean(out.rewards.astype(jnp.float32), axis=1)

    return measure, rows


def make_probe(
    built,
    *,
    per_category: int | None = 32,
    samples: int = 8,
    mode: str = "learnability",
    mastered: float = 0.9,
    env: str | None = None,
):
    """``probe(engine_state, key) -> engine_state``: measures each probed task's pass rate
    under the current policy and writes pass rates and draw weights into the oracle sampler's
    state (pure, jit-able).

    Args:
      built: :class:`experiments._builders.Built` whose env's sampler is :func:`oracle`.
      per_category: distinct tasks probed per category (``None``: every one).
      samples: sampled rollouts per probed task (the run's temperature).
      mode: ``"learnability"`` or ``"frontier"`` (see the module docstring).
      mastered: the pass rate at which ``"frontier"`` moves on to the next level.
      env: the env name (default: the engine's only env).
    """
    if mode not in MODES:
        raise ValueError(f"oracle mode must be one of {list(MODES)}, got {mode!r}")
    engine, pool = built.engine, built.pool
    env = env or engine.env_names[0]
    measure, rows = make_measure(built, per_category=per_category, samples=samples)
    num_cat = pool.num_categories
    probed_cat = jnp.asarray(rows.category)
    counts = jnp.asarray(np.maximum(rows.probed, 1), jnp.float32)
    entry_row = jnp.asarray(np.maximum(rows.row_of_entry, 0))
    entry_probed = jnp.asarray(rows.row_of_entry >= 0)
    cat_all = jnp.asarray(pool.category)
    # Levels a frontier can sit on: present in the pool, and not coin flips.
    real = rows.probed > 0
    if pool.coin_level is not None:
        real[pool.coin_level] = False
    real = jnp.asarray(real)
    index = jnp.arange(num_cat)

    def per_entry(per_task):
        """Each entry's value: its own task's, or its category's mean where not probed."""
        cat_mean = jax.ops.segment_sum(per_task, probed_cat, num_segments=num_cat) / counts
        return jnp.where(entry_probed, per_task[entry_row], cat_mean[cat_all])

    def probe(state, key):
        p = measure(state.solver, key)
        if mode == "learnability":
            w = per_entry(p * (1.0 - p))
        else:
            per_cat = jax.ops.segment_sum(p, probed_cat, num_segments=num_cat) / counts
            open_ = real & (per_cat < mastered)
            first = jnp.argmax(open_)
            w_cat = jnp.where(jnp.any(open_), index == first, real).astype(jnp.float32)
            w = w_cat[cat_all]
        sampler = OracleState(per_entry(p).astype(jnp.float32), w.astype(jnp.float32))
        cur = state.curricula[env]._replace(sampler=sampler)
        return state._replace(curricula={**state.curricula, env: cur})

    return probe
