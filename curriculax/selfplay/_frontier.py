"""The frontier sampler: seed tasks plus a fixed-capacity buffer of generated tasks.

The judge is a two-sample estimator whose filter and baseline never share a rollout. The
first attempt's group is split in two halves (even and odd rollouts, measured with the same
policy): the even half decides whether the task is already passed (then it is dropped,
``dropped_easy``); the odd half, which that decision never saw, is the baseline. Each
surviving task is judged exactly once, after its ``max_attempts``-th attempt: its gain is the
latest attempt's pass rate minus the baseline's, ``r0`` is the mean gain over judged tasks,
and it counts as ``learned`` when the gain exceeds ``z`` standard errors (a two-proportion
test with the pooled rate) and the latest pass rate clears ``pass_rate``, otherwise ``stuck``.

Why it is unbiased: the two halves are independent draws of the same pass rate, so dropping
tasks on a lucky (or unlucky) filter half leaves the baseline an honest estimate of the pass
rate before training; and one fixed look per task leaves no room to stop on a lucky streak.
For a solver that does not learn, the expected gain is 0 and about 2-3% of judged tasks pass
the z-test by chance. ``r0`` measures all improvement on the task (what the solver learned
from the task itself and from everything else it trained on between the two measurements).

The assumption: a group's rollouts are exchangeable by position (the even half, the odd half
and the whole group draw the same pass rate), since the gain compares the latest attempt's
full group with the first attempt's odd half. GRPO rollouts are i.i.d. samples of the policy,
so it holds for the built-in solver. A solver whose rollouts differ by position (e.g. rollout
0 decoded greedily, the rest sampled) breaks it: a frozen one then gets a positive gain and
tasks judged learned.
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
      filter_successes, filter_samples: ``i32[F]`` counts of the first attempt's even
        rollouts (the "already passed?" filter).
      base_successes, base_samples: ``i32[F]`` counts of the first attempt's odd rollouts
        (the baseline).
      last_successes, last_samples: ``i32[F]`` counts at the latest attempt.
      attempts: ``i32[F]`` measured attempts (groups with a valid rollout; the first one needs
        a valid rollout in each half).
      inserted, invalid, overflow: ``i32[]`` tasks inserted, payloads rejected as invalid,
        valid tasks that found no free slot (cumulative).
      learned, stuck, dropped_easy: ``i32[]`` tasks dropped for each reason (cumulative).
      judged_gain: ``f32[]`` sum of (latest - baseline) pass rate over judged tasks.
      judged: ``i32[]`` tasks judged (learned or stuck, cumulative).
      last_r0: ``f32[]`` mean (latest - baseline) over the tasks of the last judgement.
    """

    seed: Any
    tasks: Any
    keys: jax.Array
    status: jax.Array
    spec: jax.Array
    gen_seed: jax.Array
    filter_successes: jax.Array
    filter_samples: jax.Array
    base_successes: jax.Array
    base_samples: jax.Array
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
      r0: mean (latest - baseline) pass rate over the tasks judged now (0 if none).
      occupancy: tasks left on the frontier.
      judged_mask: ``bool[F]`` the slots judged now (their payloads stay in
        ``state.tasks`` until a later insert reuses the slot).
      learned_mask: ``bool[F]`` the slots judged learned now.
      gain: ``f32[F]`` (latest - baseline) pass rate per slot (meaningful where judged).
    """

    learned: jax.Array
    stuck: jax.Array
    r0: jax.Array
    occupancy: jax.Array
    judged_mask: jax.Array
    learned_mask: jax.Array
    gain: jax.Array


class Frontier(NamedTuple):
    """A frontier sampler: the :class:`~curriculax.TaskSampler` plus its two host-driven steps.

    Attributes:
      sampler: the TaskSampler (``init``, ``sample``, ``observe``, ``metrics``).
      insert: ``(state, tasks [P, ...], valid bool[P], keys u32[P], spec i32[], gen_seeds
        u32[P], invalid i32[]) -> state``: places the valid generated tasks in free slots and
        counts ``invalid`` rejected payloads. It does not compare keys: the runners reject a
        task whose key an active or waiting slot holds before inserting (``run_challenge``'s
        ``on_frontier``), so no task is judged twice in two slots.
      judge: ``(state) -> (state, JudgeReport)``: judges the tasks that used up their
        attempts (learned or stuck) and drops them. Its gain, the latest attempt's full group
        minus the first attempt's odd half, is unbiased only when a group's rollouts are
        exchangeable by position (see the module docstring).
      num_seed: seed pool size ``N`` (frontier tasks have ids ``N + slot``).
      capacity: ``F``.
    """

    sampler: TaskSampler
    insert: Any
    judge: Any
    num_seed: int
    capacity: int


def _share(successes: jax.Array, samples: jax.Array) -> jax.Array:
    """``f32[...]`` pass rate ``successes / samples`` (0 where there is no sample): the easy
    filter and the judge compare it with ``pass_rate`` alike, so they agree on every count."""
    return successes / jnp.maximum(samples.astype(jnp.float32), 1.0)


def check_frontier_draws(frontier_share: float, num: Any, where: str) -> None:
    """Raises a ValueError when a positive ``frontier_share`` of a generation batch of ``num``
    groups rounds to 0 frontier draws (generated tasks would never be attempted). The
    self-play runners call it with their batch size before building anything; a ``num`` that
    is not an int >= 1 is left to the engine's own checks. ``where`` names the batch size's
    argument for the message."""
    if isinstance(num, bool) or not isinstance(num, int) or num < 1:
        return
    if frontier_share > 0 and round(frontier_share * num) == 0:
        raise ValueError(
            f"frontier_share={frontier_share} of a generation batch of {num} groups ({where}) "
            "rounds to 0 frontier groups, so generated tasks would never be attempted; raise "
            f"frontier_share above {0.5 / num:g} or {where}"
        )


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

    The judge (``Frontier.judge``) splits each generated task's first attempt into a filter
    half (even rollouts: already passed? then dropped) and a baseline half (odd rollouts), and
    judges the task once, after ``max_attempts`` attempts, on latest minus baseline; the
    module docstring says why that is unbiased when a group's rollouts are exchangeable by
    position (i.i.d. samples, as GRPO's), and how it is biased otherwise.

    ``sample(num)`` draws ``round(frontier_share * num)`` distinct active frontier tasks (as
    payloads, ids ``num_seed + slot``) and the rest from the seed sampler (a positive share
    that rounds to 0 draws none; the self-play runners refuse such a batch size). When
    fewer frontier tasks are active, the missing frontier slots are filled with seed tasks
    drawn uniformly at random (distinct while there are as many seed tasks as slots to fill;
    beyond, each seed task as often as any other give or take one), so the seed sampler
    always advances by the same count.
    ``observe`` passes seed results to the seed sampler (frontier rows arrive there with id -1
    and no valid rollout) and updates the frontier counts (group size ``K >= 2``: the first
    attempt is split into a filter half and a baseline half, see the module docstring). A batch
    that holds one frontier task twice (``HostCurriculum`` joins kept draws with a fresh draw)
    counts as its rows observed one after another in batch order: only the earliest measured
    row is the first attempt, the latest counts are the last one's, and rows past
    ``max_attempts`` are not counted.

    Args:
      seed_sampler: sampler over the ``num_seed`` seed tasks.
      num_seed: seed pool size ``N``.
      example_task: one task (leaves without the task axis; arrays or ShapeDtypeStructs),
        giving the payload layout.
      capacity: frontier buffer size ``F``.
      frontier_share: share of each batch drawn from the frontier, in ``[0, 1]``.
      max_attempts: measured attempts after which a task is judged (learned or stuck), >= 2.
      success_threshold: a rollout with reward ``>= success_threshold`` is a success.
      pass_rate: a task "passes" at a pass rate ``>= pass_rate`` (the filter half: dropped
        as easy; the latest attempt: may count as learned).
      z: standard errors the latest pass rate must exceed the baseline by to count as learned.

    Returns:
      A :class:`Frontier`; its sampler's ``num_tasks`` is ``num_seed + capacity`` (seed ids,
      then frontier ids). Sampler metrics: ``occupancy``, ``learned``, ``stuck``,
      ``dropped_easy``, ``judged``, ``invalid``, ``overflow``, ``inserted``, ``r0`` and the
      seed sampler's as
      ``seed/<k>``.
    """
    n = check_num_tasks(num_seed, "num_seed")
    f = check_num_tasks(capacity, "capacity")
    if not 0.0 <= frontier_share <= 1.0:
        raise ValueError(f"frontier_share must be in [0, 1], got {frontier_share}")
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 2:
        raise ValueError(
            f"max_attempts must be an int >= 2 (baseline vs latest needs two), got {max_attempts!r}"
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
            filter_successes=zi(),
            filter_samples=zi(),
            base_successes=zi(),
            base_samples=zi(),
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
        # pos % n: more fill slots than seed tasks cycle through one permutation (each task
        # drawn as often as any other, give or take one), where a clamp repeated the last.
        fill = _permute.permute(pos % n, n, _permute.round_keys(fill_word))
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
        k = results.rewards.shape[1]
        if k < 2:
            raise ValueError(
                f"the frontier judge needs group_size >= 2 (got {k}): it splits a task's first "
                "attempt into a filter half and an independent baseline half"
            )
        ids = results.task_ids.astype(jnp.int32)
        front = (ids >= n) & (ids < n + f)
        seed_results = results._replace(
            task_ids=jnp.where(front | (ids >= n), -1, ids),
            valid=results.valid & ~front[:, None],
        )
        seed_state = seed_sampler.observe(state.seed, seed_results)
        valid = results.valid.astype(bool)
        success = valid & (results.rewards >= success_threshold)
        even = (jnp.arange(k) % 2 == 0)[None, :]

        def count(mask):
            return jnp.sum(mask, axis=1, dtype=jnp.int32)

        samples, successes = count(valid), count(success)
        filter_n, filter_s = count(valid & even), count(success & even)
        base_n, base_s = samples - filter_n, successes - filter_s
        slot = jnp.where(front, ids - n, 0)
        active = front & (state.status[slot] == ACTIVE)
        # One observe equals observing its rows one after another in batch order: a batch may
        # hold one slot twice (HostCurriculum joins kept draws with a fresh draw). before[i, j]
        # (after[i, j]): row j is an earlier (a later) row on row i's slot.
        order = jnp.arange(ids.shape[0])
        same = (slot[:, None] == slot[None, :]) & active[:, None] & active[None, :]
        before = same & (order[None, :] < order[:, None])
        after = same & (order[None, :] > order[:, None])

        def earlier(mask):
            return jnp.any(before & mask[None, :], axis=1)

        # A first attempt needs a valid rollout in each half (a row without one measures
        # nothing, so the slot's next row is still its first); a later one, any valid rollout.
        untried = active & (state.attempts[slot] == 0)
        can_open = untried & (filter_n > 0) & (base_n > 0)
        first = can_open & ~earlier(can_open)
        # Dropped (later rows find it empty) when its share passes, the judge's test of p1.
        easy = first & (_share(filter_s, filter_n) >= pass_rate)
        later = active & ~first & (~untried | earlier(can_open)) & (samples > 0) & ~earlier(easy)
        measured = first | later
        # Each row's attempt number: the slot's attempts plus the earlier measured rows on it;
        # once a slot's attempts reach max_attempts it awaits judgement and takes no more.
        number = state.attempts[slot] + jnp.sum(before & measured[None, :], axis=1)
        live = measured & (number < max_attempts)
        target = jnp.where(live, slot, f)  # out of range: dropped
        first_target = jnp.where(first, slot, f)  # one first attempt per slot at most
        # The latest attempt's counts: written by the slot's last live row only.
        last_target = jnp.where(live & ~jnp.any(after & live[None, :], axis=1), slot, f)

        def put(buf, at, new):
            return buf.at[at].set(new, mode="drop")

        attempts = state.attempts.at[target].add(1, mode="drop")
        status = state.status.at[jnp.where(easy, slot, f)].set(EMPTY, mode="drop")
        exhausted = (status == ACTIVE) & (attempts >= max_attempts)
        status = jnp.where(exhausted, WAITING, status)
        return state._replace(
            seed=seed_state,
            status=status,
            filter_successes=put(state.filter_successes, first_target, filter_s),
            filter_samples=put(state.filter_samples, first_target, filter_n),
            base_successes=put(state.base_successes, first_target, base_s),
            base_samples=put(state.base_samples, first_target, base_n),
            last_successes=put(state.last_successes, last_target, successes),
            last_samples=put(state.last_samples, last_target, samples),
            attempts=attempts,
            dropped_easy=_counters.add(state.dropped_easy, jnp.sum(easy, dtype=jnp.int32)),
        )

    def judge(state: FrontierState):
        # One look per task, after its last attempt: no stopping on a lucky streak.
        judged = state.status == WAITING
        bn = state.base_samples.astype(jnp.float32)
        ln = state.last_samples.astype(jnp.float32)
        p0 = _share(state.base_successes, state.base_samples)
        p1 = _share(state.last_successes, state.last_samples)
        pooled = (state.base_successes + state.last_successes) / jnp.maximum(bn + ln, 1.0)
        se = jnp.sqrt(
            pooled * (1.0 - pooled) * (1.0 / jnp.maximum(bn, 1.0) + 1.0 / jnp.maximum(ln, 1.0))
        )
        learned = judged & (p1 - p0 > z * se) & (p1 >= pass_rate)
        stuck = judged & ~learned
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
            jnp.sum(learned, dtype=jnp.int32),
            jnp.sum(stuck, dtype=jnp.int32),
            r0,
            occupancy,
            judged,
            learned,
            jnp.where(judged, p1 - p0, 0.0),
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
            filter_successes=put(state.filter_successes, zeros),
            filter_samples=put(state.filter_samples, zeros),
            base_successes=put(state.base_successes, zeros),
            base_samples=put(state.base_samples, zeros),
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
            "judged": state.judged.astype(jnp.float32),
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
