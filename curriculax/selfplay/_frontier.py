"""The frontier sampler: seed tasks plus a fixed-capacity buffer of generated tasks.

Each generated task keeps counts, not means: successes and samples at its first measurement
and at its latest, and its attempts. Learnability is judged online, first vs last:

- a task the solver already passes at its first measurement is dropped at once (it was never
  on the frontier: ``dropped_easy``);
- a task whose latest pass rate exceeds its first by more than ``z`` standard errors (a
  two-proportion test with the pooled rate) and clears ``pass_rate`` is dropped as
  ``learned`` when judged;
- a task not learned within ``max_attempts`` attempts is dropped as ``stuck`` when judged.

With several rollouts per attempt (the group) and the z test, a solver that does not learn
gets almost no task judged learned; a single rollout per attempt would call ~30% "learned".
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from curriculax import _counters, _permute, _select
from curriculax._checks import check_num, check_num_tasks
from curriculax._types import GroupResults, TaskDraw, TaskSampler

EMPTY, ACTIVE, WAITING = 0, 1, 2


class FrontierState(NamedTuple):
    """State of :func:`frontier_sampler` (``F`` = capacity).

    Attributes:
      seed: the seed sampler's state.
      tasks: generated task payloads, leaves ``[F, ...]`` shaped like the pool's rows.
      keys: ``u32[F]`` stable keys of the generated tasks.
      status: ``i32[F]`` 0 empty, 1 active, 2 out of attempts (awaiting judgement).
      spec: ``i32[F]`` round whose spec generated the task.
      gen_seed: ``u32[F]`` generation seed of the task.
      first_successes, first_samples: ``i32[F]`` counts at the first measurement.
      last_successes, last_samples: ``i32[F]`` counts at the latest measurement.
      attempts: ``i32[F]`` measured attempts (groups with a valid rollout).
      inserted, invalid, overflow: ``i32[]`` tasks inserted, payloads rejected as invalid,
        valid tasks that found no free slot (cumulative).
      learned, stuck, dropped_easy: ``i32[]`` tasks dropped for each reason (cumulative).
      judged_gain: ``f32[]`` sum of (latest - first) pass rate over judged tasks.
      judged: ``i32[]`` tasks judged (learned or stuck, cumulative).
      last_r0: ``f32[]`` mean (latest - first) over the tasks of the last judgement.
    """

    seed: Any
    tasks: Any
    keys: jax.Array
    status: jax.Array
    spec: jax.Array
    gen_seed: jax.Array
    first_successes: jax.Array
    first_samples: jax.Array
    last_successes: jax.Array
    last_samples: jax.Array
    attempts: jax.Array
    inserted: jax.Array
    invalid: jax.Array
    overflow: jax.Array
    learned: jax.Array
    stuck: jax.Array
    dropped_easy: jax.Array
    judged_gain: jax.Array
    judged: jax.Array
    last_r0: jax.Array


class JudgeReport(NamedTuple):
    """What one judgement decided (all ``f32[]`` / ``i32[]``).

    Attributes:
      learned: tasks judged learned now.
      stuck: tasks judged stuck now.
      r0: mean (latest - first) pass rate over the tasks judged now (0 if none).
      occupancy: tasks left on the frontier.
    """

    learned: jax.Array
    stuck: jax.Array
    r0: jax.Array
    occupancy: jax.Array


class Frontier(NamedTuple):
    """A frontier sampler: the :class:`~curriculax.TaskSampler` plus its two host-driven steps.

    Attributes:
      sampler: the TaskSampler (``init``, ``sample``, ``observe``, ``metrics``).
      insert: ``(state, tasks [P, ...], valid bool[P], keys u32[P], spec i32[], gen_seeds
        u32[P], invalid i32[]) -> state``: places the valid generated tasks in free slots and
        counts ``invalid`` rejected payloads.
      judge: ``(state) -> (state, JudgeReport)``: drops learned and stuck tasks.
      num_seed: seed pool size ``N`` (frontier tasks have ids ``N + slot``).
      capacity: ``F``.
    """

    sampler: TaskSampler
    insert: Any
    judge: Any
    num_seed: int
    capacity: int


def frontier_sampler(
    seed_sampler: TaskSampler,
    num_seed: int,
    example_task: Any,
    *,
    capacity: int = 128,
    frontier_share: float = 0.25,
    max_attempts: int = 4,
    success_threshold: float = 1.0,
    pass_rate: float = 0.5,
    z: float = 2.0,
) -> Frontier:
    """Builds a frontier sampler over a seed sampler.

    ``sample(num)`` draws ``round(frontier_share * num)`` distinct active frontier tasks (as
    payloads, ids ``num_seed + slot``) and the rest from the seed sampler. When fewer frontier
    tasks are active, the missing frontier slots are filled with seed tasks drawn uniformly at
    random, so the seed sampler always advances by the same count. ``observe`` passes seed
    results to the seed sampler (frontier rows arrive there with id -1 and no valid rollout)
    and updates the frontier counts.

    Args:
      seed_sampler: sampler over the ``num_seed`` seed tasks.
      num_seed: seed pool size ``N``.
      example_task: one task (leaves without the task axis; arrays or ShapeDtypeStructs),
        giving the payload layout.
      capacity: frontier buffer size ``F``.
      frontier_share: share of each batch drawn from the frontier, in ``[0, 1]``.
      max_attempts: measured attempts before a task that was not learned is judged stuck.
      success_threshold: a rollout with reward ``>= success_threshold`` is a success.
      pass_rate: a task "passes" at a pass rate ``>= pass_rate``.
      z: standard errors the latest pass rate must exceed the first by to count as learned.

    Returns:
      A :class:`Frontier`; its sampler's ``num_tasks`` is ``num_seed + capacity`` (seed ids,
      then frontier ids). Sampler metrics: ``occupancy``, ``learned``, ``stuck``,
      ``dropped_easy``, ``invalid``, ``overflow``, ``r0`` and the seed sampler's as
      ``seed/<k>``.
    """
    n = check_num_tasks(num_seed, "num_seed")
    f = check_num_tasks(capacity, "capacity")
    if not 0.0 <= frontier_share <= 1.0:
        raise ValueError(f"frontier_share must be in [0, 1], got {frontier_share}")
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 2:
        raise ValueError(
            f"max_attempts must be an int >= 2 (first vs latest needs two), got {max_attempts!r}"
        )
    for name, value in (("pass_rate", pass_rate), ("success_threshold", success_threshold)):
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value}")
    if not 0.0 < pass_rate <= 1.0:
        raise ValueError(f"pass_rate must be in (0, 1], got {pass_rate}")
    if not z >= 0:
        raise ValueError(f"z must be >= 0, got {z}")
    if not isinstance(seed_sampler, TaskSampler):
        raise TypeError(f"seed_sampler must be a TaskSampler, got {type(seed_sampler).__name__}")
    if seed_sampler.num_tasks is not None and seed_sampler.num_tasks != n:
        raise ValueError(
            f"seed_sampler draws from {seed_sampler.num_tasks} tasks but num_seed is {n}; "
            "build the seed sampler over the num_seed seed tasks"
        )
    layout = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x)), example_task
    )

    def init(key):
        def zi():  # a fresh buffer per field: a donated state must hold each buffer once
            return jnp.zeros((f,), jnp.int32)

        return FrontierState(
            seed=seed_sampler.init(key),
            tasks=jax.tree.map(lambda s: jnp.zeros((f, *s.shape), s.dtype), layout),
            keys=jnp.zeros((f,), jnp.uint32),
            status=zi(),
            spec=zi(),
            gen_seed=jnp.zeros((f,), jnp.uint32),
            first_successes=zi(),
            first_samples=zi(),
            last_successes=zi(),
            last_samples=zi(),
            attempts=zi(),
            inserted=_counters.zero(),
            invalid=_counters.zero(),
            overflow=_counters.zero(),
            learned=_counters.zero(),
            stuck=_counters.zero(),
            dropped_easy=_counters.zero(),
            judged_gain=jnp.zeros((), jnp.float32),
            judged=_counters.zero(),
            last_r0=jnp.zeros((), jnp.float32),
        )

    def sample(state: FrontierState, key, num: int):
        num = check_num(num)
        n_front = round(frontier_share * num)
        n_seed = num - n_front
        k_seed, k_words = jax.random.split(key)
        pick_word, fill_word = jax.random.bits(k_words, (2,), jnp.uint32)
        seed_ids, seed_state = seed_sampler.sample(state.seed, k_seed, n_seed)
        seed_ids = jnp.asarray(seed_ids, jnp.int32)
        pos = jnp.arange(n_front, dtype=jnp.int32)
        labels = jnp.where(state.status == ACTIVE, 0, -1)
        index = _select.build_index(labels, 1)
        active = index.counts[0]
        rank = _permute.permute(pos, active, _permute.round_keys(pick_word))
        slot = _select.select(index, jnp.zeros_like(pos), rank)
        use_front = pos < active
        fill = _permute.permute(pos, n, _permute.round_keys(fill_word))
        front_ids = jnp.where(use_front, n + slot, fill)
        ids = jnp.concatenate([front_ids, seed_ids])
        from_pool = jnp.concatenate([~use_front, jnp.ones((n_seed,), bool)])
        payload = jax.tree.map(
            lambda buf: jnp.concatenate(
                [buf[slot], jnp.zeros((n_seed, *buf.shape[1:]), buf.dtype)]
            ),
            state.tasks,
        )
        keys = jnp.concatenate([state.keys[slot], jnp.zeros((n_seed,), jnp.uint32)])
        return TaskDraw(ids, from_pool, payload, keys), state._replace(seed=seed_state)

    def observe(state: FrontierState, results: GroupResults) -> FrontierState:
        ids = results.task_ids.astype(jnp.int32)
        front = (ids >= n) & (ids < n + f)
        seed_results = results._replace(
            task_ids=jnp.where(front | (ids >= n), -1, ids),
            valid=results.valid & ~front[:, None],
        )
        seed_state = seed_sampler.observe(state.seed, seed_results)
        valid = results.valid.astype(bool)
        samples = jnp.sum(valid, axis=1, dtype=jnp.int32)
        successes = jnp.sum(valid & (results.rewards >= success_threshold), axis=1, dtype=jnp.int32)
        slot = jnp.where(front, ids - n, 0)
        live = front & (samples > 0) & (state.status[slot] == ACTIVE)
        target = jnp.where(live, slot, f)  # out of range: dropped
        first_time = live & (state.first_samples[slot] == 0)
        first_target = jnp.where(first_time, slot, f)
        fs = state.first_successes.at[first_target].set(successes, mode="drop")
        fn = state.first_samples.at[first_target].set(samples, mode="drop")
        ls = state.last_successes.at[target].set(successes, mode="drop")
        ln = state.last_samples.at[target].set(samples, mode="drop")
        attempts = state.attempts.at[target].add(1, mode="drop")
        easy = first_time & (successes >= pass_rate * samples)
        status = state.status.at[jnp.where(easy, slot, f)].set(EMPTY, mode="drop")
        exhausted = (status == ACTIVE) & (attempts >= max_attempts)
        status = jnp.where(exhausted, WAITING, status)
        return state._replace(
            seed=seed_state,
            status=status,
            first_successes=fs,
            first_samples=fn,
            last_successes=ls,
            last_samples=ln,
            attempts=attempts,
            dropped_easy=_counters.add(state.dropped_easy, jnp.sum(easy, dtype=jnp.int32)),
        )

    def judge(state: FrontierState):
        on = (state.status == ACTIVE) | (state.status == WAITING)
        fn = state.first_samples.astype(jnp.float32)
        ln = state.last_samples.astype(jnp.float32)
        p0 = state.first_successes / jnp.maximum(fn, 1.0)
        p1 = state.last_successes / jnp.maximum(ln, 1.0)
        pooled = (state.first_successes + state.last_successes) / jnp.maximum(fn + ln, 1.0)
        se = jnp.sqrt(
            pooled * (1.0 - pooled) * (1.0 / jnp.maximum(fn, 1.0) + 1.0 / jnp.maximum(ln, 1.0))
        )
        measured = on & (state.attempts >= 2) & (fn > 0) & (ln > 0)
        learned = measured & (p1 - p0 > z * se) & (p1 >= pass_rate)
        stuck = (state.status == WAITING) & ~learned
        judged = learned | stuck
        count = jnp.sum(judged, dtype=jnp.int32)
        gain = jnp.sum(jnp.where(judged, p1 - p0, 0.0))
        r0 = gain / jnp.maximum(count, 1).astype(jnp.float32)
        status = jnp.where(judged, EMPTY, state.status)
        new = state._replace(
            status=status,
            learned=_counters.add(state.learned, jnp.sum(learned, dtype=jnp.int32)),
            stuck=_counters.add(state.stuck, jnp.sum(stuck, dtype=jnp.int32)),
            judged_gain=state.judged_gain + gain,
            judged=_counters.add(state.judged, count),
            last_r0=r0,
        )
        occupancy = jnp.sum(status != EMPTY, dtype=jnp.int32)
        report = JudgeReport(
            jnp.sum(learned, dtype=jnp.int32), jnp.sum(stuck, dtype=jnp.int32), r0, occupancy
        )
        return new, report

    def insert(state: FrontierState, tasks, valid, keys, spec, gen_seeds, invalid):
        valid = jnp.asarray(valid, bool)
        p = valid.shape[0]
        free_labels = jnp.where(state.status == EMPTY, 0, -1)
        index = _select.build_index(free_labels, 1)
        free = index.counts[0]
        rank = jnp.cumsum(valid.astype(jnp.int32)) - 1  # k-th valid payload -> k-th free slot
        placed = valid & (rank < free)
        slot = _select.select(index, jnp.zeros((p,), jnp.int32), jnp.clip(rank, 0, None))
        target = jnp.where(placed, slot, f)

        def put(buf, new):
            return buf.at[target].set(jnp.asarray(new, buf.dtype), mode="drop")

        zeros = jnp.zeros((p,), jnp.int32)
        return state._replace(
            tasks=jax.tree.map(put, state.tasks, tasks),
            keys=put(state.keys, keys),
            status=put(state.status, jnp.full((p,), ACTIVE, jnp.int32)),
            spec=put(state.spec, jnp.broadcast_to(jnp.asarray(spec, jnp.int32), (p,))),
            gen_seed=put(state.gen_seed, gen_seeds),
            first_successes=put(state.first_successes, zeros),
            first_samples=put(state.first_samples, zeros),
            last_successes=put(state.last_successes, zeros),
            last_samples=put(state.last_samples, zeros),
            attempts=put(state.attempts, zeros),
            inserted=_counters.add(state.inserted, jnp.sum(placed, dtype=jnp.int32)),
            invalid=_counters.add(state.invalid, invalid),
            overflow=_counters.add(state.overflow, jnp.sum(valid & ~placed, dtype=jnp.int32)),
        )

    def metrics(state: FrontierState):
        out = {
            "occupancy": jnp.sum(state.status != EMPTY).astype(jnp.float32),
            "learned": state.learned.astype(jnp.float32),
            "stuck": state.stuck.astype(jnp.float32),
            "dropped_easy": state.dropped_easy.astype(jnp.float32),
            "invalid": state.invalid.astype(jnp.float32),
            "overflow": state.overflow.astype(jnp.float32),
            "inserted": state.inserted.astype(jnp.float32),
            "r0": state.last_r0,
        }
        for k, v in seed_sampler.metrics(state.seed).items():
            out[f"seed/{k}"] = v
        return out

    sampler = TaskSampler(init, sample, observe, metrics, num_tasks=n + f)
    return Frontier(sampler, insert, judge, n, f)
