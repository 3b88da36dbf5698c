"""What a strict resume compares beyond the envs' own settings: the order the envs are listed
in (the engine keeps per-env state by position) and the batch sizes ``B`` and ``G``."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from engine_test_helpers import host, id_pool, id_solver, in_order

import curriculax as cx
from curriculax.engine import CheckpointMismatch, Engine, EngineConfig, Env, _restore, run

N = 32
# B = 4, G = 3: a group waits in the pending batch at every checkpoint.
CONFIG = EngineConfig(batch_groups=4, groups_per_generation=3, seed=1)


def _envs(order: str) -> list[Env]:
    """Envs ``a`` (task ids 0..31) and ``b`` (task ids 100..131), listed in ``order``."""
    envs = {
        "a": Env("a", id_pool(N), cx.curriculum(in_order(N)), group_size=2),
        "b": Env(
            "b", {"id": jnp.arange(100, 100 + N, dtype=jnp.int32)}, cx.curriculum(in_order(N))
        ),
    }
    return [envs[name] for name in order]


def _saved(run_dir) -> dict:
    """Runs envs ``a, b`` for 2 updates; the saved per-env state by env name."""
    result = run(Engine(id_solver(), _envs("ab"), CONFIG), steps=2, run_dir=run_dir, progress=False)
    return _by_name(host(result.state), ("a", "b"))


def _by_name(state, names) -> dict:
    count = int(state.pending.count)
    assert count > 0  # the test needs a waiting group
    return {
        "batches": dict(zip(names, state.mixer.batches.tolist())),
        "groups": dict(zip(names, state.mixer.groups.tolist())),
        "since": dict(zip(names, state.since_progress_by_env.tolist())),
        "pending": [names[i] for i in state.pending.groups.env[:count]],
        "mixed": state.mixer.groups.tolist() != state.mixer.groups.tolist()[::-1],
    }


def test_envs_listed_in_another_order_are_a_mismatch(tmp_path):
    _saved(tmp_path)
    engine = Engine(id_solver(), _envs("ba"), CONFIG)
    with pytest.raises(CheckpointMismatch) as info:
        run(engine, steps=3, run_dir=tmp_path, resume=True, progress=False)
    message = str(info.value)
    assert "envs in the order ['a', 'b'] in the checkpoint, ['b', 'a'] in this run" in message
    assert "list them in the checkpoint's order" in message


def test_allow_partial_moves_the_per_env_state_to_the_new_order(tmp_path):
    saved = _saved(tmp_path)
    assert saved["mixed"]  # the two envs' counts differ, so a swap would show
    engine = Engine(id_solver(), _envs("ba"), CONFIG)
    with pytest.warns(UserWarning, match="envs in the order"):
        restored = run(
            engine, steps=2, run_dir=tmp_path, resume=True, allow_partial=True, progress=False
        )
    got = _by_name(host(restored.state), ("b", "a"))
    assert {k: got[k] for k in ("batches", "groups", "since", "pending")} == {
        k: saved[k] for k in ("batches", "groups", "since", "pending")
    }
    # Trained on after the resume (the waiting group first): every row's env label agrees
    # with the task it came from. (The id solver's record of earlier rows keeps the old
    # positions: a solver's own state is not remapped.)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        more = run(
            engine, steps=4, run_dir=tmp_path, resume=True, allow_partial=True, progress=False
        )
    solver = jax.device_get(more.state.solver)
    rows = slice(2 * CONFIG.batch_groups, int(solver.cursor))
    labels = [engine.env_names[i] for i in solver.envs[rows]]
    tasks = solver.data_ids[rows].tolist()
    assert len(labels) == 2 * CONFIG.batch_groups
    assert all((name == "b") == (task >= 100) for name, task in zip(labels, tasks))


def test_a_checkpoint_without_the_env_order_restores_as_before(tmp_path, monkeypatch):
    """Checkpoints written before the order was saved are not checked for it."""
    meta = _restore.engine_meta

    def old_meta(*args, **kwargs):
        out = meta(*args, **kwargs)
        out.pop("env_order", None)
        return out

    monkeypatch.setattr(_restore, "engine_meta", old_meta)
    _saved(tmp_path)
    engine = Engine(id_solver(), _envs("ba"), CONFIG)
    result = run(engine, steps=2, run_dir=tmp_path, resume=True, progress=False)
    assert result.stopped == "already_complete"


def test_changed_batch_sizes_are_a_mismatch(tmp_path):
    first = EngineConfig(batch_groups=4, groups_per_generation=8)
    run(Engine(id_solver(), _envs("a"), first), steps=2, run_dir=tmp_path, progress=False)
    # The same pending capacity (12), so the state's layout alone would not tell.
    changed = EngineConfig(batch_groups=8, groups_per_generation=4)
    engine = Engine(id_solver(), _envs("a"), changed)
    with pytest.raises(CheckpointMismatch) as info:
        run(engine, steps=4, run_dir=tmp_path, resume=True, progress=False)
    message = str(info.value)
    assert "batch_groups: 4 in the checkpoint, 8 in this run" in message
    assert "groups_per_generation: 8 in the checkpoint, 4 in this run" in message
    with pytest.warns(UserWarning, match="batch_groups: 4 in the checkpoint"):
        result = run(
            engine, steps=3, run_dir=tmp_path, resume=True, allow_partial=True, progress=False
        )
    assert result.stopped == "completed" and int(result.state.counters.updates) == 3
    assert np.isfinite(result.metrics["batch/reward_mean"])
