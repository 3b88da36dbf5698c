"""Strict restore says exactly what differs; ``allow_partial`` starts new components fresh and
drops removed ones; a reordered pool keeps its per-task state by key; duplicate keys fail; a
state Orbax cannot save (a zero-size leaf) is refused before anything is trained or written."""

import dataclasses
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from engine_test_helpers import assert_trees_equal, host, id_pool, id_solver, in_order, mod_gate

import curriculax as cx
from curriculax.checkpoint import CheckpointStore
from curriculax.engine import CheckpointMismatch, Engine, EngineConfig, Env, Solver, run
from curriculax.engine._restore import restore
from curriculax.engine.synthetic import synthetic_solver, synthetic_tasks

N = 32
STEPS = 3
CONFIG = EngineConfig(batch_groups=4)


def _a(n=N, gate="even"):
    return Env("a", id_pool(n), cx.curriculum(in_order(n), {gate: mod_gate(2)}), group_size=2)


def _b():
    return Env("b", id_pool(N), cx.curriculum(in_order(N)), group_size=2)


def _c():
    return Env("c", id_pool(N), cx.curriculum(in_order(N)), group_size=2)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A checkpoint at step 3 of envs ``a`` (gate ``even``) and ``b``."""
    run_dir = tmp_path_factory.mktemp("saved")
    engine = Engine(id_solver(), [_a(), _b()], CONFIG)
    result = run(engine, steps=STEPS, run_dir=run_dir, progress=False, config={"note": "x"})
    return run_dir, host(result.state)


@pytest.fixture
def run_dir(saved, tmp_path):
    """A private copy of the saved run (a resume may write to it)."""
    copy = tmp_path / "run"
    shutil.copytree(saved[0], copy)
    return copy


def _mismatch(engine, run_dir) -> list[str]:
    """The bullet lines of the CheckpointMismatch a strict resume raises."""
    with pytest.raises(CheckpointMismatch) as info:
        run(engine, steps=STEPS + 2, run_dir=run_dir, resume=True, progress=False)
    message = str(info.value)
    assert f"checkpoint step {STEPS}" in message
    assert "allow_partial=True" in message
    return [line.strip()[2:] for line in message.splitlines() if line.startswith("  - ")]


def _partial(engine, run_dir):
    store = CheckpointStore(run_dir / "checkpoints")
    try:
        with pytest.warns(UserWarning, match="partial restore of checkpoint step 3") as record:
            state = restore(store, engine, allow_partial=True)
    finally:
        store.close()
    return host(state), "\n".join(str(w.message) for w in record)


def test_strict_restore_names_a_changed_env_set(run_dir):
    engine = Engine(id_solver(), [_a(), _c()], CONFIG)
    assert _mismatch(engine, run_dir) == [
        "envs in the checkpoint but not in this run: ['b'] (their state is dropped)",
        "envs in this run but not in the checkpoint: ['c'] (they start fresh)",
    ]


def test_strict_restore_names_a_renamed_gate(run_dir):
    engine = Engine(id_solver(), [_a(gate="evens"), _b()], CONFIG)
    assert _mismatch(engine, run_dir) == [
        "env 'a': gates ['even'] in the checkpoint and ['evens'] in this run "
        "(renamed? checkpoint gates ['even'], run gates ['evens'])"
    ]


def test_strict_restore_names_a_changed_pool_size(run_dir):
    engine = Engine(id_solver(), [_a(n=48), _b()], CONFIG)
    assert _mismatch(engine, run_dir) == [
        "env 'a': pool size 32 in the checkpoint, 48 now (its curriculum starts fresh)"
    ]


def test_checkpoint_meta_holds_layout_config_and_versions(saved):
    store = CheckpointStore(saved[0] / "checkpoints")
    try:
        meta = store.meta(STEPS)
    finally:
        store.close()
    assert meta["envs"]["a"] == {"num_tasks": N, "group_size": 2, "weight": 1.0, "gates": ["even"]}
    assert meta["envs"]["b"]["gates"] == []
    assert meta["config"] == {"note": "x"}
    assert meta["versions"]["jax"] == jax.__version__
    assert meta["versions"]["curriculax"] == cx.__version__


def test_partial_restore_of_a_changed_env_set(saved, run_dir):
    engine = Engine(id_solver(), [_a(), _c()], CONFIG)
    state, warning = _partial(engine, run_dir)
    assert "['b']" in warning and "['c']" in warning
    old = saved[1]
    assert set(state.curricula) == {"a", "c"}  # b dropped
    assert_trees_equal(state.curricula["a"], old.curricula["a"], "a")
    assert_trees_equal(state.curricula["c"], host(engine.init()).curricula["c"], "c")
    assert_trees_equal(state.solver, old.solver, "solver")
    assert_trees_equal(state.counters, old.counters, "counters")
    assert state.mixer.batches.shape == (2,)

    # And the run goes on from there, env c from scratch.
    with pytest.warns(UserWarning, match="partial restore"):
        result = run(
            engine,
            steps=STEPS + 2,
            run_dir=run_dir,
            resume=True,
            allow_partial=True,
            progress=False,
        )
    s = host(result.state)
    assert int(s.counters.updates) == STEPS + 2
    assert int(s.curricula["c"].groups) == int(s.mixer.groups[1])


@pytest.fixture(scope="module")
def waiting(tmp_path_factory):
    """A checkpoint at step 3 of envs ``a`` and ``b`` whose waiting groups come from both
    envs (rows 0, 2, ... of ``a``, the others of ``b``), with mixer and no-progress counts
    that differ per env."""
    from curriculax.engine import _restore as R

    config = EngineConfig(batch_groups=4, groups_per_generation=7)
    engine = Engine(id_solver(), [_a(), _b()], config)
    state = host(run(engine, steps=STEPS, progress=False).state)
    count = int(state.pending.count)
    assert count >= 2
    env = state.pending.groups.env.copy()
    env[:count] = np.arange(count) % 2
    state = state._replace(
        pending=state.pending._replace(groups=state.pending.groups._replace(env=env)),
        mixer=state.mixer._replace(groups=np.array([21, 14], np.int32)),
        since_progress_by_env=np.array([3, 5], np.int32),
        counters=state.counters._replace(since_progress=np.asarray(8, np.int32)),
    )
    run_dir = tmp_path_factory.mktemp("waiting")
    store = CheckpointStore(run_dir / "checkpoints")
    try:
        R.save(store, STEPS, engine, state)
    finally:
        store.close()
    return run_dir, state, config


def _rows(pending, rows) -> dict:
    g = pending.groups
    return {"env": g.env[rows], "task_ids": g.task_ids[rows], "advantages": g.advantages[rows]}


def test_adding_an_env_keeps_the_waiting_groups_and_per_env_counts(waiting):
    # An added env started every env's waiting groups and counts fresh, though
    # counters.admitted counted those groups.
    run_dir, old, config = waiting
    state, warning = _partial(Engine(id_solver(), [_a(), _b(), _c()], config), run_dir)
    count = int(old.pending.count)
    assert int(state.pending.count) == count
    assert_trees_equal(state.pending, old.pending, "pending")
    assert state.mixer.groups.tolist() == [21, 14, 0]
    assert state.mixer.batches.tolist() == [*old.mixer.batches.tolist(), 0]
    assert state.since_progress_by_env.tolist() == [3, 5, 0]
    assert int(state.counters.since_progress) == 8
    fresh = warning.split("fresh state for: ")[1]
    for path in ("pending", "mixer", "since_progress_by_env"):
        assert f"'{path}'" not in fresh, fresh


def test_removing_an_env_drops_only_its_waiting_groups(waiting):
    # b kept (now second, after the new c), a removed: b's rows keep their order and point at
    # b's new index, a's rows are dropped and counted in the warning.
    run_dir, old, config = waiting
    state, warning = _partial(Engine(id_solver(), [_c(), _b()], config), run_dir)
    count = int(old.pending.count)
    of_b = np.flatnonzero(old.pending.groups.env[:count] == 1)
    assert int(state.pending.count) == of_b.size
    got, want = _rows(state.pending, slice(0, of_b.size)), _rows(old.pending, of_b)
    assert got["env"].tolist() == [1] * of_b.size
    for field in ("task_ids", "advantages"):
        np.testing.assert_array_equal(got[field], want[field])
    assert not np.asarray(state.pending.groups.task_ids)[of_b.size :].any()  # zeros past it
    assert state.mixer.groups.tolist() == [0, 14]
    assert state.since_progress_by_env.tolist() == [0, 5]
    # the total is the kept env's: a's 3 groups no longer count toward the stall guard
    assert int(state.counters.since_progress) == 5
    dropped = count - of_b.size
    assert f"{dropped} admitted group(s) of the envs ['a'] were waiting to train" in warning


def test_an_added_env_with_another_pending_capacity_drops_the_waiting_groups(waiting):
    run_dir, _, config = waiting
    bigger = dataclasses.replace(config, pending_capacity=config.capacity + 4)
    state, warning = _partial(Engine(id_solver(), [_a(), _b(), _c()], bigger), run_dir)
    assert int(state.pending.count) == 0
    assert "engine/pending: the waiting groups' layout differs" in warning
    assert state.mixer.groups.tolist() == [21, 14, 0]  # the per-env counts still follow


def test_partial_restore_of_a_renamed_gate_keeps_the_sampler(saved, run_dir):
    engine = Engine(id_solver(), [_a(gate="evens"), _b()], CONFIG)
    state, warning = _partial(engine, run_dir)
    assert "gates ['even'] in the checkpoint and ['evens'] in this run" in warning
    old = saved[1]
    assert int(old.curricula["a"].gates["even"].calls) > 0
    assert int(state.curricula["a"].gates["evens"].calls) == 0  # fresh
    assert_trees_equal(state.curricula["a"].sampler, old.curricula["a"].sampler, "sampler")
    assert_trees_equal(state.curricula["b"], old.curricula["b"], "b")
    assert_trees_equal(state.pending, old.pending, "pending")
    assert_trees_equal(state.solver, old.solver, "solver")


def test_partial_restore_of_a_changed_pool_size(saved, run_dir):
    engine = Engine(id_solver(), [_a(n=48), _b()], CONFIG)
    state, warning = _partial(engine, run_dir)
    assert "pool size 32 in the checkpoint, 48 now" in warning
    old = saved[1]
    assert_trees_equal(state.curricula["a"], host(engine.init()).curricula["a"], "a")
    assert_trees_equal(state.curricula["b"], old.curricula["b"], "b")
    assert_trees_equal(state.solver, old.solver, "solver")


# ------------------------------------------------------------------ reordered pools


def _pools_engine(tasks):
    n = len(tasks["difficulty"])
    env = Env("p", tasks, cx.curriculum(cx.samplers.difficulty_pools(n)), group_size=4)
    return Engine(synthetic_solver(), [env], EngineConfig(batch_groups=6, groups_per_generation=4))


@pytest.fixture(scope="module")
def pools_run(tmp_path_factory):
    """Difficulty pools over 32 tasks, 5 updates (8 batches of 4: every task scored, 2 wait)."""
    run_dir = tmp_path_factory.mktemp("pools")
    tasks = synthetic_tasks(32, seed=5)
    engine = _pools_engine(tasks)
    result = run(engine, steps=5, run_dir=run_dir, progress=False)
    return run_dir, tasks, engine.envs[0].keys, host(result.state)


def test_restore_onto_a_reordered_pool_follows_the_keys(pools_run, tmp_path):
    src, tasks, keys, old = pools_run
    assert old.curricula["p"].sampler.scored.all()
    assert len(set(old.curricula["p"].sampler.scores.tolist())) > 1
    assert int(old.pending.count) == 2
    run_dir = tmp_path / "run"
    shutil.copytree(src, run_dir)

    perm = np.random.default_rng(0).permutation(32)
    engine = _pools_engine({"difficulty": np.asarray(tasks["difficulty"])[perm]})
    new_keys = engine.envs[0].keys
    assert new_keys.tolist() == keys[perm].tolist()  # same tasks, same keys, new order

    store = CheckpointStore(run_dir / "checkpoints")
    try:
        state = host(restore(store, engine))  # strict: a reordered pool is no mismatch
    finally:
        store.close()
    old_s, new_s = old.curricula["p"].sampler, state.curricula["p"].sampler
    by_key_old = dict(zip(keys.tolist(), old_s.scores.tolist()))
    by_key_new = dict(zip(new_keys.tolist(), new_s.scores.tolist()))
    assert by_key_new == by_key_old
    for field in ("scored", "seen"):
        old_f = dict(zip(keys.tolist(), getattr(old_s, field).tolist()))
        assert dict(zip(new_keys.tolist(), getattr(new_s, field).tolist())) == old_f
    # Waiting groups still point at the same tasks.
    count = int(old.pending.count)
    assert int(state.pending.count) == count
    old_ids, new_ids = old.pending.groups.task_ids[:count], state.pending.groups.task_ids[:count]
    assert new_keys[new_ids].tolist() == keys[old_ids].tolist()
    assert_trees_equal(state.solver, old.solver, "solver")

    result = run(engine, steps=8, run_dir=run_dir, resume=True, progress=False)
    assert int(result.state.counters.updates) == 8


def _copies_engine(tasks, sampler):
    n = len(tasks["difficulty"])
    entry_task = _first_equal(tasks["difficulty"])
    env = Env("p", tasks, cx.curriculum(sampler(n, entry_task)), group_size=4)
    return Engine(synthetic_solver(), [env], EngineConfig(batch_groups=6, groups_per_generation=4))


@pytest.mark.parametrize(
    "sampler",
    [
        lambda n, e: cx.samplers.learnability(n, entry_task=e),
        lambda n, e: cx.samplers.floor(
            n, cx.samplers.learning_progress(n, entry_task=e), uniform_share=0.2
        ),
    ],
    ids=["learnability", "floor(learning_progress)"],
)
def test_restore_onto_a_reordered_pool_of_copies_keeps_each_tasks_state(sampler, tmp_path):
    # 16 tasks, two copies each (their own keys). A sampler given entry_task keeps a task's
    # state at its first entry; restored onto an order that puts the other copy first for
    # about half the tasks, each task's state must be at its new first entry, and copies'
    # slots stay fresh. Before, those tasks started fresh.
    d = np.asarray(synthetic_tasks(16, seed=5)["difficulty"])
    tasks = {"difficulty": np.repeat(d, 2), "copy": np.tile(np.arange(2, dtype=np.int32), 16)}
    run_dir = tmp_path / "run"
    first = run(_copies_engine(tasks, sampler), steps=5, run_dir=run_dir, progress=False)
    keys = _copies_engine(tasks, sampler).envs[0].keys
    old = _sampler_fields(host(first.state).curricula["p"].sampler)
    assert old["seen"][::2].all() and not old["seen"][1::2].any()  # at first entries only

    perm = np.random.default_rng(2).permutation(32)
    moved = {k: v[perm] for k, v in tasks.items()}
    engine = _copies_engine(moved, sampler)
    new_keys = engine.envs[0].keys
    store = CheckpointStore(run_dir / "checkpoints")
    try:
        state = host(restore(store, engine))
    finally:
        store.close()
    new = _sampler_fields(state.curricula["p"].sampler)
    fresh = _sampler_fields(host(engine.init()).curricula["p"].sampler)
    new_first = _first_equal(moved["difficulty"]) == np.arange(32)
    old_row = {k: i for i, k in enumerate(keys.tolist())}
    rows = np.array([old_row[k] for k in new_keys.tolist()])  # each new entry's saved row
    switched = new_first & (rows % 2 == 1)  # the saved second copy now comes first
    assert 4 <= switched.sum() <= 12
    for field, values in old.items():
        # Each task's state sits at its new first entry, whichever copy that is ...
        np.testing.assert_array_equal(new[field][new_first], values[rows[new_first] // 2 * 2])
        # ... and the other copies' slots are as fresh as before.
        np.testing.assert_array_equal(new[field][~new_first], fresh[field][~new_first])

    result = run(engine, steps=8, run_dir=run_dir, resume=True, progress=False)
    assert int(result.state.counters.updates) == 8


def _first_equal(values) -> np.ndarray:
    """Each entry's task as the index of its first entry with an equal value."""
    _, first, inverse = np.unique(np.asarray(values), return_index=True, return_inverse=True)
    return first[inverse.reshape(-1)]


def _sampler_fields(state) -> dict[str, np.ndarray]:
    """The per-task fields kept at first entries, from a sampler's state (or its inner one)."""
    state = getattr(state, "inner", state)
    return {f: np.asarray(getattr(state, f)) for f in type(state).PER_TASK}


def test_restore_onto_a_different_task_set_is_a_mismatch(pools_run, tmp_path):
    src, tasks, _, _ = pools_run
    run_dir = tmp_path / "run"
    shutil.copytree(src, run_dir)
    difficulty = np.array(tasks["difficulty"])
    difficulty[:8] += 1e-3  # 8 tasks changed: their content keys are new
    engine = _pools_engine({"difficulty": difficulty})
    with pytest.raises(CheckpointMismatch, match=r"env 'p': 8 of 32 task keys are not in"):
        run(engine, steps=8, run_dir=run_dir, resume=True, progress=False)


def test_duplicate_task_keys_are_named():
    with pytest.raises(ValueError, match=r"duplicated: key 5 at rows \[1, 3\]") as info:
        Env("d", id_pool(4), keys=np.array([1, 5, 7, 5], np.uint32))
    assert "env 'd'" in str(info.value)
    twice = {"x": np.array([3, 4, 3, 9], np.int32)}  # content keys: rows 0 and 2 are equal
    with pytest.raises(ValueError, match=r"at rows \[0, 2\]"):
        Env("e", twice)


def test_restore_mid_warm_up_onto_a_reordered_pool_dispatches_every_task(tmp_path):
    # One update (2 generation batches of 4: 8 of 32 tasks dispatched), then a restore onto
    # the reordered pool: the rest of warm-up must reach the 24 others. A warm-up counter
    # into a fixed order lost some of them for good.
    tasks = synthetic_tasks(32, seed=5)
    run_dir = tmp_path / "run"
    first = run(_pools_engine(tasks), steps=1, run_dir=run_dir, progress=False)
    assert int(np.sum(host(first.state).curricula["p"].sampler.seen)) == 8

    perm = np.random.default_rng(1).permutation(32)
    engine = _pools_engine({"difficulty": np.asarray(tasks["difficulty"])[perm]})
    result = run(engine, steps=5, run_dir=run_dir, resume=True, progress=False)
    # 5 updates need 30 groups: 8 batches of 4 = 32 dispatches, so warm-up just completes.
    sampler = host(result.state).curricula["p"].sampler
    assert sampler.seen.all(), np.flatnonzero(~sampler.seen)


def test_restore_onto_a_reordered_pool_keeps_the_ids_of_pending_frontier_tasks(tmp_path):
    # A frontier sampler's generated tasks have ids N + slot, past the pool: a reordered pool
    # moves the pending seed rows by key and leaves those ids alone. They were clipped onto
    # seed task N - 1 and remapped with it.
    import jax.numpy as jnp

    from curriculax.selfplay import frontier_sampler

    n, f = 12, 8
    tasks = synthetic_tasks(n)
    layout = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), tasks)

    def build(pool):
        fr = frontier_sampler(cx.samplers.uniform(n), n, layout, capacity=f, frontier_share=0.5)
        env = Env("train", pool, cx.curriculum(fr.sampler), 4)
        return fr, Engine(
            synthetic_solver(), [env], EngineConfig(batch_groups=4, groups_per_generation=6)
        )

    fr, engine = build(tasks)
    state = engine.init(jax.random.key(0))
    fs = fr.insert(
        state.curricula["train"].sampler,
        {"difficulty": jnp.full((f,), 0.5, jnp.float32) + jnp.arange(f) * 1e-3},
        jnp.ones(f, bool),
        jnp.arange(100, 100 + f, dtype=jnp.uint32),
        0,
        jnp.arange(f, dtype=jnp.uint32),
        0,
    )
    state = state._replace(curricula={"train": state.curricula["train"]._replace(sampler=fs)})
    run_dir = tmp_path / "run"
    old = host(run(engine, steps=2, state=state, run_dir=run_dir, progress=False).state)
    count = int(old.pending.count)
    old_ids = old.pending.groups.task_ids[:count]
    assert (old_ids >= n).any() and (old_ids < n).any()

    perm = np.arange(n)[::-1]
    _, engine2 = build(jax.tree.map(lambda x: np.asarray(x)[perm], tasks))
    keys, new_keys = engine.envs[0].keys, engine2.envs[0].keys
    assert new_keys.tolist() == keys[perm].tolist()
    store = CheckpointStore(run_dir / "checkpoints")
    try:
        restored = host(restore(store, engine2))
    finally:
        store.close()
    new_ids = restored.pending.groups.task_ids[:count]
    seed = old_ids < n
    assert new_keys[new_ids[seed]].tolist() == keys[old_ids[seed]].tolist()
    assert new_ids[~seed].tolist() == old_ids[~seed].tolist()


def test_a_checkpoint_from_before_the_per_env_counter_was_renamed_restores_exactly(
    saved, tmp_path, recwarn
):
    """``EngineState.since_progress`` (``i32[E]``) became ``since_progress_by_env``, apart from
    ``Counters.since_progress`` (``i32[]``); a checkpoint that holds the old name restores
    strictly, the leaf moved over, nothing else touched."""
    import collections

    from curriculax.checkpoint import leaf_layout
    from curriculax.engine import EngineState
    from curriculax.engine import _restore as R

    engine = Engine(id_solver(), [_a(), _b()], CONFIG)
    assert "since_progress_by_env" in leaf_layout(engine.init())
    assert "since_progress" not in leaf_layout(engine.init())
    fields = ["since_progress" if f == "since_progress_by_env" else f for f in EngineState._fields]
    OldState = collections.namedtuple("EngineState", fields)
    _, state = saved
    # A value no fresh state holds, so a restore that left the leaf fresh would be caught.
    state = state._replace(since_progress_by_env=np.array([5, 7], np.int32))
    store = CheckpointStore(tmp_path / "old")
    try:
        R.save(store, STEPS, engine, OldState(*state), {"note": "x"})
        store.wait()
        assert "since_progress" in store.meta(STEPS)["layout"]
        assert "since_progress_by_env" not in store.meta(STEPS)["layout"]
        restored = host(restore(store, engine, config={"note": "x"}))
    finally:
        store.close()
    assert_trees_equal(restored, state, "restored")
    assert not [w for w in recwarn if "partial restore" in str(w.message)]


def _with_empty_leaf(solver: Solver) -> Solver:
    """``solver`` with a zero-size array beside its state: ``{"inner": state, "empty": f32[0]}``."""

    def update(state, batch, key):
        inner, metrics = solver.update(state["inner"], batch, key)
        return {"inner": inner, "empty": state["empty"]}, metrics

    return Solver(
        lambda key: {"inner": solver.init(key), "empty": jnp.zeros((0,), jnp.float32)},
        lambda state, tasks, key, k: solver.rollout(state["inner"], tasks, key, k),
        solver.credit,
        update,
        lambda state, tasks, key: solver.evaluate(state["inner"], tasks, key),
    )


def test_a_zero_size_leaf_is_refused_before_the_first_update_of_a_checkpointed_run(tmp_path):
    # Orbax cannot save it: the run used to train up to its first checkpoint and then fail
    # with advice about the disk.
    engine = Engine(_with_empty_leaf(id_solver()), [_b()], CONFIG)
    updates = []
    with pytest.raises(ValueError, match="Orbax cannot save zero-size arrays") as info:
        run(
            engine,
            steps=STEPS,
            run_dir=tmp_path,
            progress=False,
            on_update=lambda state, record: updates.append(record["step"]),
        )
    assert "solver/empty (float32[0])" in str(info.value)
    assert "disk" not in str(info.value)
    assert updates == [] and not (tmp_path / "metrics.jsonl").exists()
    # Without a run directory nothing is saved: such a state is fine.
    assert int(run(engine, steps=STEPS, progress=False).state.counters.updates) == STEPS
    # The refused run left nothing that stops a fresh one in its directory.
    fixed = run(Engine(id_solver(), [_b()], CONFIG), steps=STEPS, run_dir=tmp_path, progress=False)
    assert fixed.stopped == "completed"


def test_a_store_refuses_a_zero_size_leaf_before_writing(tmp_path):
    store = CheckpointStore(tmp_path / "ck")
    state = {"a": jnp.ones(2), "b": {"c": jnp.zeros((3, 0), jnp.int32)}}
    with pytest.raises(ValueError, match="Orbax cannot save zero-size arrays") as info:
        store.save(1, state, {"note": "x"})
    assert "b/c (int32[3, 0])" in str(info.value) and "a (" not in str(info.value)
    store.close()  # nothing in flight, nothing failed
    assert store.steps() == []
