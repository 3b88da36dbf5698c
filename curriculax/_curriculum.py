"""Composition: one task sampler plus named admission gates make a curriculum."""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import _counters
from curriculax._checks import check_num_tasks
from curriculax._types import (
    Admission,
    AdmissionGate,
    Curriculum,
    CurriculumState,
    GroupResults,
    TaskSampler,
)


def check_results(results: GroupResults) -> None:
    """Raises on the host (at trace time) when the shapes of ``results`` do not line up."""
    if not isinstance(results, GroupResults):
        raise TypeError(f"observe takes a curriculax.GroupResults, got {type(results).__name__}")
    ids, rewards, valid = results.task_ids, results.rewards, results.valid
    adv, mask = results.advantages, results.token_mask
    if jnp.ndim(ids) != 1:
        raise ValueError(f"task_ids must be i32[G], got shape {jnp.shape(ids)}")
    g = jnp.shape(ids)[0]
    if jnp.ndim(rewards) != 2 or jnp.shape(rewards)[0] != g:
        raise ValueError(f"rewards must be f32[G={g}, K], got shape {jnp.shape(rewards)}")
    k = jnp.shape(rewards)[1]
    if jnp.shape(valid) != (g, k):
        raise ValueError(f"valid must be bool[G={g}, K={k}], got shape {jnp.shape(valid)}")
    if jnp.ndim(adv) != 3 or jnp.shape(adv)[:2] != (g, k):
        raise ValueError(f"advantages must be f32[G={g}, K={k}, T], got shape {jnp.shape(adv)}")
    if jnp.shape(mask) != jnp.shape(adv):
        raise ValueError(
            f"token_mask must match advantages {jnp.shape(adv)}, got shape {jnp.shape(mask)}"
        )
    if not jnp.issubdtype(_dtype(ids), jnp.integer):
        raise TypeError(f"task_ids must be integers, got {_dtype(ids)}")
    for name, x in (("valid", valid), ("token_mask", mask)):
        # A cast to bool would read 0.2 as valid; an empty array has no value to misread.
        if jnp.size(x) and not (
            jnp.issubdtype(_dtype(x), jnp.bool_) or jnp.issubdtype(_dtype(x), jnp.integer)
        ):
            raise TypeError(f"{name} must hold booleans or integers, got {_dtype(x)}")
    if results.answers is not None:
        answers = jnp.asarray(results.answers)
        if answers.shape != (g, k) or not jnp.issubdtype(answers.dtype, jnp.integer):
            raise ValueError(
                f"answers must be i32[G={g}, K={k}] (or None), got "
                f"{answers.dtype}{list(answers.shape)}"
            )


def check_task_ids(task_ids, num_tasks: int | None, rows=None) -> None:
    """Raises ``ValueError`` when concrete ``task_ids`` lie outside ``[0, num_tasks)``, or,
    with no ``num_tasks``, outside int32 (where the cast to ``i32`` would change them).

    The ids are checked as given, before any cast: an int64 id past int32 would otherwise wrap
    onto a real task. Only the rows where ``rows: bool[G]`` is True are checked, when given.
    Does nothing when the ids or ``rows`` are traced (inside ``jit``/``vmap``, where
    :func:`mask_out_of_range` makes such rows invalid instead).
    """
    if any(isinstance(x, jax.core.Tracer) for x in (task_ids, rows)):
        return  # traced: mask_out_of_range handles them in the program
    if not all(getattr(x, "is_fully_addressable", True) for x in (task_ids, rows)):
        return  # spread over processes: the masking counts them
    ids = np.asarray(task_ids)
    if not np.issubdtype(ids.dtype, np.integer):
        return  # check_results names the dtype
    if num_tasks is None:
        low, high, bound = -(2**31), 2**31, "int32 (the sampler declares no num_tasks)"
    else:
        low, high, bound = 0, num_tasks, f"the sampler's range [0, {num_tasks})"
    bad = (ids < low) | (ids >= high)
    if rows is not None:
        bad &= np.asarray(rows, bool)
    rows_bad = np.flatnonzero(bad)
    if rows_bad.size:
        shown = ", ".join(f"{int(ids[r])} (row {int(r)})" for r in rows_bad[:5])
        more = f" and {rows_bad.size - 5} more" if rows_bad.size > 5 else ""
        hint = (
            "Task ids are int32."
            if num_tasks is None
            else f"Each group's task id must be the index of its task in the sampler's pool of "
            f"{num_tasks} tasks (the ids sample() handed out)."
        )
        raise ValueError(f"task_ids outside {bound}: {shown}{more}. {hint}")


def mask_out_of_range(
    results: GroupResults, num_tasks: int | None, rows: jax.Array | None = None
) -> tuple[GroupResults, jax.Array]:
    """Makes every rollout of a group whose task id lies outside ``[0, num_tasks)`` invalid.

    Such a row reaches no component as a result for a real task: its id is replaced by
    ``num_tasks`` (past the end, so a scatter with ``mode="drop"`` or JAX's default drops it,
    where ``-1`` would wrap onto the last task) and it has no valid rollout, so it is never
    admitted. Returns the results and ``i32[]`` the number of such groups (0 when
    ``num_tasks`` is None), counting only the real rows when ``rows: bool[G]`` marks them
    (padding carries an id past the pool on purpose).
    """
    ids = jnp.asarray(results.task_ids, jnp.int32)
    if num_tasks is None:
        return results._replace(task_ids=ids), jnp.zeros((), jnp.int32)
    inside = (ids >= 0) & (ids < num_tasks)
    return (
        results._replace(
            task_ids=jnp.where(inside, ids, num_tasks),
            valid=jnp.asarray(results.valid, bool) & inside[:, None],
        ),
        jnp.sum(~inside if rows is None else ~inside & rows, dtype=jnp.int32),
    )


def sanitize(results: GroupResults) -> tuple[GroupResults, jax.Array]:
    """Marks rollouts with a non-finite reward or trainable advantage invalid.

    Returns the cleaned results (non-finite values and every value of an invalid rollout
    replaced by 0, so they can never reach component state) and ``i32[]`` the number of
    valid rollouts that were made invalid. Masked (non-trainable) positions are ignored.
    """
    rewards = jnp.asarray(results.rewards, jnp.float32)
    adv = jnp.asarray(results.advantages, jnp.float32)
    mask = jnp.asarray(results.token_mask, bool)
    valid = jnp.asarray(results.valid, bool)
    finite = jnp.isfinite(rewards) & jnp.all(jnp.isfinite(adv) | ~mask, axis=-1)
    clean = valid & finite
    nonfinite = jnp.sum(valid & ~finite, dtype=jnp.int32)
    return (
        GroupResults(
            task_ids=jnp.asarray(results.task_ids, jnp.int32),
            rewards=jnp.where(clean, rewards, 0.0),
            valid=clean,
            advantages=jnp.where(mask & clean[:, :, None], adv, 0.0),
            token_mask=mask,
            answers=_answers(results),
        ),
        nonfinite,
    )


PAD_ID = 2**31 - 1
"""Task id of a padding row when the sampler declares no ``num_tasks``: past every pool, and
positive, so a scatter drops it (``-1`` would wrap onto the last task)."""


def pad_id(sampler: TaskSampler) -> int:
    """The task id padding rows carry for ``sampler``: its ``num_tasks`` (one past its pool,
    like an out-of-range row), else :data:`PAD_ID`."""
    num_tasks = getattr(sampler, "num_tasks", None)
    return PAD_ID if num_tasks is None else int(num_tasks)


def mask_rows(results: GroupResults, rows: jax.Array, pad: int = PAD_ID) -> GroupResults:
    """Turns the rows where ``rows: bool[G]`` is False into padding: task id ``pad`` (past the
    pool), every rollout invalid, no trainable position, rewards and advantages 0.

    Components see padding as a row to ignore (an out-of-range id with nothing valid); the
    composed curriculum also keeps it out of every count. The host driver pads batches to
    power-of-two sizes this way so that varying batch sizes share one compiled program.
    """
    rows = jnp.asarray(rows, bool)
    _check_rows(rows, results.task_ids)
    keep2 = rows[:, None]
    keep3 = rows[:, None, None]
    return GroupResults(
        task_ids=jnp.where(rows, jnp.asarray(results.task_ids, jnp.int32), jnp.int32(pad)),
        rewards=jnp.where(keep2, jnp.asarray(results.rewards, jnp.float32), 0.0),
        valid=jnp.asarray(results.valid, bool) & keep2,
        advantages=jnp.where(keep3, jnp.asarray(results.advantages, jnp.float32), 0.0),
        token_mask=jnp.asarray(results.token_mask, bool) & keep3,
        answers=_answers(results),
    )


def _check_rows(rows, task_ids) -> None:
    """Raises ``ValueError`` unless ``rows`` has ``task_ids``' shape ``[G]``."""
    if jnp.shape(rows) != jnp.shape(task_ids):
        raise ValueError(
            f"rows must be bool[G={jnp.shape(task_ids)[0]}], got shape {jnp.shape(rows)}"
        )


def _dtype(x) -> np.dtype:
    """The dtype ``x`` holds as given (``jnp.asarray`` would turn int64 into int32 without
    x64)."""
    return x.dtype if hasattr(x, "dtype") else jnp.asarray(x).dtype


def _as_array(x):
    """``x`` as an array with its values as given: host data (a list, a scalar) becomes a NumPy
    array, so int64 ids stay int64 until they are checked; JAX values become a JAX array."""
    if isinstance(x, jax.Array | np.ndarray):
        return x
    if any(isinstance(leaf, jax.Array) for leaf in jax.tree.leaves(x)):
        return jnp.asarray(x)
    return np.asarray(x)


def _answers(results: GroupResults) -> jax.Array | None:
    """``results.answers`` as ``i32[G, K]`` (None stays None)."""
    return None if results.answers is None else jnp.asarray(results.answers, jnp.int32)


def _check_gates(gates) -> dict[str, AdmissionGate]:
    if gates is None:
        return {}
    if not isinstance(gates, Mapping):
        raise TypeError(
            "gates must be a mapping name -> AdmissionGate, e.g. "
            "{'zero_advantage': cx.gates.advantage_range(0.0, 0.0)}; "
            f"got {type(gates).__name__}"
        )
    out = {}
    for name, gate in gates.items():
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"gate names must be non-empty strings without '/', got {name!r}")
        if not isinstance(gate, AdmissionGate):
            raise TypeError(
                f"gate {name!r} must be an AdmissionGate(init, admit, metrics), "
                f"got {type(gate).__name__}"
            )
        out[name] = gate
    return out


def _check_entry_task(entry_task: object, num_tasks: int | None) -> None:
    """``TaskSampler.entry_task``, when given, is ``int[num_tasks]`` naming each entry's task
    by the index of its first entry (what a restore onto a reordered pool relies on)."""
    if entry_task is None:
        return
    e = np.asarray(entry_task)
    ok = num_tasks is not None and e.shape == (num_tasks,) and np.issubdtype(e.dtype, np.integer)
    if ok:
        values, first = np.unique(e, return_index=True)
        ok = np.array_equal(values, first)
    if not ok:
        raise ValueError(
            "TaskSampler.entry_task must be an int array of shape (num_tasks,) giving each "
            f"entry's task as the index of its first entry (num_tasks={num_tasks}), got "
            f"dtype {e.dtype}, shape {e.shape}: {np.array2string(e.ravel()[:8])}"
        )


def curriculum(
    sampler: TaskSampler, gates: Mapping[str, AdmissionGate] | None = None
) -> Curriculum:
    """Composes a task sampler and named admission gates into one curriculum.

    ``observe`` first lets the sampler observe every result (rejected groups included), then
    asks every gate about every group (no short-circuit, so stateful gates see everything),
    and admits a group only when every gate admits it and it has at least one valid rollout.
    A rollout with a non-finite reward, or a non-finite advantage at a trainable position, is
    made invalid first (counted in ``nonfinite``), so such values never reach any state.

    Task ids must lie in ``[0, sampler.num_tasks)`` when the sampler declares its range.
    Called eagerly with concrete ids, ``observe`` raises ``ValueError`` naming the ids outside
    it; traced (inside ``jit``), every rollout of such a group is made invalid before any
    component sees it (so it is never admitted) and the group is counted in ``out_of_range``.

    Args:
      sampler: the :class:`~curriculax.TaskSampler` that chooses tasks.
      gates: ``{name: AdmissionGate}``; names become metric namespaces ``gate/<name>/``.

    Returns:
      A :class:`~curriculax.Curriculum`. ``observe(state, results)`` returns
      ``(Admission, state)``; ``metrics`` returns ``sampler/<k>``, ``gate/<name>/<k>``,
      ``admission_rate`` (last batch), ``failed_groups`` (cumulative), ``nonfinite``
      (cumulative), ``out_of_range`` (cumulative), ``groups`` and ``admitted`` (cumulative).

    Raises:
      ValueError: from ``observe``, for concrete task ids outside the sampler's range (checked
        as given, before the cast to ``i32``), or ``rows`` not of shape ``[G]``.
      TypeError: from ``observe``, for ``valid`` or ``token_mask`` holding neither booleans
        nor integers (also under ``jit``: a cast would read 0.2 as valid).

      ``observe(state, results, rows)`` takes an optional ``rows: bool[G]``: rows where it is
      False are padding (see :func:`mask_rows`), never admitted and kept out of every count;
      components see them as rows to ignore. The host driver
      (:class:`curriculax.HostCurriculum`) pads batches to power-of-two sizes this way.

    Example:
      >>> import curriculax as cx
      >>> cur = cx.curriculum(
      ...     cx.samplers.difficulty_pools(1000),
      ...     gates={"zero_advantage": cx.gates.advantage_range(0.0, 0.0)},
      ... )
      >>> state = cur.init(jax.random.key(0))
      >>> ids, state = cur.sample(state, jax.random.key(1), 16)
    """
    if not isinstance(sampler, TaskSampler):
        raise TypeError(
            f"sampler must be a TaskSampler(init, sample, observe, metrics), "
            f"got {type(sampler).__name__}"
        )
    num_tasks = sampler.num_tasks
    if num_tasks is not None:
        num_tasks = check_num_tasks(num_tasks, "TaskSampler.num_tasks")
    _check_entry_task(sampler.entry_task, num_tasks)
    gates = _check_gates(gates)
    for name, gate in gates.items():
        if gate.num_tasks is not None and num_tasks is not None and gate.num_tasks != num_tasks:
            raise ValueError(
                f"gate {name!r} was built for {gate.num_tasks} tasks and the sampler for "
                f"{num_tasks}; build both for the pool (a task past the gate's range would "
                "never be marked)"
            )
    names = tuple(gates)
    padding = pad_id(sampler)

    def init(key: jax.Array) -> CurriculumState:
        keys = jax.random.split(key, len(names) + 1)
        return CurriculumState(
            sampler=sampler.init(keys[0]),
            gates={name: gates[name].init(keys[i + 1]) for i, name in enumerate(names)},
            failed_groups=_counters.zero(),
            nonfinite=_counters.zero(),
            out_of_range=_counters.zero(),
            groups=_counters.zero(),
            admitted=_counters.zero(),
            admission_rate=jnp.ones((), jnp.float32),
        )

    def sample(state: CurriculumState, key: jax.Array, num: int):
        ids, sampler_state = sampler.sample(state.sampler, key, num)
        return ids, state._replace(sampler=sampler_state)

    def observe(state: CurriculumState, results: GroupResults, rows: jax.Array | None = None):
        if isinstance(results, GroupResults):  # else check_results says what it is
            # Each field as an array (a list too: JAX deprecates lists in ndim and shape), with
            # its values as given: the ids are checked before any cast to int32.
            results = results._replace(
                **{f: _as_array(v) for f, v in results._asdict().items() if v is not None}
            )
        check_results(results)
        if rows is not None:
            rows = jnp.asarray(rows, bool)
            _check_rows(rows, results.task_ids)
        check_task_ids(results.task_ids, num_tasks, rows)  # only real rows
        # Checked: from here on JAX arrays, as the samplers and gates take them.
        results = results._replace(
            **{f: jnp.asarray(v) for f, v in results._asdict().items() if v is not None}
        )
        if rows is not None:
            # Padding becomes rows to ignore (an id past the pool, nothing valid), kept out of
            # every count.
            results = mask_rows(results, rows, padding)
        inside, out_of_range = mask_out_of_range(results, num_tasks, rows)
        clean, nonfinite = sanitize(inside)
        sampler_state = sampler.observe(state.sampler, clean)
        votes, gate_states = {}, {}
        for name in names:
            vote, gate_states[name] = gates[name].admit(state.gates[name], clean)
            if jnp.shape(vote) != jnp.shape(clean.task_ids):
                raise ValueError(
                    f"gate {name!r} returned a vote of shape {jnp.shape(vote)}; "
                    f"it must be bool[G={jnp.shape(clean.task_ids)[0]}]"
                )
            votes[name] = jnp.asarray(vote, bool)
        has_valid = jnp.any(clean.valid, axis=1)
        admitted = has_valid
        for name in names:
            admitted = admitted & votes[name]
        real = jnp.ones_like(has_valid) if rows is None else rows
        num_groups = jnp.sum(real, dtype=jnp.int32)
        num_admitted = jnp.sum(admitted, dtype=jnp.int32)
        rate = num_admitted.astype(jnp.float32) / jnp.maximum(num_groups, 1).astype(jnp.float32)
        failed = jnp.sum(real & ~has_valid, dtype=jnp.int32)
        new = CurriculumState(
            sampler=sampler_state,
            gates=gate_states,
            failed_groups=_counters.add(state.failed_groups, failed),
            nonfinite=_counters.add(state.nonfinite, nonfinite),
            out_of_range=_counters.add(state.out_of_range, out_of_range),
            groups=_counters.add(state.groups, num_groups),
            admitted=_counters.add(state.admitted, num_admitted),
            admission_rate=jnp.where(num_groups > 0, rate, state.admission_rate),
        )
        return Admission(admitted, votes), new

    def metrics(state: CurriculumState) -> dict[str, jax.Array]:
        out = {f"sampler/{k}": v for k, v in sampler.metrics(state.sampler).items()}
        for name in names:
            for k, v in gates[name].metrics(state.gates[name]).items():
                out[f"gate/{name}/{k}"] = v
        out["admission_rate"] = state.admission_rate
        for field in ("failed_groups", "nonfinite", "out_of_range", "groups", "admitted"):
            out[field] = getattr(state, field).astype(jnp.float32)
        return out

    return Curriculum(init, sample, observe, metrics, sampler, dict(gates))
