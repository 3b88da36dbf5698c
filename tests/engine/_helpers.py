"""Exact building blocks for the engine tests: a deterministic solver and simple gates.

The id solver's rewards are a pure function of the task's id, and its ``update`` records the
task ids (and env, and valid-rollout count) of every row it trains on, so a test can read back
exactly which groups reached a training batch. The gates admit by task id or by call count, so
every admission is known in advance.

Imported by the tests as ``engine_test_helpers`` (registered by this folder's conftest).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import curriculax as cx
from curriculax.engine import Rollouts, Solver, TrainBatch

HISTORY = 1024  # trained rows the id solver can record


def alternating(ids: jax.Array, k: int) -> jax.Array:
    """``f32[G, K]``: reward ``(id + k) % 2`` for rollout ``k``; every group of K >= 2 is
    mixed, so group-relative advantages are +-0.5 and never all zero."""
    return ((ids[:, None] + jnp.arange(k)[None, :]) % 2).astype(jnp.float32)


class IdState(NamedTuple):
    """State of :func:`id_solver`: what every update trained on, in order."""

    ids: jax.Array  # i32[H] batch.task_ids of trained rows (-1: empty)
    data_ids: jax.Array  # i32[H] the task id the rollout itself recorded
    envs: jax.Array  # i32[H] batch.env
    nvalid: jax.Array  # i32[H] valid rollouts in the row
    cursor: jax.Array  # i32[] rows recorded
    reward_sum: jax.Array  # f32[] sum of every reward and advantage the solver was handed
    updates: jax.Array  # i32[]


def id_solver(reward_fn: Callable[[jax.Array, int], jax.Array] = alternating) -> Solver:
    """A deterministic solver over pools ``{"id": i32[N], ...}``.

    ``rollout`` gives ``reward_fn(tasks["id"], K)``, every rollout valid; ``credit`` is
    group-relative (reward minus the mean of the group's valid rollouts, ``T = 1``);
    ``update`` appends the batch's rows to the history in :class:`IdState`.
    """

    def init(key):
        del key
        minus = jnp.full((HISTORY,), -1, jnp.int32)
        zero = jnp.zeros((), jnp.int32)
        return IdState(minus, minus, minus, minus, zero, jnp.zeros((), jnp.float32), zero)

    def rollout(state, tasks, key, group_size):
        del state, key
        ids = tasks["id"].astype(jnp.int32)
        rewards = reward_fn(ids, group_size)
        g = ids.shape[0]
        valid = jnp.ones((g, group_size), bool)
        data = {"task": jnp.broadcast_to(ids[:, None], (g, group_size))}
        return Rollouts(rewards, valid, valid[:, :, None], data)

    def credit(rollouts):
        valid = rollouts.valid
        count = jnp.maximum(valid.sum(1, keepdims=True), 1)
        mean = jnp.where(valid, rollouts.rewards, 0.0).sum(1, keepdims=True) / count
        adv = jnp.where(valid, rollouts.rewards - mean, 0.0)
        return jnp.where(rollouts.token_mask, adv[:, :, None], 0.0)

    def update(state, batch: TrainBatch, key):
        del key
        b = batch.task_ids.shape[0]
        slot = state.cursor + jnp.arange(b)
        nvalid = jnp.sum(batch.rollouts.valid, axis=1, dtype=jnp.int32)
        total = jnp.sum(batch.rollouts.rewards) + jnp.sum(batch.advantages)
        new = IdState(
            ids=state.ids.at[slot].set(batch.task_ids, mode="drop"),
            data_ids=state.data_ids.at[slot].set(batch.rollouts.data["task"][:, 0], mode="drop"),
            envs=state.envs.at[slot].set(batch.env, mode="drop"),
            nvalid=state.nvalid.at[slot].set(nvalid, mode="drop"),
            cursor=state.cursor + b,
            reward_sum=state.reward_sum + total,
            updates=state.updates + 1,
        )
        return new, {"reward_sum": new.reward_sum}

    def evaluate(state, tasks, key):
        del state, key
        return jnp.zeros(tasks["id"].shape, jnp.float32)

    return Solver(init, rollout, credit, update, evaluate)


def trained(state: IdState) -> list[tuple[int, int]]:
    """``[(env index, task id)]`` of every row the id solver trained on, in order."""
    n = int(state.cursor)
    assert n <= HISTORY, "the id solver's history overflowed; use a shorter run"
    envs, ids = np.asarray(state.envs)[:n], np.asarray(state.ids)[:n]
    return list(zip(envs.tolist(), ids.tolist()))


def id_pool(n: int) -> dict[str, jax.Array]:
    """``{"id": arange(n)}``: pool index == task id."""
    return {"id": jnp.arange(n, dtype=jnp.int32)}


def in_order(n: int) -> cx.TaskSampler:
    """Task ids 0, 1, 2, ... (wrapping at ``n``)."""
    return cx.samplers.sequential(n, shuffle=False)


class CallsState(NamedTuple):
    calls: jax.Array  # i32[] admit calls so far


def call_gate(vote: Callable[[jax.Array, jax.Array], jax.Array], metrics=None) -> cx.AdmissionGate:
    """A gate voting ``vote(task_ids i32[G], calls i32[]) -> bool[G]``; its state counts calls.

    It publishes no metrics unless ``metrics`` is given (like a user's own gate).
    """

    def init(key):
        del key
        return CallsState(jnp.zeros((), jnp.int32))

    def admit(state, results):
        ids = results.task_ids.astype(jnp.int32)
        return vote(ids, state.calls).astype(bool), CallsState(state.calls + 1)

    def gate_metrics(state):
        return {} if metrics is None else metrics(state)

    return cx.AdmissionGate(init, admit, gate_metrics)


def mod_gate(m: int) -> cx.AdmissionGate:
    """Admits tasks whose id is a multiple of ``m``."""
    return call_gate(lambda ids, calls: ids % m == 0)


def reject_gate() -> cx.AdmissionGate:
    """Admits nothing."""
    return call_gate(lambda ids, calls: jnp.zeros(ids.shape, bool))


def open_gate() -> cx.AdmissionGate:
    """Admits everything."""
    return call_gate(lambda ids, calls: jnp.ones(ids.shape, bool))


def periodic_gate(k: int) -> cx.AdmissionGate:
    """Admits the first group of every ``k``-th generation batch (calls k-1, 2k-1, ...)."""
    return call_gate(lambda ids, calls: (jnp.arange(ids.shape[0]) == 0) & (calls % k == k - 1))


def opens_after(m: int) -> cx.AdmissionGate:
    """Rejects every group of the first ``m`` calls, then admits everything."""
    return call_gate(lambda ids, calls: jnp.broadcast_to(calls >= m, ids.shape))


def two_env_engine():
    """Two envs like the quick start (``steady`` ungated, ``pools`` difficulty pools plus the
    zero-advantage gate, weight 2) on the synthetic solver; B = 8, G = 4, so groups wait
    across updates."""
    from curriculax.engine import Engine, EngineConfig, Env
    from curriculax.engine.synthetic import synthetic_solver, synthetic_tasks

    gated = cx.curriculum(
        cx.samplers.difficulty_pools(64),
        {"zero_advantage": cx.gates.advantage_range(0.0, 0.0)},
    )
    envs = [
        Env("steady", synthetic_tasks(48, seed=1), group_size=4),
        Env("pools", synthetic_tasks(64, seed=2), gated, group_size=4, weight=2.0),
    ]
    config = EngineConfig(batch_groups=8, groups_per_generation=4, seed=3)
    return Engine(synthetic_solver(), envs, config)


def read_jsonl(path: Path | str) -> list[dict]:
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def without_time(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "time"} for r in records]


def host(tree):
    """A numpy copy of a pytree (engine states are donated by the next compiled call)."""
    return jax.tree.map(lambda x: np.array(jax.device_get(x)), tree)


def assert_trees_equal(a, b, what: str = "") -> None:
    """Bitwise equality of two pytrees of arrays, naming the first leaf that differs."""
    fa, ta = jax.tree_util.tree_flatten_with_path(a)
    fb, tb = jax.tree_util.tree_flatten_with_path(b)
    assert ta == tb, f"{what}: tree structures differ: {ta} vs {tb}"
    for (path, x), (_, y) in zip(fa, fb):
        x, y = np.asarray(x), np.asarray(y)
        where = f"{what}{jax.tree_util.keystr(path)}"
        assert x.dtype == y.dtype and x.shape == y.shape, f"{where}: layout differs"
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f"{where}: values differ"
