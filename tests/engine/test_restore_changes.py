"""Resuming after a change the env-level checks do not name: a sampler or solver whose state
lost fields, a gate added or removed beside others, another pending capacity; and the run
config's edge values (NaN, ``{}``, values JSON cannot write), and typed PRNG keys in state."""

import dataclasses
import functools
import json

import jax
import numpy as np
import pytest
from engine_test_helpers import assert_trees_equal, host, id_pool, id_solver, in_order, mod_gate

import curriculax as cx
from curriculax.checkpoint import CheckpointStore
from curriculax.engine import CheckpointMismatch, Engine, EngineConfig, Env, run
from curriculax.engine._restore import config_changes, restore

N = 16
CONFIG = EngineConfig(batch_groups=4)


def _env(sampler=None, gates=None):
    return Env("a", id_pool(N), cx.curriculum(sampler or in_order(N), gates), group_size=2)


def _partial(engine, run_dir):
    store = CheckpointStore(run_dir / "checkpoints")
    try:
        with pytest.warns(UserWarning, match="partial restore of checkpoint") as record:
            state = restore(store, engine, allow_partial=True)
    finally:
        store.close()
    return host(state), "\n".join(str(w.message) for w in record)


def test_a_sampler_whose_state_lost_fields_is_named_not_called_damaged(tmp_path):
    first = Engine(id_solver(), [_env(cx.samplers.learning_progress(N))], CONFIG)
    saved = host(run(first, steps=3, run_dir=tmp_path, progress=False).state)
    engine = Engine(id_solver(), [_env(cx.samplers.learnability(N))], CONFIG)
    with pytest.raises(CheckpointMismatch) as info:
        run(engine, steps=5, run_dir=tmp_path, resume=True, progress=False)
    message = str(info.value)
    assert "engine/curricula/a/sampler/cross: in the checkpoint, not in this run" in message
    assert "damaged" not in message and "delete" not in message

    state, warning = _partial(engine, tmp_path)
    assert "sampler/cross: in the checkpoint, not in this run" in warning
    old = saved.curricula["a"].sampler
    for field in state.curricula["a"].sampler._fields:  # the fields both samplers keep
        np.testing.assert_array_equal(
            getattr(state.curricula["a"].sampler, field), getattr(old, field)
        )
    assert_trees_equal(state.solver, saved.solver, "solver")
    with pytest.warns(UserWarning, match="partial restore"):
        result = run(
            engine, steps=5, run_dir=tmp_path, resume=True, allow_partial=True, progress=False
        )
    assert result.stopped == "completed" and int(result.state.counters.updates) == 5


@pytest.mark.parametrize("change", ["added", "removed"])
def test_adding_or_removing_a_gate_keeps_the_other_gates_state(tmp_path, change):
    two = {"even": mod_gate(2), "extra": mod_gate(1)}
    one = {"even": mod_gate(2)}
    before, after = (one, two) if change == "added" else (two, one)
    first = Engine(id_solver(), [_env(gates=before)], CONFIG)
    saved = host(run(first, steps=3, run_dir=tmp_path, progress=False).state)
    assert int(saved.curricula["a"].gates["even"].calls) > 0
    engine = Engine(id_solver(), [_env(gates=after)], CONFIG)
    state, warning = _partial(engine, tmp_path)
    assert_trees_equal(state.curricula["a"].gates["even"], saved.curricula["a"].gates["even"])
    if change == "added":
        assert int(state.curricula["a"].gates["extra"].calls) == 0  # fresh
        assert "fresh state for: ['curricula/a/gates/extra']" in warning
    else:
        assert set(state.curricula["a"].gates) == {"even"} and "fresh state for" not in warning


def test_another_pending_capacity_starts_the_waiting_groups_fresh(tmp_path):
    """The pending rows were laid out anew while ``pending/count`` kept its saved value: the
    next update trained on empty rows."""
    size = dict(batch_groups=4, groups_per_generation=6)
    first = Engine(id_solver(), [_env()], EngineConfig(**size))
    saved = host(run(first, steps=1, run_dir=tmp_path, progress=False).state)
    assert int(saved.pending.count) > 0
    engine = Engine(id_solver(), [_env()], EngineConfig(**size, pending_capacity=12))
    with pytest.raises(CheckpointMismatch, match="groups waiting to train are dropped"):
        run(engine, steps=2, run_dir=tmp_path, resume=True, progress=False)
    state, warning = _partial(engine, tmp_path)
    assert int(state.pending.count) == 0
    assert "groups waiting to train are dropped" in warning and "'pending'" in warning
    with pytest.warns(UserWarning, match="partial restore"):
        result = run(
            engine, steps=2, run_dir=tmp_path, resume=True, allow_partial=True, progress=False
        )
    solver = host(result.state.solver)
    assert (solver.nvalid[: int(solver.cursor)] == 2).all()  # no empty row trained


def test_nan_in_the_config_equals_itself():
    assert config_changes({"clip": float("nan")}, {"clip": float("nan")}) == {}
    assert config_changes({"clip": [1, float("nan")]}, {"clip": [1, float("nan")]}) == {}
    assert list(config_changes({"clip": float("nan")}, {"clip": 1.0})) == ["clip"]


def test_a_strict_resume_with_a_nan_in_the_config_goes_on(tmp_path):
    engine = Engine(id_solver(), [_env()], CONFIG)
    run(engine, steps=2, run_dir=tmp_path, progress=False, config={"clip": float("nan")})
    result = run(
        engine, steps=3, run_dir=tmp_path, resume=True, progress=False, config={"clip": np.nan}
    )
    assert result.stopped == "completed"


def test_an_empty_config_is_compared_not_taken_for_none(tmp_path):
    assert config_changes({"lr": 0.1}, {}) == {"lr": [0.1, "(absent)"]}
    assert config_changes({"lr": 0.1}, None) == {}
    engine = Engine(id_solver(), [_env()], CONFIG)
    run(engine, steps=2, run_dir=tmp_path, progress=False, config={"lr": 0.1})
    with pytest.raises(CheckpointMismatch, match=r"config lr: 0\.1 -> '\(absent\)'"):
        run(engine, steps=3, run_dir=tmp_path, resume=True, progress=False, config={})


def test_resumable_keys_may_change_and_are_recorded(tmp_path):
    """A stop condition held in the config (``experiments.grpo``'s ``stop_at_target``) changes
    no state; a resume changing it was refused as a mismatch."""
    engine = Engine(id_solver(), [_env()], CONFIG)
    run(
        engine,
        steps=2,
        run_dir=tmp_path,
        progress=False,
        config={"lr": 0.1, "stop": {"target": 0.5}},
    )
    resume = functools.partial(run, engine, run_dir=tmp_path, resume=True, progress=False)
    later = {"lr": 0.1, "stop": {"target": 0.9}}
    with pytest.raises(CheckpointMismatch, match=r"config stop\.target: 0\.5 -> 0\.9"):
        resume(steps=3, config=later)
    result = resume(steps=3, config=later, resumable=["stop.target"])
    assert result.stopped == "completed" and result.summary["config"] == later
    assert result.summary["config_changes"] == [{"step": 2, "changes": {"stop.target": [0.5, 0.9]}}]
    other = {"lr": 0.2, "stop": {"target": 0.9}}  # the other keys are still compared
    with pytest.raises(CheckpointMismatch, match=r"config lr: 0\.1 -> 0\.2"):
        resume(steps=4, config=other, resumable=["stop.target"])
    with pytest.raises(TypeError, match="resumable must be a sequence of config keys"):
        resume(steps=4, resumable="lr")


def test_a_config_json_cannot_write_is_refused_before_training(tmp_path):
    engine = Engine(id_solver(), [_env()], CONFIG)
    trained = []
    with pytest.raises(ValueError, match=r"key 'opt\.lr' holds TypeError: .*float32"):
        run(
            engine,
            steps=4,
            run_dir=tmp_path,
            checkpoint_every=2,
            progress=False,
            config={"opt": {"lr": np.float32(0.1)}},
            on_update=lambda state, record: trained.append(record["step"]),
        )
    assert trained == [] and not (tmp_path / "metrics.jsonl").exists()
    json.dumps({"fine": [1, 2.5, "x", None, float("nan")]})
    run(engine, steps=1, run_dir=tmp_path, progress=False, config={"fine": [1, float("nan")]})


def _keyed_solver():
    """The id solver with a typed PRNG key beside its state (as flax nnx.Rngs keeps one)."""
    base = id_solver()

    def update(state, batch, key):
        out = base.update(state[0], batch, key)
        return ((out[0], jax.random.fold_in(state[1], 1)), *out[1:])

    return base._replace(
        init=lambda key: (base.init(key), jax.random.key(0)),
        rollout=lambda s, t, k, g: base.rollout(s[0], t, k, g),
        update=update,
        evaluate=lambda s, t, k: base.evaluate(s[0], t, k),
    )


def test_a_typed_prng_key_in_state_is_checkpointed_and_resumed(tmp_path):
    engine = Engine(_keyed_solver(), [_env()], CONFIG)
    whole = run(engine, steps=4, progress=False)
    run(engine, steps=2, run_dir=tmp_path, progress=False)
    store = CheckpointStore(tmp_path / "checkpoints")
    try:
        assert store.meta(2)["layout"]["solver/1"] == [[], "key<fry>"]
    finally:
        store.close()
    resumed = run(engine, steps=4, run_dir=tmp_path, resume=True, progress=False)

    def data(x):
        return jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.extended) else x

    jax.tree.map(
        lambda a, b: np.testing.assert_array_equal(data(a), data(b)),
        resumed.state.solver,
        whole.state.solver,
    )
    # A partial restore (another env weight) takes the key leaf by path too.
    heavier = Engine(_keyed_solver(), [dataclasses.replace(_env(), weight=2.0)], CONFIG)
    store = CheckpointStore(tmp_path / "checkpoints")
    try:
        with pytest.warns(UserWarning, match="weight 1.0 in the checkpoint, 2.0 now"):
            state = restore(store, heavier, allow_partial=True)
    finally:
        store.close()
    np.testing.assert_array_equal(
        jax.random.key_data(state.solver[1]), jax.random.key_data(resumed.state.solver[1])
    )
