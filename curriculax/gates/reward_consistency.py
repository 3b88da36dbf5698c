"""A gate that keeps groups of tasks whose reward contradicts itself out of training."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from curriculax import _counters, _shard
from curriculax._checks import check_num_tasks
from curriculax._contradiction import mark, task_of
from curriculax._types import AdmissionGate, GroupResults
from curriculax.gates._rate import admit_rate


class ConsistencyGateState(NamedTuple):
    """State of the :func:`reward_consistency` gate.

    Attributes:
      contradicted: ``bool[N]`` tasks with at least one contradicting group so far.
      rejected: ``i32[]`` groups rejected so far (cumulative).
      admit_rate: ``f32[]`` share of the last batch's groups with a valid rollout that this
        gate admitted (unchanged by a batch with none).
    """

    contradicted: jax.Array
    rejected: jax.Array
    admit_rate: jax.Array

    # Fields indexed by task: a checkpoint restored onto a reordered pool permutes these.
    PER_TASK = ("contradicted",)


def reward_consistency(
    num_tasks: int, *, entry_task=None, axis_name: str | None = None
) -> AdmissionGate:
    """Rejects every group of a task whose reward has contradicted itself.

    A group with two valid rollouts of one answer and different rewards
    (:func:`curriculax.samplers.contradicting_groups`, compared exactly) proves the task's
    reward ignores the answer: its advantages are noise, full size, and train the policy
    toward whatever it happened to say. From its first contradicting group on, a task is
    marked, and this gate rejects that group and every later group of the task (a group of
    the task in the same batch included), whatever its answers; the groups of unmarked tasks
    pass. The sampler of the same name (:func:`curriculax.samplers.reward_consistency`) stops
    *drawing* marked tasks (so it saves rollouts) but, being a sampler, cannot keep a group
    out of training: the first contradicting group of each task and its floor's draws still
    train. With both, neither reaches the update. A rejected group never takes a batch slot
    (the engine backfills), so this saves updates, not rollouts.

    It needs the answers (``GroupResults.answers``) and has the sampler's limits: it cannot
    see noise in a group whose answers all differ, nor a wrong but fixed reference. A marked
    task stays marked for the run. With ``entry_task`` (a pool that repeats tasks) a proof
    marks every copy of its task.

    Cost: O(G K^2) per batch (plus O(N log G) with ``entry_task``), ``bool[N]`` of state
    (split over the mesh with ``axis_name``).

    Args:
      num_tasks: pool size ``N``, the sampler's (:func:`curriculax.curriculum` refuses another;
        a group with a task id outside ``[0, N)`` is judged by its own answers only).
      entry_task: ``int[N]``, entries with equal values hold the same task (e.g.
        :func:`curriculax.tasks.distinct_tasks`; a config passes it as context): a proof on
        one copy rejects every copy. None: each entry its own task.
      axis_name: the mesh axis along which per-task state is split under ``shard_map``.

    Returns:
      An :class:`~curriculax.AdmissionGate`. Metrics: ``rejected`` (cumulative),
      ``admit_rate`` (last batch, over groups with a valid rollout) and ``contradicted``
      (entries marked: each copy of a task).

    Example:
      >>> from curriculax.testing import group_results
      >>> gate = reward_consistency(4)
      >>> r = group_results([1, 2], [[1.0, 0.0], [1.0, 0.0]])
      >>> r = r._replace(answers=jnp.array([[7, 7], [7, 8]]))  # task 1: one answer, two rewards
      >>> vote, _ = gate.admit(gate.init(jax.random.key(0)), r)
      >>> vote.tolist()
      [False, True]
    """
    n = check_num_tasks(num_tasks)
    rep = task_of(entry_task, n, "reward_consistency gate")

    def init(key: jax.Array) -> ConsistencyGateState:
        del key
        return ConsistencyGateState(
            jnp.zeros((n,), bool), _counters.zero(), jnp.ones((), jnp.float32)
        )

    def admit(state: ConsistencyGateState, results: GroupResults):
        where = "gates.reward_consistency"
        _shard.check_split(state.contradicted.shape[0], n, axis_name, where)
        bad, flags, noisy = mark(state.contradicted, results, _shard.bound(axis_name), rep)
        admitted = ~(bad | noisy)
        judged = jnp.any(jnp.asarray(results.valid, bool), axis=1)
        rejected = _counters.add(state.rejected, jnp.sum(~admitted & judged, dtype=jnp.int32))
        rate = admit_rate(admitted, judged, state.admit_rate)
        return admitted, ConsistencyGateState(flags, rejected, rate)

    def metrics(state: ConsistencyGateState) -> dict[str, jax.Array]:
        count = jnp.sum(state.contradicted, dtype=jnp.int32)
        return {
            "rejected": state.rejected.astype(jnp.float32),
            "admit_rate": state.admit_rate,
            "contradicted": _shard.psum(count, _shard.bound(axis_name)).astype(jnp.float32),
        }

    return AdmissionGate(init, admit, metrics, num_tasks=n)
