"""The curriculum protocol: results, admissions, samplers, gates and their composition.

A component is a factory that closes over static hyperparameters and returns a ``NamedTuple``
of pure functions (the optax shape). Its state is a ``NamedTuple`` of arrays with fixed shapes
and explicit dtypes, so it can be a ``lax.scan`` carry, be ``vmap``-ped over seeds and be
checkpointed with Orbax. Keys are passed in, never stored.

Padding rows: a row with a task id past the pool (the sampler's ``num_tasks``, or
``2**31 - 1``), no valid rollout and no trainable position is padding (the host driver pads
batches to power-of-two sizes so that varying batch sizes share one compiled program). A
sampler's ``observe`` and a gate's ``admit`` must leave their state
as if such a row were absent (a gate may vote either way on it: padding is never admitted);
the conformance suite (:mod:`curriculax.testing`) checks it.

Shapes are written in docstrings as ``f32[G, K]`` (dtype, then named axes) rather than as
jaxtyping annotations: the fields hold arrays, tracers or shape structs depending on where
they are used, nothing checks annotations at run time inside ``jit``, and
:func:`curriculax._curriculum.check_results` already checks the axes against each other at
trace time with messages that name the field.

Shapes below: ``G`` groups finalized in one batch, ``K`` rollouts per group, ``T`` credit
positions per rollout (``T = 1`` for sequence-level credit), ``N`` tasks in the pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

import jax
import numpy as np

Array = jax.Array
PRNGKey = jax.Array
State = Any
Metrics = dict[str, Array]


class GroupResults(NamedTuple):
    """Finished rollout groups, one row per group.

    Attributes:
      task_ids: ``i32[G]`` task each group ran (index into the pool).
      rewards: ``f32[G, K]`` one reward per rollout.
      valid: ``bool[G, K]`` rollout finished cleanly and is trainable.
      advantages: ``f32[G, K, T]`` credit per sampled token (``T = 1``: sequence-level).
      token_mask: ``bool[G, K, T]`` positions that are trainable sampled tokens.
      answers: optional ``i32[G, K]`` an id of each rollout's answer (equal ids for equal
        answers, e.g. a hash of the completion the verifier read); ``None`` when the env does
        not report answers. A deterministic verifier gives equal answers equal rewards, so two
        rollouts of one group with one answer and different rewards prove the task's reward
        is not a function of the answer (:func:`curriculax.samplers.reward_consistency`).
    """

    task_ids: Array
    rewards: Array
    valid: Array
    advantages: Array
    token_mask: Array
    answers: Array | None = None


class Admission(NamedTuple):
    """The curriculum's verdict on one batch of groups.

    Attributes:
      admitted: ``bool[G]`` the group may train (every gate admitted it and it has a valid
        rollout).
      by_gate: ``{name: bool[G]}`` each gate's own vote, for traces and metrics.
    """

    admitted: Array
    by_gate: dict[str, Array]


class TaskDraw(NamedTuple):
    """What a sampler may return instead of plain ids: some tasks as payloads.

    The engine looks up rows with ``from_pool`` set in the env's pool (by ``ids``) and takes
    the others as they are from ``tasks`` (the frontier sampler hands out generated tasks this
    way). ``ids`` still identify every task to ``observe`` (a sampler may use ids ``>= N`` for
    its own payloads).

    Attributes:
      ids: ``i32[num]`` task ids.
      from_pool: ``bool[num]`` resolve this row through the pool.
      tasks: payload pytree with leaves ``[num, ...]``, shaped like the pool's rows.
      keys: ``u32[num]`` stable keys of the payload tasks (for traces).
    """

    ids: Array
    from_pool: Array
    tasks: Any
    keys: Array


class EmptyState(NamedTuple):
    """State of a stateless component (an empty pytree)."""


PER_TASK_ATTR = "PER_TASK"
"""A state ``NamedTuple`` may declare ``PER_TASK = ("field", ...)``: fields whose leading
axis is the task pool. The engine checkpoints them with the pool's task keys and permutes
them when a run is restored onto a reordered pool."""

AT_FIRST_ENTRY_ATTR = "AT_FIRST_ENTRY"
"""A state ``NamedTuple`` with ``PER_TASK`` fields may declare ``AT_FIRST_ENTRY = True``: when
its sampler declares ``entry_task`` (:class:`TaskSampler`), those fields hold each task's
state at the task's first entry only (its other copies' slots keep their initial values). A
restore onto a reordered pool then moves each task's state to its new first entry."""


class InitFn(Protocol):
    def __call__(self, key: PRNGKey) -> State:
        """Returns the initial state. ``key`` may be ignored by deterministic components."""


class SampleFn(Protocol):
    def __call__(self, state: State, key: PRNGKey, num: int) -> tuple[Array, State]:
        """Chooses ``num`` tasks (``num`` is static). Returns ``(i32[num] task ids, state)``."""


class ObserveFn(Protocol):
    def __call__(self, state: State, results: GroupResults) -> State:
        """Takes in every finalized result, rejected groups included. Returns the new state."""


class AdmitFn(Protocol):
    def __call__(self, state: State, results: GroupResults) -> tuple[Array, State]:
        """Votes on every group. Returns ``(bool[G] admit, state)``."""


class MetricsFn(Protocol):
    def __call__(self, state: State) -> Metrics:
        """Scalar metrics (``f32[]``) keyed by a short name, e.g. ``"pool/easy"``."""


class TaskSampler(NamedTuple):
    """Chooses which tasks to roll out and observes every finished result.

    Attributes:
      init: ``(key) -> state``.
      sample: ``(state, key, num) -> (i32[num], state)``; ``num`` is a static int.
      observe: ``(state, GroupResults) -> state``; sees every result, rejected ones too.
        It trusts its input: :func:`curriculax.curriculum` makes rows with non-finite rewards
        or advantages invalid before any sampler sees them, and no sampler checks again (one
        NaN observed directly makes a category bandit draw one task from then on). Use a
        sampler inside a curriculum (as the engine and the host driver do), or give it
        finite results.
      metrics: ``(state) -> dict[str, f32[]]``.
      num_tasks: task ids the sampler draws and accepts lie in ``[0, num_tasks)``; ``None``
        (the default) when unknown or unbounded, and nothing is checked. A composed
        :func:`curriculax.curriculum` uses it to refuse results for other ids. Optional, so
        ``TaskSampler(init, sample, observe, metrics)`` still builds one.
      entry_task: for a pool that repeats tasks, ``i32[N]`` (host) each entry's task as the
        index of its first entry, when the sampler keeps a task's state there (``PER_TASK``
        fields of states declaring ``AT_FIRST_ENTRY``); ``None`` (the default) otherwise.
        Wrappers pass their inner sampler's on. The engine's restore reads it.
    """

    init: InitFn
    sample: SampleFn
    observe: ObserveFn
    metrics: MetricsFn
    num_tasks: int | None = None
    entry_task: np.ndarray | None = None


class AdmissionGate(NamedTuple):
    """Votes on each finished group; a group trains only if every gate admits it.

    Attributes:
      init: ``(key) -> state``.
      admit: ``(state, GroupResults) -> (bool[G], state)``.
      metrics: ``(state) -> dict[str, f32[]]``.
      num_tasks: the pool size a gate with per-task state was built for (``None``, the
        default: no per-task state, or unknown). :func:`curriculax.curriculum` refuses a gate
        whose ``num_tasks`` differs from its sampler's. Optional, so
        ``AdmissionGate(init, admit, metrics)`` still builds one.
    """

    init: InitFn
    admit: AdmitFn
    metrics: MetricsFn
    num_tasks: int | None = None


class CurriculumState(NamedTuple):
    """State of a composed curriculum.

    Attributes:
      sampler: the sampler's state.
      gates: ``{name: gate state}``.
      failed_groups: ``i32[]`` groups with no valid rollout so far (cumulative), counting those
        made invalid by a non-finite value or an out-of-range task id.
      nonfinite: ``i32[]`` rollouts made invalid by a non-finite reward or advantage.
      out_of_range: ``i32[]`` groups whose task id lay outside ``[0, sampler.num_tasks)``
        (made invalid, never admitted; cumulative).
      groups: ``i32[]`` groups observed so far.
      admitted: ``i32[]`` groups admitted so far.
      admission_rate: ``f32[]`` share of the last observed batch that was admitted.
    """

    sampler: State
    gates: dict[str, State]
    failed_groups: Array
    nonfinite: Array
    out_of_range: Array
    groups: Array
    admitted: Array
    admission_rate: Array


class Curriculum(NamedTuple):
    """One task sampler plus named admission gates, composed by :func:`curriculax.curriculum`.

    Attributes:
      init: ``(key) -> CurriculumState``.
      sample: ``(state, key, num) -> (i32[num], state)``.
      observe: ``(state, GroupResults, rows=None) -> (Admission, state)``; ``rows: bool[G]``
        marks real groups, the others are padding (kept out of every count).
      metrics: ``(state) -> dict[str, f32[]]`` with keys ``sampler/<k>``,
        ``gate/<name>/<k>``, ``admission_rate``, ``failed_groups``, ``nonfinite``,
        ``out_of_range``, ``groups``, ``admitted``.
      sampler: the task sampler (kept for introspection and checkpoint layout).
      gates: ``{name: AdmissionGate}``.
    """

    init: InitFn
    sample: SampleFn
    observe: Any
    metrics: MetricsFn
    sampler: TaskSampler
    gates: Mapping[str, AdmissionGate]
