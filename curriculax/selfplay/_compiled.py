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

import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax._checks import int_at_least
from curriculax._curriculum import curriculum
from curriculax.engine._engine import Engine, EngineConfig
from curriculax.engine._env import Env, check_unique_keys, task_keys
from curriculax.selfplay._challenger import Challenger, InvalidTask, conform_pool
from curriculax.selfplay._evolve import _build_sampler, _num_rows, check_round_counts
from curriculax.selfplay._frontier import EMPTY, check_frontier_draws, frontier_sampler


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
      generated: ``i32[]`` valid tasks generated this round (``RoundReport.generated``).
      r0: ``f32[]`` the round's mean gain (``RoundReport.r0``), so a level rule such as
        :func:`~curriculax.selfplay.level_direction` reads what the host path's report holds.
    """

    tasks: Any
    gain: jax.Array
    learned: jax.Array
    mask: jax.Array
    count: jax.Array
    dropped_easy: jax.Array
    generated: jax.Array
    r0: jax.Array


class PureChallenger(NamedTuple):
    """A challenger whose callables are pure JAX (traceable, fixed shapes).

    Attributes:
      generate: ``(spec, keys[P]) -> payloads`` (leaves ``[P, ...]``, the pool's layout).
      validate: ``(payloads) -> (tasks, valid bool[P])``; the tasks are cast to the pool's
        dtypes before they are keyed, as the host path casts each payload (a layout that does
        not cast ``same_kind`` makes every payload invalid, with a warning).
      propose: ``(spec, Judged) -> spec`` (the same pytree structure and shapes).
      retry: draw like a one-task-per-key host challenger (``Challenger(vectorized=False)``,
        e.g. the study's reversal challengers): up to ``4 * count`` tries with keys
        ``fold_in(key, i)``, where a payload rejected as invalid, a held-out collision, a
        repeat of this round or of a task still on the frontier is replaced by the next try
        (and counted only if tried before ``count`` tasks were accepted). ``False``: one try
        per slot (``split(key, count)``), as a vectorized host challenger.
    """

    generate: Callable[..., Any]
    validate: Callable[..., Any]
    propose: Callable[..., Any]
    retry: bool = False


def row_keys(tasks: Any) -> jax.Array:
    """``u32[P]``: the tasks' own ``key`` field, else the 32-bit
    :func:`~curriculax.engine.content_keys` (``bits=32``, self-play's keys) computed in JAX
    (the same FNV-1a over each row's little-endian bytes)."""
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
        if leaf.dtype == jnp.bool_:  # one byte, 0 or 1, as numpy stores it (no bool bitcast)
            leaf = leaf.astype(jnp.uint8)
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


def _to_layout(tasks: Any, ok: Any, layout: Any, tries: int) -> tuple[Any, jax.Array]:
    """``validate``'s ``(tasks, ok)`` in ``layout`` (the pool's, in JAX's dtypes: the layout
    :func:`compiled_evolve` keys its pools in), as the host path's ``_conform`` makes each
    payload before keying it: leaves cast to the layout's dtypes (a task is keyed as the
    frontier stores it, so an ``i32`` copy of an ``f32`` held-out task is recognised).
    What ``_conform`` rejects as invalid (another structure, a row shape or a dtype that does
    not cast ``same_kind``) is static here, so every payload is invalid: counted so, with a
    warning at trace time. A wrong leading axis or ``ok`` shape raises (a bug, not a task)."""
    ok = jnp.asarray(ok)
    if ok.shape != (tries,):
        raise ValueError(
            f"the pure challenger's validate returned valid of shape {ok.shape}; expected "
            f"({tries},), one flag per payload"
        )
    ok = ok.astype(bool)
    leaves, tree = jax.tree.flatten(tasks)
    want_leaves, want_tree = jax.tree.flatten(layout)
    problem = None
    if tree != want_tree:
        problem = f"task structure {tree} differs from the pool's {want_tree}"
    else:
        out = []
        for leaf, want in zip(leaves, want_leaves):
            leaf = jnp.asarray(leaf)
            dtype = want.dtype
            if leaf.ndim < 1 or leaf.shape[0] != tries:
                raise ValueError(
                    f"the pure challenger's validate returned a task leaf of shape "
                    f"{leaf.shape}; expected a leading axis of {tries}, one row per payload"
                )
            if leaf.shape[1:] != tuple(want.shape):
                problem = f"task leaf of shape {leaf.shape[1:]}, expected {tuple(want.shape)}"
                break
            if not np.can_cast(leaf.dtype, dtype, casting="same_kind"):
                problem = f"task leaf of dtype {leaf.dtype}, expected {dtype}"
                break
            out.append(leaf.astype(dtype))  # a no-op where the dtypes already match
        if problem is None:
            return jax.tree.unflatten(want_tree, out), ok
    warnings.warn(
        f"the pure challenger's validate returns tasks outside the pool's layout ({problem}): "
        "every payload is counted invalid, as the host path counts each one",
        stacklevel=2,
    )
    zeros = jax.tree.map(lambda s: jnp.zeros((tries, *s.shape), s.dtype), layout)
    return zeros, jnp.zeros((tries,), bool)


def _challenge(
    challenger: PureChallenger,
    spec,
    key,
    count: int,
    layout: Any,
    forbidden: jax.Array,
    front_keys: jax.Array,
    front_live: jax.Array,
):
    """What :func:`~curriculax.selfplay.run_challenge` does for a pure challenger: ``(tasks,
    valid, keys, gen_seeds, invalid, collisions, generated)``, the accepted tasks first.
    ``layout``: one task's layout (the pool's row shapes, JAX's dtypes for the pool's: the
    layout the held-out keys were hashed in; payloads are cast to it before they are keyed).
    ``front_keys: u32[F]`` and ``front_live: bool[F]`` are the frontier's slots (a task whose
    key a live slot holds is rejected as a repeat, as ``run_challenge``'s ``on_frontier``)."""
    tries = 4 * count if challenger.retry else count
    if challenger.retry:  # the host loop's keys: fold_in(key, i) for try i
        subkeys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(tries))
    else:
        subkeys = jax.random.split(key, count)
    tasks, ok = challenger.validate(challenger.generate(spec, subkeys))
    tasks, ok = _to_layout(tasks, ok, layout, tries)
    keys = row_keys(tasks)
    collide = ok & jnp.isin(keys, forbidden)
    on_front = jnp.any((keys[:, None] == front_keys[None, :]) & front_live[None, :], axis=1)
    cand = ok & ~collide & ~on_front
    idx = jnp.arange(tries)
    earlier = (keys[:, None] == keys[None, :]) & cand[None, :] & (idx[None, :] < idx[:, None])
    first = cand & ~jnp.any(earlier, axis=1)
    # The host loop stops once `count` tasks are accepted: tries after that are not made.
    before = jnp.cumsum(first) - first
    tried = before < count
    accept = first & tried
    seeds = jax.random.key_data(subkeys).reshape(tries, -1)[:, -1].astype(jnp.uint32)
    tasks, keys, seeds = _compact(accept, (tasks, keys, seeds))
    tasks, keys, seeds = jax.tree.map(lambda x: x[:count], (tasks, keys, seeds))
    n = jnp.sum(accept, dtype=jnp.int32)
    invalid = jnp.sum(~ok & tried, dtype=jnp.int32)
    collisions = jnp.sum(collide & tried, dtype=jnp.int32)
    return tasks, jnp.arange(count) < n, keys, seeds, invalid, collisions, n


def host_challenger(pure: PureChallenger, seed_tasks: Any, capacity: int) -> Challenger:
    """The host path's :class:`Challenger` for ``pure`` (``propose`` gets the report's verdicts
    as a :class:`Judged` of ``capacity`` rows, the frontier capacity), so a run of
    :func:`~curriculax.selfplay.curriculum_evolve` with it is the compiled run's twin.
    Vectorized ``generate``/``validate``; with ``pure.retry``, one task per key (``generate``
    on a batch of one key, ``validate`` raising :class:`InvalidTask`), as the host's one-task
    challengers draw.

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
        if m > capacity:  # a frontier larger than the Judged rows the compiled path passes
            raise ValueError(
                f"host_challenger(capacity={capacity}) got {m} judged tasks in one round: give "
                "it the run's frontier_capacity (4 * generated_per_round by default)"
            )
        pad = jax.tree.map(lambda s: np.zeros((capacity, *s[0]), s[1]), layout, is_leaf=is_leaf)
        if m:
            # The layout as the prefix tree: a verdict's leaf of a vector row is a Python list.
            tasks = jax.tree.map(
                lambda s, *xs: np.asarray(xs).astype(s[1]),
                layout,
                *[v.task for v in verdicts],
                is_leaf=is_leaf,
            )
            pad = jax.tree.map(lambda z, x: np.concatenate([x, z[m:]]), pad, tasks)
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
            jnp.int32(report.generated),
            jnp.float32(report.r0),
        )
        return propose(spec, judged)

    if not pure.retry:
        return Challenger(pure.generate, pure.validate, host_propose, vectorized=True)
    generate_one = jax.jit(lambda spec, key: pure.generate(spec, key[None]))
    validate_one = jax.jit(pure.validate)

    def generate(spec, key):
        return jax.tree.map(lambda x: x[0], jax.device_get(generate_one(spec, key)))

    def validate(payload):
        tasks, ok = jax.device_get(
            validate_one(jax.tree.map(lambda x: np.asarray(x)[None], payload))
        )
        if not bool(np.asarray(ok)[0]):
            raise InvalidTask("rejected by the pure challenger's validate")
        return jax.tree.map(lambda x: x[0], tasks)

    return Challenger(generate, validate, host_propose)


class CompiledResult(NamedTuple):
    """What :func:`compiled_evolve` returns, one row per seed (``S`` seeds, ``R`` rounds).

    Attributes:
      held_out: ``f32[S, R]`` mean held-out score after each round.
      generated, invalid, collisions, learned, stuck, dropped_easy: ``i32[S, R]`` per round
        (``collisions``: generated tasks rejected because they equal a held-out task).
      r0: ``f32[S, R]``.
      rollouts: ``i32[S, R]`` solver rollouts after each round.
      updates: ``i32[S, R]`` updates done after each round (``RoundReport.steps``):
        ``(r + 1) * steps_per_round`` after round ``r``, unless the engine's stall guard
        stopped the round short (where the host path raises ``CurriculumStalled``).
      spec: the spec each round generated with, leaves ``[S, R, ...]``.
      state: the final engine states, leaves ``[S, ...]``.
    """

    held_out: jax.Array
    generated: jax.Array
    invalid: jax.Array
    collisions: jax.Array
    learned: jax.Array
    stuck: jax.Array
    dropped_easy: jax.Array
    r0: jax.Array
    rollouts: jax.Array
    updates: jax.Array
    spec: Any
    state: Any


def compiled_evolve(
    solver,
    seed_tasks: Any,
    *,
    challenger: PureChallenger | None,
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
    seed_batch: int | None = None,
    progress: Callable[..., None] | None = None,
) -> CompiledResult:
    """:func:`~curriculax.selfplay.curriculum_evolve` with a :class:`PureChallenger`, every
    seed of ``keys`` (``key[S]``) in one compiled, ``vmap``-ped program.

    The same run as the host path with :func:`host_challenger` for the same key (an explicit
    ``held_out_tasks``; no gates; ``groups_per_generation`` equal to ``batch_groups``, so an
    engine step, one generation batch, makes one update or none). A round counts updates as
    the host path's :func:`~curriculax.engine.run` does: it runs engine steps until the run
    has done ``(r + 1) * steps_per_round`` updates after round ``r``; a step whose groups were
    not admitted (e.g. no valid rollout) makes no update, so a round may take more steps
    than ``steps_per_round``. Where nothing is admitted for the engine's ``stall_windows``
    batch-equivalents (and two generation batches) in a row, the host path raises
    :class:`~curriculax.engine.CurriculumStalled`; a compiled round stops at the same
    generation batch instead (the round ends short of its updates, the next round goes on
    from there), :attr:`CompiledResult.updates` shows the shortfall and a warning names the
    seeds and rounds. This bounds every round: each admitted group, at most ``stall_windows
    * batch_groups`` groups apart, moves the run towards its next update. With
    ``challenger=None`` (``spec`` ignored) it is the host path's run without a challenger:
    the seed sampler alone, the held-out set evaluated after each round (the challenge and
    judge counts are 0, ``spec`` is ``None``).

    Args:
      seed_batch: seeds ``vmap``-ped together, an int >= 1; the batches run one after
        another inside the same program (``lax.map``). ``None``: all seeds at once. On a
        CPU whose cores one seed already keeps busy, a smaller batch can be faster per seed.
      progress: called on the host once per seed at the end of each round (with that seed's
        held-out score, through ``jax.debug.callback``), e.g. to move a progress line while
        the program runs; its return value is ignored and no number of the run depends on it.
        None: no callback.
    """
    # The host path's argument checks (curriculum_evolve), so neither path runs what the
    # other refuses.
    check_round_counts(rounds, steps_per_round, generated_per_round, challenger)
    if seed_batch is not None:
        seed_batch = int_at_least(seed_batch, "seed_batch")
    if challenger is not None and not isinstance(challenger, PureChallenger):
        raise TypeError(
            f"challenger must be a selfplay.PureChallenger (pure JAX), got "
            f"{type(challenger).__name__}; host callables run on curriculum_evolve"
        )
    if held_out_tasks is None:
        raise ValueError(
            "held_out_tasks is required on the compiled path (curriculum_evolve can split "
            "held_out_frac of the seed tasks off instead)"
        )
    if _num_rows(held_out_tasks) == 0:  # before keying: an empty pool has no rows to hash
        raise ValueError("held_out_tasks is empty")
    layout = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), seed_tasks)
    # Generated tasks are keyed in JAX's dtypes (_to_layout): the pools are compared in that
    # layout too, so a float64 pool's held-out task and its float32 copy share a key.
    keyed = jax.tree.map(
        lambda s: jax.ShapeDtypeStruct(s.shape, jax.dtypes.canonicalize_dtype(s.dtype)), layout
    )
    held_out_tasks = conform_pool(held_out_tasks, keyed, "held_out_tasks")
    held_keys = task_keys(held_out_tasks)
    check_unique_keys(held_keys, "held_out_tasks")
    keys_np = task_keys(seed_tasks)
    check_unique_keys(keys_np, "seed_tasks")
    shared = np.intersect1d(task_keys(conform_pool(seed_tasks, keyed, "seed_tasks")), held_keys)
    if shared.size:  # the host path's message (curriculum_evolve)
        raise ValueError(
            f"{shared.size} held-out task(s) are also seed tasks (keys {shared[:5].tolist()}"
            "...); the held-out set must be disjoint from the training pool"
        )
    n = len(keys_np)
    capacity = (
        4 * generated_per_round
        if frontier_capacity is None
        else int_at_least(frontier_capacity, "frontier_capacity")
    )
    inner = _build_sampler(sampler, n)
    frontier = None
    if challenger is not None:
        frontier = frontier_sampler(
            inner,
            n,
            layout,
            capacity=capacity,
            frontier_share=frontier_share,
            max_attempts=max_attempts,
            success_threshold=success_threshold,
            pass_rate=pass_rate,
            z=z,
        )
        check_frontier_draws(frontier_share, batch_groups, "batch_groups")
        inner = frontier.sampler
    env = Env("train", seed_tasks, curriculum(inner), group_size, keys=keys_np)
    engine = Engine(solver, [env], EngineConfig(batch_groups=batch_groups))
    forbidden = jnp.asarray(held_keys)
    held = jax.tree.map(jnp.asarray, held_out_tasks)
    zero = jnp.zeros((), jnp.int32)

    def set_frontier(state, fstate):
        cs = state.curricula["train"]
        return state._replace(curricula={"train": cs._replace(sampler=fstate)})

    cfg = engine.config

    def stalled(state):
        """The host's stall guard (``engine._loop._StallGuard``) after a generation batch."""
        since = state.counters.since_progress
        return (since // cfg.batch_groups >= cfg.stall_windows) & (since >= 2 * cfg.generation)

    def solve(state, r):
        """Engine steps until ``(r + 1) * steps_per_round`` updates are done, as the host's
        ``run(steps=...)`` (one update or none per step, ``G == B``), or until the stall
        guard fires (the host raises there)."""
        target = (r + 1) * steps_per_round

        def step(carry):
            state, _ = carry
            state = engine.step(state)[0]
            return state, stalled(state)

        state, _ = jax.lax.while_loop(
            lambda c: (c[0].counters.updates < target) & ~c[1], step, (state, jnp.bool_(False))
        )
        return state

    def plain_round(k_eval, state, r):
        """A round without a challenger: train, then evaluate."""
        state = solve(state, r)
        score = jnp.mean(solver.evaluate(state.solver, held, jax.random.fold_in(k_eval, r)))
        out = dict(
            held_out=score,
            generated=zero,
            invalid=zero,
            collisions=zero,
            learned=zero,
            stuck=zero,
            dropped_easy=zero,
            r0=jnp.zeros((), jnp.float32),
            rollouts=state.counters.rollouts,
            updates=state.counters.updates,
            spec=None,
        )
        return state, out

    def one_seed(key):
        k_init, k_rounds, k_eval = jax.random.split(key, 3)
        state = engine.init(k_init)

        def round_(carry, r):
            state, spec = carry
            if challenger is None:
                state, out = plain_round(k_eval, state, r)
                return (state, spec), out
            fstate = state.curricula["train"].sampler
            easy_before = fstate.dropped_easy
            tasks, valid, tkeys, seeds, invalid, collisions, generated = _challenge(
                challenger,
                spec,
                jax.random.fold_in(k_rounds, r),
                generated_per_round,
                keyed,
                forbidden,
                fstate.keys,
                fstate.status != EMPTY,
            )
            fstate = frontier.insert(fstate, tasks, valid, tkeys, r, seeds, invalid)
            state = solve(set_frontier(state, fstate), r)
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
                generated,
                rep.r0,
            )
            score = jnp.mean(solver.evaluate(state.solver, held, jax.random.fold_in(k_eval, r)))
            out = dict(
                held_out=score,
                generated=generated,
                invalid=invalid,
                collisions=collisions,
                learned=rep.learned,
                stuck=rep.stuck,
                dropped_easy=easy,
                r0=rep.r0,
                rollouts=state.counters.rollouts,
                updates=state.counters.updates,
                spec=spec,
            )
            return (state, challenger.propose(spec, judged)), out

        def round_ticked(carry, r):
            carry, out = round_(carry, r)
            if progress is not None:  # the score is per seed, so vmap calls it per seed
                jax.debug.callback(progress, out["held_out"])
            return carry, out

        init_spec = None if challenger is None else spec
        (state, _), out = jax.lax.scan(round_ticked, (state, init_spec), jnp.arange(rounds))
        return out, state

    if seed_batch is None or seed_batch >= keys.shape[0]:
        run_all = jax.vmap(one_seed)
    else:
        run_all = lambda ks: jax.lax.map(one_seed, ks, batch_size=seed_batch)  # noqa: E731
    out, states = jax.jit(run_all)(keys)
    if progress is not None:
        jax.effects_barrier()  # every call made before the result is handed back
    _warn_stalled(np.asarray(out["updates"]), steps_per_round, cfg.stall_windows)
    return CompiledResult(**out, state=states)


def _warn_stalled(updates: np.ndarray, steps_per_round: int, stall_windows: int) -> None:
    """Warns naming each seed whose round ended short of its updates (``updates: i32[S, R]``),
    i.e. where the stall guard stopped it and the host path would have raised."""
    target = steps_per_round * np.arange(1, updates.shape[1] + 1)
    first: dict[int, int] = {}  # seed -> its first short round
    for s, r in zip(*np.nonzero(updates < target[None, :]), strict=True):
        first.setdefault(int(s), int(r))
    if not first:
        return
    lines = "; ".join(
        f"seed {s} round {r}: {int(updates[s, r])} of {int(target[r])} updates"
        for s, r in list(first.items())[:5]
    )
    warnings.warn(
        f"compiled_evolve: no group was admitted for {stall_windows} batch-equivalents, so "
        f"{len(first)} seed(s) stopped short of their updates ({lines}); the host path "
        "raises CurriculumStalled there. CompiledResult.updates holds every round's count",
        stacklevel=3,
    )
