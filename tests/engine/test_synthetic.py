"""The synthetic solver: cheap enough for thousands of groups per second, learns from admitted
groups, and learns nothing from groups whose rollouts all scored the same."""

import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curriculax as cx
from curriculax.engine import Engine, EngineConfig, Env, TrainBatch, run
from curriculax.engine.synthetic import SyntheticState, synthetic_solver, synthetic_tasks

HELD_OUT = {"difficulty": jnp.linspace(0.0, 1.0, 101, dtype=jnp.float32)}
KEY = jax.random.key(0)


def _held_out(solver, state) -> float:
    return float(jnp.mean(solver.evaluate(state, HELD_OUT, KEY)))


@pytest.fixture(scope="module")
def engine():
    """The quick start's gated env: difficulty pools plus the zero-advantage gate."""
    gates = {"zero_advantage": cx.gates.advantage_range(0.0, 0.0)}
    env = Env("a", synthetic_tasks(200), cx.curriculum(cx.samplers.difficulty_pools(200), gates))
    return Engine(synthetic_solver(), [env], EngineConfig(batch_groups=16))


def test_thousands_of_groups_per_second_after_compile(engine):
    run(engine, steps=2, progress=False, traces=False)  # compile
    start = time.perf_counter()
    result = run(engine, steps=60, progress=False, traces=False)
    rate = result.summary["groups"] / (time.perf_counter() - start)
    assert result.summary["groups"] >= 60 * 16
    assert rate > 500, f"{rate:.0f} groups/s"


def test_training_on_admitted_groups_raises_held_out_success(engine):
    before = _held_out(engine.solver, engine.init().solver)
    result = run(engine, steps=60, progress=False, traces=False)
    after = _held_out(engine.solver, result.state.solver)
    assert after > before + 0.2, (before, after)
    assert int(result.state.solver.updates) == 60


def _batch(solver, state, difficulty, rewards):
    """A TrainBatch of the given tasks with the given rewards (``f32[B, K]``)."""
    tasks = {"difficulty": jnp.asarray(difficulty, jnp.float32)}
    rollouts = solver.rollout(state, tasks, KEY, rewards.shape[1])
    rollouts = rollouts._replace(rewards=jnp.asarray(rewards, jnp.float32))
    b = rewards.shape[0]
    zeros = jnp.zeros((b,), jnp.int32)
    return TrainBatch(rollouts, solver.credit(rollouts), zeros, zeros)


@pytest.mark.parametrize("scale_by_std", [False, True])
def test_zero_advantage_groups_teach_nothing(scale_by_std):
    solver = synthetic_solver(scale_by_std=scale_by_std)
    state = solver.init(KEY)
    difficulty = [0.1, 0.5, 0.9]
    same = np.array([[1.0] * 4, [0.0] * 4, [1.0] * 4])  # every group scored the same
    new, metrics = jax.jit(solver.update)(state, _batch(solver, state, difficulty, same), KEY)
    assert np.array_equal(np.asarray(new.skill), np.asarray(state.skill))
    assert float(metrics["signal"]) == 0.0

    mixed = np.array([[1.0, 0.0, 1.0, 0.0]] * 3)
    new, metrics = jax.jit(solver.update)(state, _batch(solver, state, difficulty, mixed), KEY)
    gain = np.asarray(new.skill) - np.asarray(state.skill)
    assert np.all(gain >= 0) and gain.max() > 0
    bins = (np.array(difficulty) * 20).astype(int)
    assert set(np.argsort(gain)[-3:].tolist()) == set(bins.tolist())  # learning is local
    assert float(metrics["signal"]) > 0


def test_rollouts_and_credit_shapes():
    solver = synthetic_solver(failure_rate=0.5)
    state = solver.init(KEY)
    assert isinstance(state, SyntheticState)
    tasks = {"difficulty": jnp.linspace(0.0, 1.0, 6, dtype=jnp.float32)}
    rollouts = solver.rollout(state, tasks, KEY, 5)
    assert rollouts.rewards.shape == rollouts.valid.shape == (6, 5)
    assert rollouts.token_mask.shape == (6, 5, 1)
    assert 0 < int(rollouts.valid.sum()) < 30  # some rollouts fail
    adv = solver.credit(rollouts)
    assert adv.shape == (6, 5, 1)
    assert np.all(np.asarray(adv)[~np.asarray(rollouts.valid)] == 0)
    # Group-relative: the advantages of each group's valid rollouts sum to zero.
    np.testing.assert_allclose(np.asarray(adv)[..., 0].sum(1), 0.0, atol=1e-6)
    scores = np.asarray(solver.evaluate(state, tasks, KEY))
    assert np.all((scores >= 0) & (scores <= 1)) and np.all(np.diff(scores) <= 0)
