"""Difficulty pools: tasks grouped into named reward bands by their latest score."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import _counters, _permute, _random, _select, _shard, _spread
from curriculax._checks import check_num, check_num_tasks, check_seed, check_unique, number
from curriculax._groups import draw_groups
from curriculax._types import GroupResults, TaskSampler

_RESERVED_NAMES = ("unseen", "unscored", "fallback", "warmup_remaining", "mean_score")


class Band(NamedTuple):
    """A reward band: tasks whose score is ``<= max_reward`` (and above the band below).

    Attributes:
      name: metric name of the band (``pool/<name>``).
      max_reward: inclusive upper bound of the band's scores.
      weight: relative probability of drawing from this band (0 disables it).
    """

    name: str
    max_reward: float
    weight: float


DEFAULT_BANDS = (
    Band("hard", 0.25, 0.2),
    Band("medium", 0.75, 1.0),
    Band("easy", 1.0, 0.2),
)


class DifficultyPoolsState(NamedTuple):
    """State of :func:`difficulty_pools`.

    Attributes:
      scores: ``f32[N]`` latest valid group-mean reward per task (0 where unscored).
      scored: ``bool[N]`` the task has a valid score.
      seen: ``bool[N]`` the task was dispatched or a result for it was observed; warm-up
        lasts while some task is unseen.
      scored_at: ``i32[N]`` the clock when the score was written (used by
        ``score_half_life``).
      fallback: ``i32[]`` sample calls that found nothing drawable and drew uniformly.
      clock: ``i32[]`` groups observed so far.
    """

    scores: jax.Array
    scored: jax.Array
    seen: jax.Array
    scored_at: jax.Array
    fallback: jax.Array
    clock: jax.Array

    # Fields indexed by task: a checkpoint restored onto a reordered pool permutes these.
    PER_TASK = ("scores", "scored", "seen", "scored_at")


def _as_bands(bands) -> tuple[Band, ...]:
    if bands is None:
        return DEFAULT_BANDS
    if isinstance(bands, Mapping):
        out = []
        for name, spec in bands.items():
            if isinstance(spec, Band):
                out.append(spec._replace(name=name))
                continue
            if not isinstance(spec, Mapping):
                raise TypeError(
                    f"band {name!r} must be a mapping with keys max_reward and weight, got {spec!r}"
                )
            unknown = sorted(set(spec) - {"max_reward", "weight"})
            if unknown:
                raise ValueError(
                    f"band {name!r}: unknown key(s) {unknown}; accepted keys are "
                    "['max_reward', 'weight']"
                )
            missing = sorted({"max_reward", "weight"} - set(spec))
            if missing:
                raise ValueError(f"band {name!r}: missing key(s) {missing}")
            out.append(Band(name, spec["max_reward"], spec["weight"]))
        return tuple(out)
    if isinstance(bands, Sequence) and not isinstance(bands, str):
        out = []
        for b in bands:
            if isinstance(b, Band):
                out.append(b)
            elif isinstance(b, Sequence) and len(b) == 3:
                out.append(Band(*b))
            else:
                raise TypeError(f"bands must hold Band(name, max_reward, weight) values, got {b!r}")
        return tuple(out)
    raise TypeError(f"bands must be a sequence of Band or a mapping name -> spec, got {bands!r}")


def _check_bands(bands: tuple[Band, ...], unscored_weight: float) -> tuple[Band, ...]:
    if not bands:
        raise ValueError("difficulty_pools needs at least one band")
    names = [b.name for b in bands]
    for b in bands:
        if not isinstance(b.name, str) or not b.name or "/" in b.name:
            raise ValueError(f"band names must be non-empty strings without '/', got {b.name!r}")
        if b.name in _RESERVED_NAMES:
            raise ValueError(f"band name {b.name!r} is reserved (it is a metric); pick another")
        for field in ("max_reward", "weight"):
            value = number(getattr(b, field), f"band {b.name!r}: {field}")
            if not math.isfinite(value):
                raise ValueError(f"band {b.name!r}: {field} must be finite, got {value!r}")
        if b.weight < 0:
            raise ValueError(f"band {b.name!r} has a negative weight {b.weight}; use 0 to disable")
    check_unique(names, "band names")
    # Compared as stored (float32): thresholds equal in float32 would make one band empty.
    check_unique([float(np.float32(b.max_reward)) for b in bands], "band thresholds (max_reward)")
    if not any(b.weight > 0 for b in bands):
        raise ValueError(
            f"no band has a positive weight ({[(b.name, b.weight) for b in bands]}); "
            "give at least one band a weight > 0"
        )
    unscored_weight = number(unscored_weight, "unscored_weight")
    if not (unscored_weight >= 0 and math.isfinite(unscored_weight)):
        raise ValueError(f"unscored_weight must be finite and >= 0, got {unscored_weight}")
    # The weights are drawn as float32: one that overflows it (or whose sum does) made
    # every probability NaN, and a positive one that rounds to 0 disabled its band.
    weights = {f"band {b.name!r}: weight": b.weight for b in bands}
    weights["unscored_weight"] = unscored_weight
    for what, w in weights.items():
        with np.errstate(over="ignore", under="ignore"):
            w32 = np.float32(w)
        if w > 0 and not (np.isfinite(w32) and w32 > 0):
            raise ValueError(
                f"{what} = {w!r} is outside float32's range, in which the weights are drawn; "
                "weights are relative: scale them all alike"
            )
    with np.errstate(over="ignore"):
        total = np.sum(np.array(list(weights.values()), np.float32))
    if not np.isfinite(total):
        raise ValueError(
            f"the weights sum past float32's range ({list(weights.values())}); weights are "
            "relative: scale them all alike"
        )
    return tuple(sorted(bands, key=lambda b: float(b.max_reward)))


def _unit(bits: jax.Array) -> jax.Array:
    """Uniform floats in [0, 1) from ``u32`` bits (24 bits of precision)."""
    return (bits >> 8).astype(jnp.float32) * jnp.float32(2.0**-24)


def band_of(scores: jax.Array, thresholds: jax.Array) -> jax.Array:
    """Band index of each score: the first band whose inclusive ``max_reward`` holds it.

    Scores above every threshold fall in the last band (catch-all). ``f32[N] -> i32[N]``.
    """
    above = sum((scores > thresholds[i]).astype(jnp.int32) for i in range(thresholds.shape[0]))
    return jnp.minimum(above, thresholds.shape[0] - 1)


def _runs(ids: jax.Array, use: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The used rows sorted by id (unused rows first): ``(order i32[G], new bool[G], last
    bool[G])``: ``new`` marks, in sorted order, the rows whose id differs from the previous
    row's; ``last`` is :func:`last_occurrence`. O(G log G)."""
    keyed = jnp.where(use, ids.astype(jnp.int32), jnp.iinfo(jnp.int32).min)
    order = jnp.argsort(keyed, stable=True)
    sorted_ids = keyed[order]
    change = sorted_ids[1:] != sorted_ids[:-1]
    new = jnp.concatenate([jnp.ones((1,), bool), change])
    last_sorted = jnp.concatenate([change, jnp.ones((1,), bool)])
    return order, new, jnp.zeros(new.shape, bool).at[order].set(last_sorted) & use


def last_occurrence(ids: jax.Array, use: jax.Array) -> jax.Array:
    """``bool[G]``: ``use[g]`` and no later used row has the same id. O(G log G).

    Lets a batch holding one task twice apply only the latest result, deterministically.
    """
    return _runs(ids, use)[2]


def sum_by_id(ids: jax.Array, use: jax.Array, values: jax.Array) -> tuple[jax.Array, jax.Array]:
    """For each used row, the sum of ``values`` over the used rows with its id, and which used
    row is the last with its id (:func:`last_occurrence`, from the same sort). O(G log G).

    Lets a batch holding one task several times pool the task's groups.

    Args:
      ids: ``i32[G]``.
      use: ``bool[G]``.
      values: ``f32[G, ...]``.

    Returns:
      ``(f32[G, ...] sums, zero on unused rows; bool[G] last)``.
    """
    order, new, last = _runs(ids, use)
    g = new.shape[0]
    segment = jnp.cumsum(new.astype(jnp.int32)) - 1
    mask = use.reshape((g,) + (1,) * (values.ndim - 1))
    kept = jnp.where(mask, values, 0)
    sums = jax.ops.segment_sum(kept[order], segment, num_segments=g)
    return jnp.where(mask, jnp.zeros_like(kept).at[order].set(sums[segment]), 0), last


def difficulty_pools(
    num_tasks: int,
    bands: Sequence[Band] | Mapping[str, Mapping[str, float]] | None = None,
    *,
    unscored_weight: float = 0.2,
    seed: int = 0,
    score_half_life: float | None = None,
    axis_name: str | None = None,
) -> TaskSampler:
    """Samples tasks by reward band, after a warm-up pass that dispatches every task once.

    A task's score is its latest valid group-mean reward (the mean over the group's valid
    rollouts; a group with none leaves the score unchanged). Until every task has been
    seen, ``sample`` hands out unseen tasks only (a ``seed``-keyed pseudo-random choice among
    them), so every task is dispatched once before any task twice; a task whose group failed
    still counts as seen, so failures cannot hold the sampler in warm-up, and so does a task
    whose result was observed without being dispatched here. Warm-up depends on ``seen``
    alone, a per-task field: restored onto a reordered pool it follows the tasks' keys and
    loses none. After warm-up each draw picks a band with probability proportional to its
    weight among the bands that hold a task, then a task uniformly inside it. Tasks seen but
    never validly scored form the ``unscored`` group with weight ``unscored_weight``.

    One ``sample`` call returns distinct tasks when at least ``num`` are drawable; when fewer
    are, each drawable task appears ``num // drawable`` or ``num // drawable + 1`` times. If
    nothing is drawable (every task sits in a zero-weight band) the call draws uniformly over
    the pool and the ``fallback`` metric counts it. Cost: O(N + num log N) per call.

    Scores are one-way by default (the seed's semantics): a task that failed one group under
    an early policy stays in the ``hard`` band until it is drawn again, however much the
    policy improves, and a hard band of weight 0.2 spread over most of the pool redraws each
    task rarely. ``score_half_life`` lets scores go stale: at each draw a score written
    ``age`` observed groups ago counts as unscored with probability ``1 - 2 ** (-age /
    (score_half_life * N))``, so stale tasks gather in the small ``unscored`` group and are
    re-measured. Use it when the policy changes during training and the pool is large
    against the groups per step (most RL runs); its gain is bounded by ``unscored_weight``
    (measured on the simulated pool: docs/studies.md). Leave it off for a pool the sampler
    revisits every few steps anyway, or when band membership must be a pure function of the
    latest results.

    The warm-up pass takes ``N / num`` calls of draws that are uniform over the unseen
    tasks: on a large pool (10,000 tasks at 16 per call: 625 calls) the bands act only
    after it. The ``warmup_remaining`` metric counts it down.

    When to use the sampler at all: it keeps the seed's banded semantics (prime-rl's
    difficulty pools) for runs that need them. With the zero-advantage gate (the old
    default) it did not beat uniform on the balanced pool of the GRPO studies (see
    docs/studies.md); for a pool with difficulty levels or families,
    :func:`category_bandit` is the built-in the studies recommend, and for a pool where
    every level is learnable, uniform.

    ``observe`` trusts its input, as every sampler's does (:class:`curriculax.TaskSampler`).

    Args:
      num_tasks: pool size ``N``.
      bands: :class:`Band` values, or a mapping ``name -> {"max_reward": ..., "weight": ...}``.
        Ordered by ``max_reward`` (inclusive upper bound); a score above every threshold falls
        in the last band. Default: hard <= 0.25 (weight 0.2), medium <= 0.75 (1.0),
        easy <= 1.0 (0.2).
      unscored_weight: weight of the tasks seen but never validly scored.
      seed: seed of the warm-up choice among unseen tasks, an int in ``[0, 2**32)``.
      score_half_life: passes over the pool (``N`` observed groups) after which a score is
        as likely as not to count as unscored at a draw; ``None`` (the default): scores never
        go stale.
      axis_name: for pools too large to replicate: the mesh axis along which the per-task
        state is split when ``sample``/``observe``/``metrics`` run under ``shard_map`` (the
        engine does this for an ``Env(..., shard_tasks=True)``). Each device then works on
        its ``N / devices`` tasks; the draws need two small collectives (per-device band
        counts, and the chosen ids) and are identical to the unsplit sampler's. Traced where
        the axis is not bound (one device, plain ``jit``) the sampler runs unsplit.

    Returns:
      A :class:`~curriculax.TaskSampler`. Metrics: ``pool/unseen``, ``pool/unscored``,
      ``pool/<band>`` (task counts), ``fallback``, ``warmup_remaining`` (tasks the warm-up
      has yet to dispatch: the unseen ones), ``mean_score``, and with ``score_half_life``
      ``stale_scores``.

    Raises:
      ValueError: negative weights or ones outside float32's range, duplicate thresholds or
        names, no band with a positive weight, or a seed outside ``[0, 2**32)``.

    Example:
      >>> s = difficulty_pools(100)
      >>> ids, state = s.sample(s.init(jax.random.key(0)), jax.random.key(1), 8)
      >>> ids.shape
      (8,)
    """
    n = check_num_tasks(num_tasks)
    bands = _check_bands(_as_bands(bands), unscored_weight)
    num_bands = len(bands)
    seed_word = _permute.seed_bits(check_seed(seed, bits=32))
    unscored_label = num_bands
    unseen_label = num_bands + 1
    thresholds = np.array([b.max_reward for b in bands], np.float32)
    weights = np.array([b.weight for b in bands] + [unscored_weight], np.float32)
    if score_half_life is not None:
        try:
            score_half_life = number(score_half_life, "score_half_life")
        except TypeError:
            raise TypeError(
                f"score_half_life must be a number or None, got {score_half_life!r}"
            ) from None
        if not score_half_life > 0:
            raise ValueError(
                f"score_half_life must be > 0 pool passes (or None), got {score_half_life}"
            )
    decays = score_half_life is not None and math.isfinite(score_half_life)

    def labels_of(scores, scored, seen):
        band = band_of(scores, jnp.asarray(thresholds))
        labels = jnp.where(scored, band, unscored_label)
        return jnp.where(seen, labels, -1).astype(jnp.int32)

    def fresh_share(state: DifficultyPoolsState) -> jax.Array:
        """``f32[n_local]``: the chance each score still counts, ``2 ** (-age / half-life)``."""
        age = (state.clock - state.scored_at).astype(jnp.float32)
        return jnp.exp2(-age / jnp.float32(score_half_life * n))

    def init(key: jax.Array) -> DifficultyPoolsState:
        del key
        return DifficultyPoolsState(
            scores=jnp.zeros((n,), jnp.float32),
            scored=jnp.zeros((n,), bool),
            seen=jnp.zeros((n,), bool),
            scored_at=jnp.zeros((n,), jnp.int32),
            fallback=_counters.zero(),
            clock=_counters.zero(),
        )

    def sample(state: DifficultyPoolsState, key: jax.Array, num: int):
        num = check_num(num)
        if num == 0:
            return jnp.zeros((0,), jnp.int32), state
        pos = jnp.arange(num, dtype=jnp.int32)
        axis = _shard.bound(axis_name)
        n_local = state.scores.shape[0]
        _shard.check_split(n_local, n, axis_name, "difficulty_pools")
        start = _shard.offset(axis, n_local)
        # One PRNG call per sample: threefry is slow to compile on CPU, so derive everything
        # from one block of bits.
        extra = 1 if decays else 0  # the default's draws stay exactly the seed's
        bits = jax.random.bits(key, ((num_bands + 2) * num + 2 + extra,), jnp.uint32)
        uniforms = _unit(bits[: (num_bands + 2) * num]).reshape(num_bands + 2, num)
        pick_word, fallback_word = bits[(num_bands + 2) * num], bits[(num_bands + 2) * num + 1]

        # Labels: bands, unscored, and unseen (the warm-up's group), one index over the pool.
        scored = state.scored
        if decays:
            local_ids = start + jnp.arange(n_local, dtype=jnp.int32)
            stale = 1.0 - fresh_share(state)
            scored = scored & (_random.unit(bits[-1], local_ids, 0) >= stale)
        labels = labels_of(state.scores, scored, state.seen)
        labels = jnp.where(state.seen, labels, unseen_label)
        index = _select.build_index(labels, num_bands + 2)
        per_device = _shard.gather(index.counts, axis)  # [D, C]: a small collective
        counts = jnp.sum(per_device, axis=0)

        # Warm-up: distinct unseen tasks, the ranks among the unseen (in pool order) chosen by
        # a keyed permutation of [0, unseen). Keyed by the seed and the unseen count only, so
        # it is a function of `seen`: no counter that a reordered pool would leave behind.
        unseen = counts[unseen_label]
        num_warm = jnp.minimum(unseen, num).astype(jnp.int32)
        warm_rank = _permute.permute(pos, unseen, _permute.round_keys(seed_word, unseen))

        # Banded draws among the seen tasks. They are used only when warm-up ends inside this
        # call, and then it takes every unseen task: the two never overlap.
        groups, ranks, drawable = draw_groups(uniforms, weights, counts[:unseen_label])
        band_rank = _permute.permute(ranks, counts[groups], _permute.round_keys(pick_word, groups))

        # Position p of the call: warm-up first, then banded draws, cycling when too few.
        distinct = num_warm + drawable
        source = jnp.where(distinct < num, pos % jnp.maximum(distinct, 1), pos)
        banded = jnp.maximum(source - num_warm, 0)
        warm = source < num_warm
        group = jnp.where(warm, unseen_label, groups[banded])
        member = jnp.where(warm, warm_rank[jnp.minimum(source, num - 1)], band_rank[banded])
        # The member-th task of its group in pool order: find the device holding it, then the
        # task inside that device's slice; every draw has exactly one owner.
        ends = jnp.cumsum(per_device, axis=0)
        owner = jnp.sum(ends[:, group] <= member[None, :], axis=0, dtype=jnp.int32)
        before = (ends - per_device)[jnp.minimum(owner, per_device.shape[0] - 1), group]
        mine = owner == _shard.index(axis)
        local = _select.select(index, group, jnp.where(mine, member - before, 0))
        ids = _shard.psum(jnp.where(mine, start + local, 0), axis)

        nothing = distinct == 0
        uniform = _permute.permute(pos % n, n, _permute.round_keys(fallback_word))
        ids = jnp.where(nothing, uniform, ids).astype(jnp.int32)
        new = state._replace(
            seen=state.seen.at[_shard.to_local(ids, start, n_local)].set(True, mode="drop"),
            fallback=_counters.add(state.fallback, nothing.astype(jnp.int32)),
        )
        return ids, new

    def observe(state: DifficultyPoolsState, results: GroupResults) -> DifficultyPoolsState:
        n_local = state.scores.shape[0]
        _shard.check_split(n_local, n, axis_name, "difficulty_pools")
        start = _shard.offset(_shard.bound(axis_name), n_local)
        ids = results.task_ids.astype(jnp.int32)
        in_pool = (ids >= 0) & (ids < n)
        valid = results.valid.astype(bool)
        count = jnp.sum(valid, axis=1)
        total = jnp.sum(jnp.where(valid, results.rewards, 0.0), axis=1)
        mean = total / jnp.maximum(count, 1).astype(jnp.float32)
        # A group whose valid rewards are all equal scores that reward exactly: a float32 mean
        # of eight 0.2s is 0.20000002, past a band bound of 0.2 that the task meets.
        low, high = _spread.valid_range(results.rewards, valid, axis=1)
        mean = jnp.where(high == low, low, mean)
        winner = last_occurrence(ids, (count > 0) & in_pool)
        score_slot = _shard.to_local(jnp.where(winner, ids, -1), start, n_local)
        seen_slot = _shard.to_local(jnp.where(in_pool, ids, -1), start, n_local)
        clock = _counters.add(state.clock, jnp.sum(in_pool, dtype=jnp.int32))
        return state._replace(
            scores=state.scores.at[score_slot].set(mean.astype(jnp.float32), mode="drop"),
            scored=state.scored.at[score_slot].set(True, mode="drop"),
            seen=state.seen.at[seen_slot].set(True, mode="drop"),
            scored_at=state.scored_at.at[score_slot].set(clock, mode="drop"),
            clock=clock,
        )

    def metrics(state: DifficultyPoolsState) -> dict[str, jax.Array]:
        labels = labels_of(state.scores, state.scored, state.seen)
        counts = jnp.sum(
            labels[:, None] == jnp.arange(num_bands + 1, dtype=jnp.int32), axis=0, dtype=jnp.int32
        )
        axis = _shard.bound(axis_name)
        counts = _shard.psum(counts, axis)
        seen = _shard.psum(jnp.sum(state.seen, dtype=jnp.int32), axis)
        scored = _shard.psum(jnp.sum(state.scored, dtype=jnp.int32), axis)
        score_sum = _shard.psum(jnp.sum(jnp.where(state.scored, state.scores, 0.0)), axis)
        out = {
            "pool/unseen": (n - seen).astype(jnp.float32),
            "pool/unscored": counts[num_bands].astype(jnp.float32),
        }
        for i, b in enumerate(bands):
            out[f"pool/{b.name}"] = counts[i].astype(jnp.float32)
        out["fallback"] = state.fallback.astype(jnp.float32)
        out["warmup_remaining"] = (n - seen).astype(jnp.float32)
        out["mean_score"] = score_sum / jnp.maximum(scored, 1).astype(jnp.float32)
        if decays:
            stale = jnp.sum(jnp.where(state.scored, 1.0 - fresh_share(state), 0.0))
            out["stale_scores"] = _shard.psum(stale, axis)  # expected unscored-by-age count
        return out

    return TaskSampler(init, sample, observe, metrics, num_tasks=n)
