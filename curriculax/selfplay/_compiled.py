"""The self-play round loop as one compiled program, ``vmap``-ped over seeds.

When a challenger's ``generate``, ``validate`` and ``propose`` are pure JAX
(:class:`PureChallenger`), a whole run (every round's challenge, solve, judge and tune, and
the held-out evaluation after each round) is a ``lax.scan`` over rounds inside a function of
the seed's key, so several seeds run as one ``vmap``-ped program. It follows
:func:`~curriculax.selfplay.curriculum_evolve` step for step (the same keys, the same
frontier, the same engine), so the same seed gives the same result on both paths:
:func:`host_challenger` wraps a :class:`PureChallenger` for the host path to check it.
Host callables keep the host path (a live run can call a model there).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax._curriculum import curriculum
from curriculax.engine._engine import Engine, EngineConfig
from curriculax.engine._env import Env, _keys_from_data, check_unique_keys, content_keys
from curriculax.selfplay._challenger import Challenger
from curriculax.selfplay._evolve import _build_sampler
from curriculax.selfplay._frontier import frontier_sampler


class Judged(NamedTuple):
    """A round's verdicts as ``propose`` of a :class:`PureChallenger` gets them: the judged
    tasks first, in slot order, then padding (``F`` = frontier capacity).

    Attributes:
      tasks: leaves ``[F, ...]`` the judged tasks' payloads (zeros past ``count``).
      gain: ``f32[F]`` (latest - baseline) pass rate (0 past ``count``).
      learned: ``bool[F]``.
      mask: ``bool[F]`` the first ``count`` entries.
      count: ``i32[]`` tasks judged this round.
      dropped_easy: ``i32[]`` tasks dropped as easy this round.
    """

    tasks: Any
    gain: jax.Array
    learned: jax.Array
    mask: jax.Array
    count: jax.Array
    dropped_easy: jax.Array


class PureChallenger(NamedTuple):
    """A challenger whose callables are pure JAX (traceable, fixed shapes).

    Attributes:
      generate: ``(spec, keys[P]) -> payloads`` (leaves ``[P, ...]``, the pool's layout).
      validate: ``(payloads) -> (tasks, valid bool[P])``.
      propose: ``(spec, Judged) -> spec`` (the same pytree structure and shapes).
    """

    generate: Callable[..., Any]
    validate: Callable[..., Any]
    propose: Callable[..., Any]


def row_keys(tasks: Any) -> jax.Array:
    """``u32[P]``: the tasks' own ``key`` field, else :func:`~curriculax.engine.content_keys`
    computed in JAX (the same FNV-1a over each row's little-endian bytes)."""
    own = tasks.get("key") if isinstance(tasks, dict) else getattr(tasks, "key", None)
    if own is not None and not callable(own):
        return jnp.asarray(own).astype(jnp.uint32)
    leaves = jax.tree.leaves(tasks)
    n = leaves[0].shape[0]
    prime = jnp.uint32(0x01000193)
    h = jnp.full((n,), 0x811C9DC5, jnp.uint32)
    for leaf in leaves:
        leaf = jnp.asarray(leaf)
        tag = f"{np.dtype(leaf.dtype).newbyteorder('<').str}{leaf.shape[1:]}".encode()
        for byte in tag:
            h = (h ^ jnp.uint32(byte)) * prime
        rows = jax.lax.bitcast_convert_type(leaf.reshape(n, -1), jnp.uint8).reshape(n, -1)
        for j in range(rows.shape[1]):  # bytes per task: static, vectorized over tasks
            h = (h ^ rows[:, j].astype(jnp.uint32)) * prime
    return h


def _compact(mask: jax.Array, tree: Any) -> Any:
    """Moves the ``mask`` rows to the front in order; zeros after them."""
    p = mask.shape[0]
    target = jnp.where(mask, jnp.cumsum(mask) - 1, p)
    return jax.tree.map(
        lambda x: jnp.zeros_like(x).at[target].set(x, mode="drop"),
        tree,
    )


def _challenge(challenger: PureChallenger, spec, key, count: int, forbidden: jax.Array):
    """What :func:`~curriculax.selfplay.run_challenge` does for a vectorized challenger."""
    subkeys = jax.random.split(key, count)
    tasks, ok = challenger.validate(challenger.generate(spec, subkeys))
    ok = jnp.asarray(ok, bool)
    keys = row_keys(tasks)
    collide = ok & jnp.isin(keys, forbidden)
    cand = ok & ~collide
    idx = jnp.arange(count)
    earlier = (keys[:, None] == keys[None, :]) & cand[None, :] & (idx[None, :] < idx[:, None])
    accept = cand & ~jnp.any(earlier, axis=1)
    seeds = jax.random.key_data(subkeys).reshape(count, -1)[:, -1].astype(jnp.uint32)
    tasks, keys, seeds = _compact(accept, (tasks, keys, seeds))
    n = jnp.sum(accept, dtype=jnp.int32)
    return tasks, idx < n, keys, seeds, jnp.sum(~ok, dtype=jnp.int32), n


def host_challenger(pure: PureChallenger, seed_tasks: Any, capacity: int) -> Challenger:
    """The host path's :class:`Challenger` for ``pure`` (vectorized ``generate``/``validate``;
    ``propose`` gets the report's verdicts as a :class:`Judged` of ``capacity`` rows, the
    frontier capacity), so a run of :func:`~curriculax.selfplay.curriculum_evolve` with it is
    the compiled run's twin.

    Args:
      pure: the :class:`PureChallenger`.
      seed_tasks: the seed pool (its layout pads the verdicts' payloads).
      capacity: the frontier capacity (``4 * generated_per_round`` by default).
    """
    propose = jax.jit(pure.propose)
    layout = jax.tree.map(lambda x: (np.shape(x)[1:], np.asarray(x).dtype), seed_tasks)
    is_leaf = lambda x: isinstance(x, tuple) and len(x) == 2 and isinstance(x[1], np.dtype)  # noqa: E731

    def host_propose(spec, report):
        verdicts = report.judged
        m = len(verdicts)
        pad = jax.tree.map(lambda s: np.zeros((capacity, *s[0]), s[1]), layout, is_leaf=is_leaf)
        if m:
            tasks = jax.tree.map(lambda *xs: np.asarray(xs), *[v.task for v in verdicts])
            pad = jax.tree.map(lambda z, x: np.concatenate([x.astype(z.dtype), z[m:]]), pad, tasks)
        gain = np.zeros(capacity, np.float32)
        learned = np.zeros(capacity, bool)
        gain[:m] = [v.gain for v in verdicts]
        learned[:m] = [v.learned for v in verdicts]
        judged = Judged(
            pad,
            jnp.asarray(gain),
            jnp.asarray(learned),
            jnp.asarray(np.arange(capacity) < m),
            jnp.int32(m),
            jnp.int32(report.dropped_easy),
        )
        return propose(spec, judged)

    return Challenger(pure.generate, pure.validate, host_propose, vectorized=True)


class CompiledResult(NamedTuple):
    """What :func:`compiled_evolve` returns, one row per seed (``S`` seeds, ``R`` rounds).

    Attributes:
      held_out: ``f32[S, R]`` mean held-out score after each round.
      generated, invalid, learned, stuck, dropped_easy: ``i32[S, R]`` per round.
      r0: ``f32[S, R]``.
      rollouts: ``i32[S, R]`` solver rollouts after each round.
      spec: the spec each round generated with, leaves ``[S, R, ...]``.
      state: the final engine states, leaves ``[S, ...]``.
    """

    held_out: jax.Array
    generated: jax.Array
    invalid: jax.Array
    learned: jax.Array
    stuck: jax.Array
    dropped_easy: jax.Array
    r0: jax.Array
    rollouts: jax.Array
    spec: Any
    state: Any


def compiled_evolve(
    solver,
    seed_tasks: Any,
    *,
    challenger: PureChallenger,
    spec: Any,
    held_out_tasks: Any,
    keys: jax.Array,
    rounds: int = 5,
    steps_per_round: int = 20,
    generated_per_round: int = 32,
    frontier_share: float = 0.25,
    frontier_capacity: int | None = None,
    max_attempts: int = 4,
    sampler: Any = None,
    group_size: int = 8,
    batch_groups: int = 16,
    success_threshold: float = 1.0,
    pass_rate: float = 0.5,
    z: float = 2.0,
) -> CompiledResult:
    """:func:`~curriculax.selfplay.curriculum_evolve` with a :class:`PureChallenger`, every
    seed of ``keys`` (``key[S]``) in one compiled, ``vmap``-ped program.

    The same run as the host path with :func:`host_challenger` for the same key (an explicit
    ``held_out_tasks``; no gates; one generation batch per update, ``groups_per_generation``
    equal to ``batch_groups``, so a round is ``steps_per_round`` engine steps).
    """
    held_keys = _keys_from_data(held_out_tasks)
    held_keys = np.asarray(
        content_keys(held_out_tasks) if held_keys is None else held_keys, np.uint32
    )
    keys_np = _keys_from_data(seed_tasks)
    keys_np = content_keys(seed_tasks) if keys_np is None else np.asarray(keys_np, np.uint32)
    check_unique_keys(keys_np, "seed_tasks")
    if np.intersect1d(keys_np, held_keys).size:
        raise ValueError("held_out_tasks share keys with seed_tasks; they must be disjoint")
    n = len(keys_np)
    layout = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), seed_tasks)
    capacity = frontier_capacity or 4 * generated_per_round
    frontier = frontier_sampler(
        _build_sampler(sampler, n),
        n,
        layout,
        capacity=capacity,
        frontier_share=frontier_share,
        max_attempts=max_attempts,
        success_threshold=success_threshold,
        pass_rate=pass_rate,
        z=z,
    )
    env = Env("train", seed_tasks, curriculum(frontier.sampler), group_size, keys=keys_np)
    engine = Engine(solver, [env], EngineConfig(batch_groups=batch_groups))
    forbidden = jnp.asarray(held_keys)
    held = jax.tree.map(jnp.asarray, held_out_tasks)

    def set_frontier(state, fstate):
        cs = state.curricula["train"]
        return state._replace(curricula={"train": cs._replace(sampler=fstate)})

    def one_seed(key):
        k_init, k_rounds, k_eval = jax.random.split(key, 3)
        state = engine.init(k_init)

        def round_(carry, r):
            state, spec = carry
            fstate = state.curricula["train"].sampler
            easy_before = fstate.dropped_easy
            tasks, valid, tkeys, seeds, invalid, generated = _challenge(
                challenger, spec, jax.random.fold_in(k_rounds, r), generated_per_round, forbidden
            )
            fstate = frontier.insert(fstate, tasks, valid, tkeys, r, seeds, invalid)
            state = set_frontier(state, fstate)
            state = jax.lax.fori_loop(0, steps_per_round, lambda _, s: engine.step(s)[0], state)
            fstate, rep = frontier.judge(state.curricula["train"].sampler)
            state = set_frontier(state, fstate)
            easy = fstate.dropped_easy - easy_before
            judged = Judged(
                _compact(rep.judged_mask, fstate.tasks),
                _compact(rep.judged_mask, rep.gain),
                _compact(rep.judged_mask, rep.learned_mask),
                jnp.arange(capacity) < jnp.sum(rep.judged_mask),
                jnp.sum(rep.judged_mask, dtype=jnp.int32),
                easy,
            )
            score = jnp.mean(solver.evaluate(state.solver, held, jax.random.fold_in(k_eval, r)))
            out = dict(
                held_out=score,
                generated=generated,
                invalid=invalid,
                learned=rep.learned,
                stuck=rep.stuck,
                dropped_easy=easy,
                r0=rep.r0,
                rollouts=state.counters.rollouts,
                spec=spec,
            )
            return (state, challenger.propose(spec, judged)), out

        (state, _), out = jax.lax.scan(round_, (state, spec), jnp.arange(rounds))
        return out, state

    out, states = jax.jit(jax.vmap(one_seed))(keys)
    return CompiledResult(**out, state=states)
