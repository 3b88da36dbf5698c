"""A floor under any sampler: a share of uniform draws and a share of the stalest tasks."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from curriculax import _counters, _permute, _random, _shard, _topk
from curriculax._checks import check_num, check_num_tasks, unit_interval
from curriculax._types import GroupResults, TaskSampler
from curriculax.samplers import _wrapping

_SALT_TIE, _SALT_SETTLE = 5, 6


class FloorState(NamedTuple):
    """State of :func:`floor`.

    Attributes:
      inner: the wrapped sampler's state.
      last_drawn: ``i32[N]`` the call at which each task was last handed out (-1: never).
      calls: ``i32[]`` sample calls so far.
      uniform_draws: ``i32[]`` positions filled by uniform draws so far.
      stale_draws: ``i32[]`` positions filled by the stalest tasks so far.
    """

    inner: Any
    last_drawn: jax.Array
    calls: jax.Array
    uniform_draws: jax.Array
    stale_draws: jax.Array

    # Fields indexed by task: a checkpoint restored onto a reordered pool permutes these.
    PER_TASK = ("last_drawn",)


def floor(
    num_tasks: int,
    inner: TaskSampler,
    *,
    uniform_share: float = 0.1,
    staleness_share: float = 0.0,
    axis_name: str | None = None,
) -> TaskSampler:
    """Mixes any sampler with uniform draws and with the tasks left undrawn the longest.

    Of each ``sample(num)`` call, a share ``uniform_share`` of the positions is drawn
    uniformly over the pool and a share ``staleness_share`` goes to the tasks not handed out
    for the most calls (never-drawn tasks first, ties at random: PLR's staleness, arXiv
    2010.03934, as a deterministic sweep), the rest to ``inner``. Whatever ``inner`` does, a
    task is then drawn at least at rate ``uniform_share / N`` per position, and with
    ``staleness_share * num >= 1`` no task waits more than about ``N / (staleness_share *
    num)`` calls: the worst case against uniform sampling is bounded.

    The counts are ``floor(share * num)`` positions, plus one more with probability equal to
    the fractional part (so the shares hold in expectation for any ``num``, even 1). The
    inner sampler is asked for the whole-number remainder; the random extra positions replace
    its last draws (its lowest-ranked, for samplers that order their draws), so at most two
    of its draws per call go unused. An unused draw still counts as drawn to the inner
    sampler, which may have marked the task seen: under a floor, :func:`difficulty_pools`'
    warm-up can end with a few tasks never dispatched (they stay in its unscored band, drawn
    with ``unscored_weight``), and :func:`learnability`'s ``unseen_first`` passes them over
    (their prior still scores them). Uniform draws avoid the inner sampler's and each other;
    stale draws avoid every other task of the call (a pool smaller than the call repeats).

    ``observe`` passes every result to the inner sampler (including those of tasks it did not
    choose: for a sampler that learns from results, extra information).

    Cost: the inner sampler's, plus O(num log num) for the uniform share and, with a
    staleness share, two O(N) passes and two ``top_k`` (the second settles equal ages at the
    cut at random).

    Args:
      num_tasks: pool size ``N``.
      inner: the wrapped :class:`~curriculax.TaskSampler` (built for the same pool); in a
        config, a table: ``{"type": "floor", "inner": {"type": "learnability"}, ...}``.
      uniform_share: share of positions drawn uniformly, in [0, 1].
      staleness_share: share of positions given to the stalest tasks, in [0, 1]; the two
        shares add up to at most 1.
      axis_name: the mesh axis along which per-task state is split under ``shard_map`` (the
        inner sampler must be built with the same one).

    Returns:
      A :class:`~curriculax.TaskSampler`. Metrics: the inner sampler's under ``inner/``, plus
      ``uniform_draws``, ``stale_draws`` (cumulative) and ``max_staleness`` (calls since the
      stalest task was drawn).

    Example:
      >>> from curriculax.samplers import difficulty_pools
      >>> s = floor(100, difficulty_pools(100), uniform_share=0.1, staleness_share=0.1)
      >>> ids, state = s.sample(s.init(jax.random.key(0)), jax.random.key(1), 8)
    """
    n = check_num_tasks(num_tasks)
    inner = _wrapping.check_inner(inner, "floor", n)
    uniform_share = unit_interval(uniform_share, "uniform_share")
    staleness_share = unit_interval(staleness_share, "staleness_share")
    if uniform_share + staleness_share > 1.0 + 1e-9:
        raise ValueError(
            f"uniform_share ({uniform_share}) + staleness_share ({staleness_share}) must be <= 1"
        )

    def init(key: jax.Array) -> FloorState:
        return FloorState(
            inner=inner.init(key),
            last_drawn=jnp.full((n,), -1, jnp.int32),
            calls=_counters.zero(),
            uniform_draws=_counters.zero(),
            stale_draws=_counters.zero(),
        )

    def sample(state: FloorState, key: jax.Array, num: int):
        num = check_num(num)
        if num == 0:
            return jnp.zeros((0,), jnp.int32), state
        axis = _shard.bound(axis_name)
        n_local = state.last_drawn.shape[0]
        _shard.check_split(n_local, n, axis_name, "floor")
        start = _shard.offset(axis, n_local)
        pos = jnp.arange(num, dtype=jnp.int32)
        whole_u = math.floor(uniform_share * num)
        whole_s = math.floor(staleness_share * num)
        inner_num = max(num - whole_u - whole_s, 0)
        k_inner, k_own = jax.random.split(key)
        if inner_num:
            drawn, inner_state = inner.sample(state.inner, k_inner, inner_num)
            inner_ids = _wrapping.ids_of(drawn, "floor")
        else:
            inner_ids, inner_state = jnp.zeros((0,), jnp.int32), state.inner
        words = jax.random.bits(k_own, (4,), jnp.uint32)
        units = (words[:2] >> 8).astype(jnp.float32) * jnp.float32(2.0**-24)
        # Both counts rounded with one uniform: num_u <= both, each share exact in expectation
        # (rounded apart and cut to num, shares summing to about 1 lost stale positions).
        num_u = _random.stochastic_round(jnp.float32(uniform_share * num), units[0])
        both = _random.stochastic_round(
            jnp.float32((uniform_share + staleness_share) * num), units[0]
        )
        num_s = jnp.clip(both - num_u, 0, num - num_u)
        num_in = num - num_u - num_s  # <= inner_num: the extra positions replace inner draws

        inner_part = inner_ids[jnp.clip(pos, 0, max(inner_num - 1, 0))] if inner_num else pos
        kept = jnp.sort(jnp.where(pos < num_in, inner_part, -1))
        # Uniform draws: a keyed permutation of the pool read at 2 num positions, the ones
        # the inner sampler kept struck out (O(num log num)), the first num of the rest.
        wide = jnp.arange(2 * num, dtype=jnp.int32)
        cand = _permute.permute(wide % n, n, _permute.round_keys(words[2]))
        hit = kept[jnp.clip(jnp.searchsorted(kept, cand), 0, num - 1)] == cand
        order = jnp.argsort(jnp.where(hit, 2 * num + wide, wide))
        uniform_ids = cand[order[:num]]
        ids = jnp.where(pos < num_in, inner_part, uniform_ids[jnp.maximum(pos - num_in, 0)])
        stale_k = whole_s + (1 if staleness_share * num > whole_s else 0)
        if stale_k:
            local_ids = start + jnp.arange(n_local, dtype=jnp.int32)
            age = (state.calls - state.last_drawn).astype(jnp.float32)
            keys = age + 0.5 * _random.unit(words[3], local_ids, _SALT_TIE) + 0.25
            taken = jnp.where(pos < num_in + num_u, ids, -1)
            keys = keys.at[_shard.to_local(taken, start, n_local)].set(0.0, mode="drop")
            # late in a run float32 keeps few bits of the noise: equal ages tie (_topk.top_k)
            best_keys, best_ids = _topk.top_k(
                keys, min(stale_k, n), start, axis, tie=(words[3], _SALT_SETTLE)
            )
            eligible = jnp.sum(best_keys > 0, dtype=jnp.int32)
            slot = jnp.maximum(pos - num_in - num_u, 0)
            stale = jnp.where(
                eligible > 0, best_ids[slot % jnp.maximum(eligible, 1)], uniform_ids[slot]
            )
            ids = jnp.where(pos < num_in + num_u, ids, stale)
        ids = ids.astype(jnp.int32)
        new = state._replace(
            inner=inner_state,
            last_drawn=state.last_drawn.at[_shard.to_local(ids, start, n_local)].set(
                state.calls, mode="drop"
            ),
            calls=_counters.add(state.calls, 1),
            uniform_draws=_counters.add(state.uniform_draws, num_u),
            stale_draws=_counters.add(state.stale_draws, num_s),
        )
        return ids, new

    def observe(state: FloorState, results: GroupResults) -> FloorState:
        return state._replace(inner=inner.observe(state.inner, results))

    def metrics(state: FloorState) -> dict[str, jax.Array]:
        axis = _shard.bound(axis_name)
        oldest = jnp.min(_shard.gather(jnp.min(state.last_drawn), axis))
        out = _wrapping.inner_metrics(inner, state.inner)
        out["uniform_draws"] = state.uniform_draws.astype(jnp.float32)
        out["stale_draws"] = state.stale_draws.astype(jnp.float32)
        out["max_staleness"] = (state.calls - oldest).astype(jnp.float32)
        return out

    return TaskSampler(init, sample, observe, metrics, num_tasks=n, entry_task=inner.entry_task)
