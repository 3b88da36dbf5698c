"""The grain adapter: batches the curriculum chooses, observed in order, checkpointed with
grain's iterator state plus the curriculum's Orbax item."""

import os

import numpy as np
import pytest

pytest.importorskip("grain")

import curriculax as cx
from curriculax.integrations.grain import (
    CurriculumCheckpoints,
    CurriculumDataset,
    CurriculumIterator,
)
from tests.integrations._common import admitted, host_curriculum, solved

N, B, K = 40, 4, 3


def _records():
    return [{"prompts": f"task {i}", "answer": i * 10} for i in range(N)]


def _curriculum(seed=0):
    return host_curriculum(N, seed)


def _rewards(ids):
    return solved(ids, K)


def _run(it, batches):
    drawn = []
    for _ in range(batches):
        batch = next(it)
        ids = batch["task_id"]
        drawn.append(ids.tolist())
        assert batch["prompts"].tolist() == [f"task {i}" for i in ids]
        assert batch["answer"].tolist() == [i * 10 for i in ids]
        got = it.observe(ids, _rewards(ids))
        assert got.tolist() == [admitted(i, K) for i in ids]
    return drawn


def test_batches_are_the_curriculums_draws():
    cur = _curriculum()
    it = iter(CurriculumDataset(cur, _records(), batch_size=B))
    assert isinstance(it, CurriculumIterator)
    reference = _curriculum()
    for _ in range(5):
        batch = next(it)
        np.testing.assert_array_equal(batch["task_id"], reference.sample(B, exact=True))
        assert batch["task_id"].dtype == np.int32
        it.observe(batch["task_id"], _rewards(batch["task_id"]))
        reference.observe(batch["task_id"], _rewards(batch["task_id"]))
    assert cur.observe_calls == 5 and it.get_state() == {"draws": 5, "in_flight": []}


def test_observe_checks_the_order_of_groups():
    it = iter(CurriculumDataset(_curriculum(), _records(), batch_size=B))
    ids = next(it)["task_id"]
    with pytest.raises(ValueError, match="in the order they were drawn"):
        it.observe(ids[::-1], _rewards(ids[::-1]))
    it.observe(ids[:2], _rewards(ids[:2]))  # a draw may finish in pieces
    assert it.get_state()["in_flight"] == [ids.tolist()]
    it.observe(ids[2:], _rewards(ids[2:]))
    assert it.get_state()["in_flight"] == []


def test_checkpoint_restores_the_same_next_draws(tmp_path):
    it = iter(CurriculumDataset(_curriculum(), _records(), batch_size=B))
    _run(it, 3)
    in_flight = next(it)["task_id"]  # drawn but not finished when the checkpoint is taken
    ckpt = CurriculumCheckpoints(tmp_path / "ckpt")
    ckpt.save(3, it)
    it.observe(in_flight, _rewards(in_flight))
    after = _run(it, 4)

    fresh = iter(CurriculumDataset(_curriculum(seed=123), _records(), batch_size=B))
    assert CurriculumCheckpoints(tmp_path / "ckpt").restore(fresh) == 3
    first = next(fresh)["task_id"]
    assert first.tolist() == in_flight.tolist()  # the in-flight draw is handed out again
    fresh.observe(first, _rewards(first))
    assert _run(fresh, 4) == after
    ckpt.close()


@pytest.mark.parametrize("saved_after", [3, 6])
def test_a_resumed_run_with_a_batch_limit_trains_the_batches_the_whole_run_would(
    tmp_path, saved_after
):
    """``num_batches=6``; a checkpoint after ``saved_after`` batches, two of them in flight
    (one at the limit): the resumed run hands the two out again and draws the rest, so both
    runs train the same six batches (a replayed draw once counted twice, ending early)."""
    dataset = CurriculumDataset(_curriculum(), _records(), batch_size=B, num_batches=6)
    it = iter(dataset)
    _run(it, saved_after - 2)
    in_flight = [next(it)["task_id"] for _ in range(2)]
    ckpt = CurriculumCheckpoints(tmp_path / "ckpt")
    ckpt.save(1, it)
    ckpt.close()
    for ids in in_flight:
        it.observe(ids, _rewards(ids))
    whole = [ids.tolist() for ids in in_flight] + _run(it, 6 - saved_after)
    with pytest.raises(StopIteration):
        next(it)

    fresh = iter(CurriculumDataset(_curriculum(seed=9), _records(), batch_size=B, num_batches=6))
    CurriculumCheckpoints(tmp_path / "ckpt").restore(fresh)
    assert _run(fresh, 8 - saved_after) == whole
    with pytest.raises(StopIteration):
        next(fresh)


def test_restore_refuses_a_different_curriculum(tmp_path):
    it = iter(CurriculumDataset(_curriculum(), _records(), batch_size=B))
    _run(it, 1)
    ckpt = CurriculumCheckpoints(tmp_path / "ckpt")
    ckpt.save(1, it)
    other = cx.HostCurriculum(cx.curriculum(cx.samplers.difficulty_pools(N)), seed=0)
    other_it = iter(CurriculumDataset(other, _records(), batch_size=B))
    with pytest.raises(ValueError, match="gates/zero_advantage"):
        ckpt.restore(other_it)
    assert other_it.get_state() == {"draws": 0, "in_flight": []}
    with pytest.raises(FileNotFoundError, match="step 7"):
        ckpt.restore(it, step=7)


def test_a_failed_save_keeps_the_step_it_was_to_replace(tmp_path, monkeypatch):
    """The snapshot fails (the curriculum cannot give its state): the good checkpoint already
    at that step stays, and a numbered folder that is not a checkpoint stops a save."""
    it = iter(CurriculumDataset(_curriculum(), _records(), batch_size=B))
    _run(it, 1)
    ckpt = CurriculumCheckpoints(tmp_path / "ckpt")
    ckpt.save(1, it)
    _run(it, 1)

    def broken():
        raise RuntimeError("no state")

    monkeypatch.setattr(it.curriculum, "state_dict", broken)
    with pytest.raises(RuntimeError, match="no state"):
        ckpt.save(1, it)
    monkeypatch.undo()
    assert ckpt.steps() == [1]
    fresh = iter(CurriculumDataset(_curriculum(seed=5), _records(), batch_size=B))
    assert ckpt.restore(fresh) == 1 and fresh.get_state()["draws"] == 1
    ckpt.close()

    (tmp_path / "user" / "0").mkdir(parents=True)
    user = CurriculumCheckpoints(tmp_path / "user", max_to_keep=1)
    with pytest.raises(ValueError, match="refusing to save"):
        user.save(4, it)
    user.close()
    assert os.listdir(tmp_path / "user") == ["0"]


def test_records_must_cover_the_pool():
    # Refused at construction when the sampler declares num_tasks, else at the first draw
    # outside the records.
    with pytest.raises(ValueError, match=r"num_tasks=len|outside \[0, 10\)"):
        it = iter(CurriculumDataset(_curriculum(), _records()[:10], batch_size=B))
        for _ in range(N):
            ids = next(it)["task_id"]
            it.observe(ids, _rewards(ids))


def test_answers_reach_a_consistency_curriculum():
    cur = cx.HostCurriculum(
        cx.curriculum(cx.samplers.reward_consistency(N, cx.samplers.uniform(N)))
    )
    it = iter(CurriculumDataset(cur, _records(), batch_size=B))
    ids = next(it)["task_id"]
    rewards = np.tile([1.0, 0.0, 1.0], (B, 1))
    answers = np.tile([5, 5, 6], (B, 1))  # answer 5 got 1 and 0: every group contradicts itself
    answers[0] = [5, 6, 7]  # except the first: each answer one reward
    it.observe(ids, rewards, answers=answers)
    assert cx.samplers.contradicted_tasks(cur._state).tolist() == sorted(ids[1:].tolist())


def _sequential_iterator(num_tasks, batch_size=7):
    cur = cx.HostCurriculum(cx.curriculum(cx.samplers.sequential(num_tasks, shuffle=False)))
    records = [{"prompts": f"task {i}"} for i in range(num_tasks)]
    return iter(CurriculumDataset(cur, records, batch_size=batch_size))


def test_restore_refuses_a_checkpoint_saved_under_another_copy_map(tmp_path):
    """As ``HostCurriculum.restore`` does: per-task state of a pool that repeats tasks lives at
    each task's first entry, so a state saved under one copy map (``entry_task``) must not load
    into a curriculum with another map of the same size."""
    n = 8
    by_four = np.array([0, 1, 2, 3, 0, 1, 2, 3])
    by_pairs = np.array([0, 0, 2, 2, 4, 4, 6, 6])

    def iterator(entry_task):
        sampler = cx.samplers.learnability(n, entry_task=entry_task)
        cur = cx.HostCurriculum(cx.curriculum(sampler), seed=0)
        records = [{"prompts": f"task {i}"} for i in range(n)]
        return iter(CurriculumDataset(cur, records, batch_size=4))

    it = iterator(by_four)
    ids = next(it)["task_id"]
    it.observe(ids, np.tile([1.0, 0.0], (len(ids), 1)))
    ckpt = CurriculumCheckpoints(tmp_path / "ckpt")
    ckpt.save(1, it)
    for entry_task, here in ((by_pairs, r"sha256 \w+"), (None, "none")):
        other = iterator(entry_task)
        before = other.curriculum.state_dict()
        with pytest.raises(
            ValueError,
            match=rf"\n  - copy map \(the sampler's entry_task\) sha256 \w+, this one {here}",
        ):
            ckpt.restore(other)
        after = other.curriculum.state_dict()
        assert all(np.array_equal(before[k], after[k]) for k in before)
    same = iterator(by_four)
    assert ckpt.restore(same) == 1
    saved, restored = it.curriculum.state_dict(), same.curriculum.state_dict()
    assert all(np.array_equal(saved[k], restored[k]) for k in saved)


def test_restore_refuses_a_checkpoint_of_another_pool_size(tmp_path):
    """As ``HostCurriculum.restore`` does: ``sequential``'s state does not depend on the pool
    size, so its cursor 14 of 16 once loaded into a pool of 12 without a word. A checkpoint
    written before the size was saved (no ``num_tasks`` in its data) still restores."""
    it = _sequential_iterator(16)
    for _ in range(2):
        ids = next(it)["task_id"]
        it.observe(ids, np.tile([1.0, 0.0], (7, 1)))
    ckpt = CurriculumCheckpoints(tmp_path / "ckpt")
    ckpt.save(2, it)
    smaller = _sequential_iterator(12)
    before = smaller.curriculum.state_dict()
    with pytest.raises(
        ValueError, match=r"\(step 2\) was saved .*\n  - pool of 16 tasks, this one 12"
    ):
        ckpt.restore(smaller)
    assert smaller.get_state() == {"draws": 0, "in_flight": []}
    after = smaller.curriculum.state_dict()
    assert all(np.array_equal(before[k], after[k]) for k in before)
    same = _sequential_iterator(16)
    assert ckpt.restore(same) == 2 and next(same)["task_id"].tolist() == [14, 15, 0, 1, 2, 3, 4]

    # the data item as saved before it held the pool size
    import grain
    import orbax.checkpoint as ocp

    from curriculax.integrations.grain import _Frozen, _nested

    ckpt._store.save_items(
        3,
        curriculum=ocp.args.StandardSave(_nested(it.curriculum.state_dict())),
        data=grain.checkpoint.CheckpointSave(_Frozen(it.get_state())),
    )
    ckpt._store.wait()
    old = _sequential_iterator(16)
    assert ckpt.restore(old, step=3) == 3 and old.get_state() == it.get_state()
    ckpt.close()


def test_a_failed_record_lookup_hands_the_same_draw_out_at_the_next_call():
    """The lookup raises after the draw was made: the draw is put back, so the next ``next()``
    hands it out (counted once) and its groups observe; it once stayed in flight ahead of
    every later batch, and every observe raised."""

    class Flaky(list):
        fail = True

        def __getitem__(self, i):
            if Flaky.fail and i == 3:
                Flaky.fail = False
                raise OSError("transient read error for record 3")
            return super().__getitem__(i)

    cur = cx.HostCurriculum(cx.curriculum(cx.samplers.sequential(8, shuffle=False)))
    it = iter(CurriculumDataset(cur, Flaky({"p": i} for i in range(8)), batch_size=4))
    with pytest.raises(OSError, match="transient read error"):
        next(it)
    assert it.get_state() == {"draws": 1, "in_flight": [[0, 1, 2, 3]]}
    batch = next(it)
    assert batch["task_id"].tolist() == [0, 1, 2, 3] and batch["p"].tolist() == [0, 1, 2, 3]
    it.observe(batch["task_id"], np.tile([1.0, 0.0], (4, 1)))
    assert it.get_state() == {"draws": 1, "in_flight": []}
    assert next(it)["task_id"].tolist() == [4, 5, 6, 7] and it.ledger.draws == 2


def test_a_bare_curriculum_is_refused_at_construction():
    with pytest.raises(TypeError, match=r"got Curriculum; wrap it: cx.HostCurriculum\("):
        CurriculumDataset(cx.curriculum(cx.samplers.uniform(N)), _records(), batch_size=B)


def test_a_field_of_ragged_values_is_named_and_its_draw_handed_out_again():
    cur = cx.HostCurriculum(cx.curriculum(cx.samplers.sequential(8, shuffle=False)))
    records = [{"prompts": f"t{i}", "tokens": list(range(i + 1))} for i in range(8)]
    it = iter(CurriculumDataset(cur, records, batch_size=4))
    with pytest.raises(ValueError, match=r"field 'tokens' of records \[0, 1, 2, 3\] does not"):
        next(it)
    assert it.get_state() == {"draws": 1, "in_flight": [[0, 1, 2, 3]]}


def test_a_record_holding_the_task_field_is_refused_and_its_draw_handed_out_again():
    cur = cx.HostCurriculum(cx.curriculum(cx.samplers.sequential(8, shuffle=False)))
    records = [{"prompts": f"t{i}", "task_id": f"gsm8k-{i}"} for i in range(8)]
    it = iter(CurriculumDataset(cur, records, batch_size=4))
    with pytest.raises(ValueError, match=r"records\[0\] has a 'task_id' field.*task_field="):
        next(it)
    assert it.get_state() == {"draws": 1, "in_flight": [[0, 1, 2, 3]]}
    cur = cx.HostCurriculum(cx.curriculum(cx.samplers.sequential(8, shuffle=False)))
    renamed = iter(CurriculumDataset(cur, records, batch_size=4, task_field="row"))
    batch = next(renamed)
    assert batch["row"].tolist() == [0, 1, 2, 3]
    assert batch["task_id"].tolist() == [f"gsm8k-{i}" for i in range(4)]


def test_records_with_different_fields_in_one_batch_are_refused():
    # The batch once took its fields from the first record: "answer", missing there, was
    # dropped for the whole batch.
    cur = cx.HostCurriculum(cx.curriculum(cx.samplers.sequential(8, shuffle=False)))
    records = [{"prompts": f"t{i}", **({"answer": str(i)} if i % 2 else {})} for i in range(8)]
    it = iter(CurriculumDataset(cur, records, batch_size=4))
    with pytest.raises(
        ValueError,
        match=r"\['prompts'\] in records \[0, 2\]; \['answer', 'prompts'\] in records \[1, 3\]",
    ):
        next(it)
    assert it.get_state() == {"draws": 1, "in_flight": [[0, 1, 2, 3]]}


MULTIPROCESS = r"""
import curriculax as cx
from curriculax.integrations.grain import CurriculumCheckpoints, CurriculumDataset

records = [{"x": np.int32(i)} for i in range(16)]
cur = cx.HostCurriculum(cx.curriculum(cx.samplers.learnability(16)), seed=pid)
it = iter(CurriculumDataset(cur, records, batch_size=4))
batch = next(it)
it.observe(batch["task_id"], np.ones((4, 8)))
for directory in ("shared", f"own{pid}"):
    try:
        CurriculumCheckpoints(os.path.join(run_dir, directory))
    except ValueError as e:
        print("REFUSED", "works in one process" in str(e), "get_state()" in str(e), flush=True)
it.curriculum.load_state_dict(it.curriculum.state_dict())  # what a trainer keeps instead
it.set_state(it.get_state())
"""


def test_checkpoints_are_refused_on_several_processes(tmp_path):
    """On two processes Orbax kept process 0's curriculum for both (process 1 restored
    process 0's state from a shared directory) or failed (a directory per process)."""
    from tests.scale._processes import PREAMBLE, lines, run_processes

    for out in run_processes(PREAMBLE + MULTIPROCESS, str(tmp_path), timeout=240):
        assert lines(out, "REFUSED") == ["REFUSED True True"] * 2, out[-3000:]
    assert not os.listdir(tmp_path)  # nothing written
