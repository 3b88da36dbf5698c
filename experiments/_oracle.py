"""The oracle arms of a study, and the free pass-rate probe behind them.

A real curriculum only knows what its own rollouts told it. An oracle is told the truth: every
``every`` generation batches a free evaluation (not charged to the rollout budget) measures
the current policy's pass rate on every distinct task of the pool (at most ``per_category``
per category) and writes it into the oracle sampler's state. Two rules (see
``docs/oracle.md``):

- ``"learnability"`` (the sound per-task oracle): each task's ``p (1 - p)`` from its **exact**
  pass rate ``p`` (``exact = true``: the policy's probability of the correct answer by one
  teacher-forced pass, :func:`experiments._builders.make_pass_probability`; a coin-flip task's
  ``p`` is its coin's), or from ``samples`` sampled rollouts (``exact = false``), refreshed
  before every generation batch (``every = 1``), at least as often as a sampler's own
  evidence. Draws as :func:`curriculax.samplers.learnability` draws (``draw = "top"``): a
  share ``uniform_share`` of each call uniformly over the entries, the rest the tasks of
  highest ``p (1 - p)``, distinct within a call, copies of one task counted once, ties broken
  at random; so it is learnability with the true ``p`` instead of a posterior. Per task, not
  per level: a level with half its tasks solved and half unsolved has a level-mean
  ``p (1 - p)`` of 0.25 and no task with any signal. A pool entry whose task was not probed (a
  category with more than ``per_category`` distinct tasks) gets the mean ``p (1 - p)`` of its
  category's probed tasks. Probe cost: one teacher-forced sequence per distinct task per
  probe, i.e. ``R / (every * groups_per_generation * group_size)`` sequences per training
  rollout for ``R`` distinct tasks (hard-skew: 286 / 128 = 2.2), free by design.
- ``"frontier"``: every draw from the lowest level the policy has not mastered (mean pass rate
  of its probed tasks below ``mastered``), never from coin-flip tasks; once all are mastered,
  uniform over the real levels' entries (each level drawn in proportion to its entries, as
  uniform sampling of the pool without its coin flips would, not an equal share per level). The
  curriculum a teacher who knows the prerequisite chain would run. Draws in proportion to its
  weights (``draw = "proportional"``): evenly over the level's entries.

The same probe measures, for the study's pass-rate diagnostics, how the pool's tasks split
into never solved, sometimes solved and always solved (:func:`make_measure`): a task whose
probe group of ``samples`` rollouts has both outcomes is exactly a task whose group would carry
a learning signal.

Example:
  >>> settings = oracle_settings({})                      # the sound p(1 - p) oracle
  >>> built, probe = build_oracle(experiment, settings)
  >>> state = probe(state, key)      # inside the scanned program, before each batch
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import TaskSampler, _entries
from curriculax import tasks as T
from curriculax._checks import check_num, check_num_tasks, number, unit_interval
from curriculax.samplers.learnability import ranked_draw
from experiments._builders import build, make_study_pool


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
DRAWS = ("top", "proportional")
# Each rule's probe and draw. The p(1 - p) oracle refreshes exact pass rates before every
# generation batch (a sampler's own evidence changes as often) on every distinct task; the
# frontier only needs each level's mean pass rate, which 8 rollouts on 32 tasks give.
DEFAULTS = {
    "learnability": {
        "every": 1,
        "per_category": 0,
        "exact": True,
        "samples": 32,
        "draw": "top",
        "uniform_share": 0.05,
        "floor": 1e-6,
        "mastered": 0.9,
    },
    "frontier": {
        "every": 0,
        "per_category": 32,
        "exact": False,
        "samples": 8,
        "draw": "proportional",
        "uniform_share": 0.0,
        "floor": 1e-6,
        "mastered": 0.9,
    },
}
SETTINGS = ("mode", *DEFAULTS["learnability"])


def oracle_settings(table: Mapping) -> dict:
    """An arm's ``oracle`` table (``gates`` aside) with its mode's defaults filled in.

    Raises:
      ValueError: an unknown key or mode, naming it and what is accepted; a value out of
        range (``mastered`` outside (0, 1], ``exact`` not a bool, ``every``, ``per_category``
        or ``samples`` not a whole number, ...), naming the key and the value.
    """
    table = {k: v for k, v in table.items() if k != "gates"}
    bad = sorted(set(table) - set(SETTINGS))
    if bad:
        raise ValueError(f"unknown oracle key(s) {bad}; accepted keys are {[*SETTINGS, 'gates']}")
    mode = table.get("mode", "learnability")
    if mode not in MODES:
        raise ValueError(f"oracle.mode must be one of {list(MODES)}, got {mode!r}")
    out = {"mode": mode, **DEFAULTS[mode], **table}
    if out["draw"] not in DRAWS:
        raise ValueError(f"oracle.draw must be one of {list(DRAWS)}, got {out['draw']!r}")
    try:
        unit_interval(out["uniform_share"], "oracle.uniform_share")
        check_floor(out["floor"], "oracle.floor")
    except TypeError as e:  # a study's config checks report ValueErrors
        raise ValueError(str(e)) from None
    check_probe_settings(out["mastered"], out["exact"], "oracle.")
    for key in ("every", "per_category", "samples"):
        # A fractional `every` would divide eval_every (5 % 2.5 == 0) and then scan
        # eval_every // every blocks of int(every) batches: fewer batches than the budget.
        if isinstance(out[key], bool) or not isinstance(out[key], int | np.integer):
            raise ValueError(f"oracle.{key} must be a whole number, got {out[key]!r}")
    if out["every"] < 0 or out["samples"] < 1 or out["per_category"] < 0:
        raise ValueError(
            "oracle.every and oracle.per_category must be >= 0 and oracle.samples >= 1, got "
            f"{out['every']}, {out['per_category']}, {out['samples']}"
        )
    return out


def check_floor(floor: object, name: str) -> float:
    """``floor`` as a finite float > 0 (an infinite one puts every proportional draw on the
    pool's last entry); a TypeError or ValueError naming ``name`` otherwise."""
    floor = number(floor, name)
    if not (math.isfinite(floor) and floor > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {floor!r}")
    return floor


def check_probe_settings(mastered, exact, prefix: str = "") -> None:
    """Refuses a ``mastered`` outside (0, 1] or not a finite number (above 1 no level is ever
    mastered and the frontier stays on the first one), and an ``exact`` that is not a bool
    (``"no"`` would read as true), naming the key (``prefix`` + its name) and the value."""
    if (
        isinstance(mastered, bool)
        or not isinstance(mastered, int | float)
        or not math.isfinite(mastered)
        or not 0.0 < mastered <= 1.0
    ):
        raise ValueError(f"{prefix}mastered must be a number in (0, 1], got {mastered!r}")
    if not isinstance(exact, bool | np.bool_):
        raise ValueError(f"{prefix}exact must be true or false, got {exact!r}")


def oracle(
    num_tasks: int,
    *,
    draw: str = "proportional",
    floor: float = 1e-6,
    uniform_share: float = 0.05,
    entry_task=None,
) -> TaskSampler:
    """Draws tasks by the weights :func:`make_probe` writes into its state.

    ``observe`` ignores results. Two draws, both O(N + num log N):

    - ``"top"``: as :func:`curriculax.samplers.learnability` draws. A share ``uniform_share``
      of the call (randomized rounding) uniformly over the entries, placed last; the other
      positions take the highest-weight tasks, distinct within the call and distinct from the
      uniform picks, ties broken at random (so a pool with no weight anywhere is drawn
      uniformly, without repeats). With ``entry_task`` (``int[N]``, equal values: the same
      task; :func:`curriculax.tasks.distinct_tasks`) copies of a task count once. Only a call
      larger than the pool's distinct tasks repeats one (the best cycling). One task with all
      the weight gets one position per call, never the whole call. Weights rank on a log
      scale, so tasks far below the best (``p`` near 0 or 1) are still ordered, not tied.
    - ``"proportional"``: systematic draws in proportion to ``weight + floor`` (one uniform
      offset, ``num`` evenly spaced points on the cumulative weights): a call spreads its
      draws like the weights. The frontier rule's draw (equal weights over one level).

    Args:
      num_tasks: pool size ``N``.
      draw: ``"top"`` or ``"proportional"``.
      floor: ``"proportional"``: weight added to every task, so a pool with no weight
        anywhere is drawn uniformly.
      uniform_share: ``"top"``: share of each call drawn uniformly, in [0, 1].
      entry_task: ``"top"``: ``int[N]`` the task each entry holds (None: its own).

    Returns:
      A :class:`~curriculax.TaskSampler` with state :class:`OracleState`. Metrics:
      ``mean_pass_rate``, ``learnability`` (mean ``p (1 - p)`` over the pool).
    """
    n = check_num_tasks(num_tasks)
    if draw not in DRAWS:
        raise ValueError(f"oracle: draw must be one of {list(DRAWS)}, got {draw!r}")
    floor = check_floor(floor, "oracle: floor")
    uniform_share = unit_interval(uniform_share, "oracle: uniform_share")
    ent = _entries.entries(entry_task, n, "oracle")

    def init(key):
        del key
        return OracleState(jnp.zeros((n,), jnp.float32), jnp.zeros((n,), jnp.float32))

    def proportional(state: OracleState, key: jax.Array, num: int):
        cum = jnp.cumsum(state.weight + floor)
        points = (jnp.arange(num, dtype=jnp.float32) + jax.random.uniform(key)) / num * cum[-1]
        return jnp.minimum(jnp.searchsorted(cum, points, side="right"), n - 1)

    def top(state: OracleState, key: jax.Array, num: int):
        def score(word, ids):
            del word, ids
            # Log-scaled scores relative to the best weight: the 15 ranking bits then order
            # weights from the best down to 1e-30 of it (0.2% apart), where linear scores
            # would tie every task below 3e-5 of the best (most of a pool whose tasks sit at
            # p ~ 0 or 1) and hand those draws out at random.
            rel = state.weight / jnp.maximum(jnp.max(state.weight), jnp.float32(1e-30))
            return 1.0 + jnp.log(jnp.maximum(rel, jnp.float32(1e-30))) / jnp.float32(69.1)

        ids, _ = ranked_draw(
            jnp.ones((n,), bool),
            score,
            key,
            num,
            n,
            uniform_share=uniform_share,
            unseen_first=False,
            axis_name=None,
            entry_rep=ent.rep,
        )
        return ids

    def sample(state: OracleState, key: jax.Array, num: int):
        num = check_num(num)
        if num == 0:
            return jnp.zeros((0,), jnp.int32), state
        ids = (top if draw == "top" else proportional)(state, key, num)
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


def make_measure(built, *, per_category: int | None = None, samples: int = 8, exact: bool = False):
    """``measure(solver_state, key) -> f32[R]``: the pass rate of each probed task, with
    :class:`ProbeRows` ``probe_rows(built.pool, per_category)`` naming the tasks. Pure,
    jit-able; charged to nothing.

    ``exact``: the task's exact probability of a reward of 1 in one rollout
    (``built.pass_probability``: one teacher-forced pass per task, no sampling noise; the key
    is unused). Otherwise the share of ``samples`` rollouts at the run's temperature with a
    reward of 1 (an exact match; with ``grpo.reward = "partial"`` the partial credit of the
    others does not count; coin-flip tasks pay what they pay).
    """
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    rows = probe_rows(built.pool, per_category)
    tasks = T.take(built.pool.train, jnp.asarray(rows.rows))
    if exact:
        if built.pass_probability is None:
            raise ValueError(
                "exact pass rates need the run's exact-match pass probability "
                "(Built.pass_probability, built for grpo.reward = 'exact'); use exact = false "
                "to measure by sampled rollouts"
            )
        pass_probability = built.pass_probability

        def measure(solver_state, key):
            del key
            return pass_probability(solver_state, tasks).astype(jnp.float32)

        return measure, rows
    rollout = built.rollout

    def measure(solver_state, key):
        out = rollout(solver_state, tasks, key, samples)
        return jnp.mean((out.rewards >= 1.0).astype(jnp.float32), axis=1)

    return measure, rows


def make_probe(
    built,
    *,
    per_category: int | None = 32,
    samples: int = 8,
    mode: str = "learnability",
    mastered: float = 0.9,
    exact: bool = False,
    env: str | None = None,
):
    """``probe(engine_state, key) -> engine_state``: measures each probed task's pass rate
    under the current policy and writes pass rates and draw weights into the oracle sampler's
    state (pure, jit-able).

    Args:
      built: :class:`experiments._builders.Built` whose env's sampler is :func:`oracle`.
      per_category: distinct tasks probed per category (``None`` or 0: every one).
      samples: sampled rollouts per probed task (the run's temperature), when not ``exact``.
      mode: ``"learnability"`` or ``"frontier"`` (see the module docstring).
      mastered: the pass rate at which ``"frontier"`` moves on to the next level.
      exact: exact pass rates by teacher forcing instead of sampled rollouts.
      env: the env name (default: the engine's only env).
    """
    if mode not in MODES:
        raise ValueError(f"oracle mode must be one of {list(MODES)}, got {mode!r}")
    check_probe_settings(mastered, exact)
    pool = built.pool
    env = env or built.engine.env_names[0]
    measure, rows = make_measure(built, per_category=per_category, samples=samples, exact=exact)
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


def build_oracle(experiment, settings: Mapping, gates: Mapping | None = None, mesh=None):
    """``(built, probe)``: the engine of one oracle arm (an :func:`oracle` sampler drawing as
    ``settings`` say, plus ``gates``) and its probe.

    Args:
      experiment: the arm's :class:`experiments._builders.GRPOExperimentConfig`.
      settings: :func:`oracle_settings` of the arm's ``oracle`` table.
      gates: the arm's gates config (``{name: {type: ...}}``).
      mesh: optional device mesh.
    """
    entry_task = T.distinct_tasks(make_study_pool(experiment).train)
    sampler = oracle(
        experiment.task.size,
        draw=settings["draw"],
        floor=settings["floor"],
        uniform_share=settings["uniform_share"],
        entry_task=entry_task,
    )
    built = build(experiment, mesh, {"gates": dict(gates or {})}, sampler=sampler)
    probe = make_probe(
        built,
        per_category=settings["per_category"] or None,
        samples=settings["samples"],
        mode=settings["mode"],
        mastered=settings["mastered"],
        exact=settings["exact"],
    )
    return built, probe
