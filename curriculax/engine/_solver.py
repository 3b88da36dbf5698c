"""The solver interface the engine drives.

The engine owns everything around the curricula (mixing, admission, the pending batch,
checkpoints); a solver owns the policy. Nothing algorithm-specific (GRPO, PPO, a synthetic
skill model) lives in the engine: it only calls these four functions.

Shapes: ``G`` groups, ``K`` rollouts per group, ``T`` credit positions per rollout, ``B``
groups in one training batch, ``M`` evaluation tasks.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import jax

Array = jax.Array


class Rollouts(NamedTuple):
    """What one rollout call produced for ``G`` groups of ``K`` rollouts.

    Attributes:
      rewards: ``f32[G, K]`` one reward per rollout.
      valid: ``bool[G, K]`` rollout finished cleanly and is trainable.
      token_mask: ``bool[G, K, T]`` trainable sampled positions (``T = 1``: one per rollout).
      data: any pytree whose leaves have leading axes ``[G, K]``: whatever the solver's
        ``update`` needs (tokens, behaviour log-probabilities, a task's difficulty, ...). It
        must have the same structure and shapes for every env of a run once ``K`` is padded
        to the run's largest group size (the engine pads it).
      answers: optional ``i32[G, K]`` an id of each rollout's answer (equal ids for equal
        answers); the engine hands it to the curriculum in
        :attr:`~curriculax.GroupResults.answers` and keeps it out of the training batch.
    """

    rewards: Array
    valid: Array
    token_mask: Array
    data: Any
    answers: Array | None = None


class TrainBatch(NamedTuple):
    """Exactly ``B`` admitted groups, as the engine hands them to ``Solver.update``.

    Groups from envs with a smaller group size are padded to the largest ``K`` of the run
    with rollouts whose ``valid`` is False and whose ``token_mask`` is all False.

    Attributes:
      rollouts: :class:`Rollouts` with leaves ``[B, K, ...]``.
      advantages: ``f32[B, K, T]`` the credit computed before admission.
      env: ``i32[B]`` index of the env each group came from.
      task_ids: ``i32[B]`` pool index of each group's task.
    """

    rollouts: Rollouts
    advantages: Array
    env: Array
    task_ids: Array


class SolverInit(Protocol):
    def __call__(self, key: Array) -> Any: ...


class RolloutFn(Protocol):
    def __call__(self, state: Any, tasks: Any, key: Array, group_size: int) -> Rollouts:
        """Rolls out ``group_size`` attempts at each of ``G`` tasks (leaves ``[G, ...]``)."""


class CreditFn(Protocol):
    def __call__(self, rollouts: Rollouts) -> Array:
        """Returns ``f32[G, K, T]`` advantages; zero where ``token_mask`` is False."""


class UpdateFn(Protocol):
    def __call__(self, state: Any, batch: TrainBatch, key: Array) -> tuple[Any, dict]:
        """One optimisation step on exactly ``B`` groups. Returns ``(state, metrics)``."""


class EvaluateFn(Protocol):
    def __call__(self, state: Any, tasks: Any, key: Array) -> Array:
        """Scores the policy on ``M`` tasks (leaves ``[M, ...]``). Returns ``f32[M]`` in [0, 1]."""


class Solver(NamedTuple):
    """A policy the engine can train.

    Attributes:
      init: ``(key) -> state``: policy parameters, optimiser state, anything else the solver
        carries (a pytree of arrays: it is checkpointed and is a ``lax.scan`` carry).
      rollout: ``(state, tasks, key, group_size) -> Rollouts``.
      credit: ``(Rollouts) -> f32[G, K, T]``: e.g. GRPO group-relative advantages. The engine
        computes credit before admission, so gates see it.
      update: ``(state, TrainBatch, key) -> (state, dict[str, f32[]])``.
      evaluate: ``(state, tasks, key) -> f32[M]``: held-out score per task (e.g. greedy exact
        match), used by experiments and self-play, never by the curriculum.
    """

    init: SolverInit
    rollout: RolloutFn
    credit: CreditFn
    update: UpdateFn
    evaluate: EvaluateFn
