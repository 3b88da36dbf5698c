"""The challenger: a task-generation spec and the three callables that use it."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax.engine._env import task_keys


class InvalidTask(ValueError):
    """Raised by ``Challenger.validate`` for a payload that is not a well-formed task."""


class Challenger(NamedTuple):
    """A challenger: plain callables, so offline fixtures are deterministic and live runs can
    call a model.

    Attributes:
      generate: ``(spec, key) -> payload``: one task payload for the family. With
        ``vectorized=True``: ``(spec, keys[P]) -> payloads`` (leaves ``[P, ...]``), e.g. a pure
        JAX generator ``vmap``-ped over keys.
      validate: ``(payload) -> task``: the validity gate; raises :class:`InvalidTask` on any
        payload that is not a well-formed, answerable task. With ``vectorized=True``:
        ``(payloads) -> (tasks, valid bool[P])``, a validity mask instead of an exception.
      propose: ``(spec, report) -> spec``: tunes the spec from the round's
        :class:`RoundReport` (raise the difficulty, keep it, or lower it).
      vectorized: whether ``generate``/``validate`` work on batches.
      checkpoint: optional ``(spec, directory, step) -> None``: saves the challenger's state
        (its spec) with the run; ``curriculum_evolve`` calls it after each ``propose`` with
        ``RUN_DIR/challenger`` and the round when it has a run directory (the learned
        challenger's parameters and optimizer state live in its spec). On several processes
        every process calls it (an Orbax save, like the learned challenger's, needs all of
        them); one that writes files itself writes them on ``jax.process_index() == 0``.
      begin_round: optional ``(spec, round) -> None``: ``curriculum_evolve`` calls it at the
        start of each round, before the challenge, so a challenger that keeps host-side
        bookkeeping from ``generate`` to ``propose`` starts each round (and each run) clean: a
        round that stopped before its ``propose`` (e.g. ``on_round`` raised) leaves it behind
        (the learned challenger drops its proposal log).
    """

    generate: Callable[..., Any]
    validate: Callable[..., Any]
    propose: Callable[[Any, Any], Any]
    vectorized: bool = False
    checkpoint: Callable[[Any, str, int], None] | None = None
    begin_round: Callable[[Any, int], None] | None = None


def level_direction(report: Any) -> int:
    """Which way a level-knob challenger moves after a round: ``+1``, ``0`` or ``-1``.

    Up when the solver already passed most of the round's tasks (more dropped as easy than
    half the generated ones) or learned more than it left stuck with ``r0 > 0``; down when it
    learned none but left tasks stuck; otherwise stay. Both built-in challengers use it.

    Example:
      >>> from curriculax.selfplay import RoundReport
      >>> report = RoundReport(round=0, spec=None, generated=8, invalid=0, collisions=0,
      ...                      learned=3, stuck=1, dropped_easy=1, r0=0.25, occupancy=4,
      ...                      steps=10, rollouts=160)
      >>> level = 2
      >>> level = max(0, level + level_direction(report))  # learned more than it left stuck
      >>> level
      3
    """
    too_easy = report.dropped_easy > report.generated // 2
    if too_easy or (report.learned > report.stuck and report.r0 > 0):
        return 1
    if report.learned == 0 and report.stuck > 0:
        return -1
    return 0


def judged_direction(judged: Any) -> jax.Array:
    """:func:`level_direction` in JAX, from a :class:`~curriculax.selfplay.Judged` (what a
    :class:`~curriculax.selfplay.PureChallenger`'s ``propose`` gets): ``i32[]`` +1, 0 or -1,
    the same rule on the same counts, for the compiled round loop."""
    learned = jnp.sum(judged.learned & judged.mask, dtype=jnp.int32)
    stuck = judged.count - learned
    too_easy = judged.dropped_easy > judged.generated // 2
    up = too_easy | ((learned > stuck) & (judged.r0 > 0))
    down = (learned == 0) & (stuck > 0)
    return jnp.where(up, 1, jnp.where(down, -1, 0)).astype(jnp.int32)


@dataclasses.dataclass(frozen=True)
class Challenge:
    """One challenge phase: ``P`` payload slots, the valid ones filled.

    Attributes:
      tasks: leaves ``[P, ...]`` (numpy), zeros where not valid.
      valid: ``bool[P]``.
      keys: ``u32[P]`` content keys.
      gen_seeds: ``u32[P]`` generation seeds.
      generated: valid tasks produced.
      invalid: payloads rejected by ``validate`` (or malformed).
      collisions: valid tasks rejected because they equal a held-out task.
      duplicates: valid tasks rejected as repeats: this round already produced them, or a
        task with the same key is still on the frontier (active or awaiting judgement) from an
        earlier round.
    """

    tasks: Any
    valid: np.ndarray
    keys: np.ndarray
    gen_seeds: np.ndarray
    generated: int
    invalid: int
    collisions: int
    duplicates: int


def _conform(task: Any, layout: Any) -> Any:
    """The task as numpy arrays in the payload layout, or raises InvalidTask."""
    try:
        leaves, tree = jax.tree.flatten(task)
        want_leaves, want_tree = jax.tree.flatten(layout)
    except Exception as e:  # a payload jax cannot even flatten
        raise InvalidTask(f"payload is not a pytree of arrays: {e}") from e
    if tree != want_tree:
        raise InvalidTask(f"task structure {tree} differs from the pool's {want_tree}")
    out = []
    for leaf, want in zip(leaves, want_leaves):
        arr = np.asarray(leaf)
        if arr.shape != tuple(want.shape):
            raise InvalidTask(f"task leaf of shape {arr.shape}, expected {tuple(want.shape)}")
        if not np.can_cast(arr.dtype, want.dtype, casting="same_kind"):
            raise InvalidTask(f"task leaf of dtype {arr.dtype}, expected {want.dtype}")
        out.append(arr.astype(want.dtype))
    return jax.tree.unflatten(want_tree, out)


def conform_pool(tasks: Any, layout: Any, name: str) -> Any:
    """A pool (leaves ``[N, ...]``) as numpy arrays in one task's ``layout``, each row cast as
    :func:`_conform` casts a generated task before it is keyed: task keys hash the dtypes too,
    so a pool is keyed in the layout its generated tasks are keyed in (else an ``f64`` copy of
    an ``f32`` task is another task).

    Raises:
      ValueError: naming ``name``, for another structure, row shape, or a dtype that does not
        cast ``same_kind`` to the layout's.
    """
    leaves = jax.tree.leaves(tasks)
    n = np.shape(leaves[0])[0] if leaves and np.ndim(leaves[0]) else 0
    rows = jax.tree.map(lambda s: jax.ShapeDtypeStruct((n, *s.shape), s.dtype), layout)
    try:
        return _conform(tasks, rows)
    except InvalidTask as e:
        raise ValueError(f"{name} is not in the seed pool's layout ({n} rows): {e}") from None


def _seed_word(key: jax.Array) -> np.uint32:
    return np.uint32(np.asarray(jax.random.key_data(key)).ravel()[-1])


def run_challenge(
    challenger: Challenger,
    spec: Any,
    key: jax.Array,
    count: int,
    layout: Any,
    forbidden: np.ndarray,
    *,
    max_tries: int | None = None,
    on_frontier: np.ndarray | None = None,
) -> Challenge:
    """Generates up to ``count`` valid tasks with ``spec``.

    Invalid payloads are counted, never raised; a task whose content key equals a forbidden
    (held-out) key is rejected and counted (``collisions``); a task this round already
    produced, or whose key is in ``on_frontier``, is rejected and counted (``duplicates``), so
    the frontier never holds one task in two slots. A non-vectorized challenger gets up to
    ``max_tries`` (default ``4 * count``) attempts; a rejected task does not use up a slot.

    Args:
      challenger: the :class:`Challenger`.
      spec: the current spec.
      key: PRNG key of this round.
      count: payload slots ``P``.
      layout: one task's layout (pytree of ``ShapeDtypeStruct``).
      forbidden: ``u32[...]`` keys no generated task may have (the held-out set).
      max_tries: attempts of a non-vectorized challenger (default ``4 * count``).
      on_frontier: ``u32[...]`` keys of the tasks still on the frontier (active or awaiting
        judgement); ``None``: none.

    Raises:
      ValueError: a vectorized ``validate`` returned a mask that is not ``bool[P]`` (one flag
        per payload), as the compiled path refuses it.
    """
    forbidden_set = set(np.asarray(forbidden, np.uint32).tolist())
    front_set = set(() if on_frontier is None else np.asarray(on_frontier, np.uint32).tolist())
    rows, keys, seeds = [], [], []
    invalid = collisions = duplicates = 0
    seen: set[int] = set()

    def accept(task, seed) -> None:
        nonlocal collisions, duplicates
        k = int(task_keys(jax.tree.map(lambda x: np.asarray(x)[None], task))[0])
        if k in forbidden_set:
            collisions += 1
        elif k in seen or k in front_set:
            duplicates += 1
        else:
            seen.add(k)
            rows.append(task)
            keys.append(k)
            seeds.append(seed)

    if challenger.vectorized:
        subkeys = jax.random.split(key, count)
        payloads = challenger.generate(spec, subkeys)
        tasks, mask = challenger.validate(payloads)
        mask = np.asarray(mask, bool)
        if mask.shape != (count,):  # a bug in validate, not an invalid task (as compiled)
            raise ValueError(
                f"the vectorized challenger's validate returned valid of shape {mask.shape}; "
                f"expected ({count},), one flag per payload"
            )
        invalid = int((~mask).sum())
        for i in np.flatnonzero(mask):
            try:  # a malformed payload is counted, as on the one-task path
                task = _conform(jax.tree.map(lambda x, i=i: np.asarray(x)[i], tasks), layout)
            except InvalidTask:
                invalid += 1
                continue
            accept(task, _seed_word(subkeys[i]))
    else:
        tries = max_tries if max_tries is not None else 4 * count
        warned = False
        for i in range(tries):
            if len(rows) >= count:
                break
            k = jax.random.fold_in(key, i)
            try:
                task = _conform(challenger.validate(challenger.generate(spec, k)), layout)
            except InvalidTask as e:
                invalid += 1
                if not warned and invalid >= tries // 2:
                    warned = True
                    warnings.warn(f"challenger: many invalid payloads, e.g. {e}", stacklevel=2)
                continue
            accept(task, _seed_word(k))

    generated = len(rows)
    pad = count - generated
    zeros = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), layout)
    all_rows = rows + [zeros] * pad
    tasks = jax.tree.map(lambda *xs: np.stack(xs), *all_rows)
    return Challenge(
        tasks=tasks,
        valid=np.array([True] * generated + [False] * pad, bool),
        keys=np.array(keys + [0] * pad, np.uint32),
        gen_seeds=np.array(seeds + [0] * pad, np.uint32),
        generated=generated,
        invalid=invalid,
        collisions=collisions,
        duplicates=duplicates,
    )
