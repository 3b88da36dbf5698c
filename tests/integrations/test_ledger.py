"""The adapters' shared helpers that need no trainer: the gates' zero-advantage rows and the
draw ledger (what it counts, replays and refuses)."""

import numpy as np
import pytest

from curriculax.integrations._ledger import GATES, check_gates, rows_to_keep


def test_rows_to_keep_zeroes_the_rows_of_rejected_groups():
    admitted = np.array([True, False, True])
    keep = rows_to_keep("zero_advantages", admitted, 2, 6)
    assert keep.tolist() == [True, True, False, False, True, True]


def test_rows_to_keep_is_none_when_nothing_is_zeroed():
    assert rows_to_keep("log", np.array([True, False]), 2, 4) is None
    assert rows_to_keep("zero_advantages", None, 2, 4) is None
    assert rows_to_keep("zero_advantages", np.array([True, True]), 2, 4) is None


def test_rows_to_keep_refuses_groups_that_do_not_make_the_rows():
    with pytest.raises(ValueError, match="2 groups of 2 do not match 5 advantage rows"):
        rows_to_keep("zero_advantages", np.array([True, True]), 2, 5)


def test_check_gates_names_the_choices():
    assert [check_gates(g) for g in GATES] == list(GATES)
    with pytest.raises(ValueError, match=r"gates must be one of \('zero_advantages', 'log'\)"):
        check_gates("zero")


def _ledger():
    import curriculax as cx
    from curriculax.integrations._ledger import DrawLedger

    cur = cx.HostCurriculum(
        cx.curriculum(cx.samplers.uniform(10), gates={"c": cx.gates.reward_consistency(10)})
    )
    return cur, DrawLedger(cur, 10)


def test_a_failed_observe_leaves_its_groups_in_flight():
    """The curriculum refuses the groups (no answers for its consistency gate): the ledger
    must not mark them observed, so the corrected retry is accepted."""
    cur, ledger = _ledger()
    ids = ledger.draw(4)
    with pytest.raises(ValueError, match="answers"):
        ledger.observe(ids, np.ones((4, 3), np.float32))
    assert [d.tolist() for d in ledger.in_flight] == [ids.tolist()]
    assert cur.observe_calls == 0
    ledger.observe(ids, np.ones((4, 3), np.float32), answers=np.zeros((4, 3), int))
    assert ledger.in_flight == [] and cur.observe_calls == 1


def test_float_task_ids_are_refused():
    _, ledger = _ledger()
    ids = ledger.draw(2)
    with pytest.raises(TypeError, match="task_ids must be integers, got float64"):
        ledger.observe(ids.astype(float) + 0.5, np.ones((2, 3), np.float32))
    assert len(ledger.in_flight) == 1


def test_a_replayed_draw_is_counted_once_and_a_resumed_ledger_draws_as_the_whole_run():
    cur, ledger = _ledger()
    drawn = [ledger.draw(4) for _ in range(3)]
    ledger.observe(drawn[0], np.ones((4, 3), np.float32), answers=np.zeros((4, 3), int))
    saved, state = cur.state_dict(), ledger.state()
    assert state == {"draws": 3, "in_flight": [d.tolist() for d in drawn[1:]]}
    whole = [ledger.draw(4).tolist() for _ in range(2)]

    resumed_cur, resumed = _ledger()
    resumed_cur.load_state_dict(saved)
    resumed.set_state(state)
    assert resumed.replaying
    assert [resumed.draw(4).tolist() for _ in range(2)] == [d.tolist() for d in drawn[1:]]
    assert not resumed.replaying and resumed.draws == 3
    assert [resumed.draw(4).tolist() for _ in range(2)] == whole
    assert resumed.draws == ledger.draws == 5


def test_a_replay_asked_for_with_another_size_stays_saved():
    _, ledger = _ledger()
    ledger.set_state({"draws": 1, "in_flight": [[3, 1, 4, 1]]})
    with pytest.raises(ValueError, match="draw of 4 tasks but the trainer now asks for 2"):
        ledger.draw(2)
    assert ledger.draw(4).tolist() == [3, 1, 4, 1]


@pytest.mark.parametrize(
    "state, message",
    [
        ({"draws": -5, "in_flight": []}, "draws must be a non-negative integer, got -5"),
        ({"draws": "x", "in_flight": []}, "draws must be a non-negative integer, got 'x'"),
        ({"draws": 2.0, "in_flight": []}, "draws must be a non-negative integer, got 2.0"),
        ({"draws": 2, "in_flight": "12"}, "in_flight must be a list of task-id lists"),
        ({"draws": 2, "in_flight": [[1.9, 2.7]]}, r"in_flight\[0\] must be a non-empty list"),
        ({"draws": 2, "in_flight": [[1], []]}, r"in_flight\[1\] must be a non-empty list"),
        ({"draws": 2, "in_flight": [[[1, 2]]]}, r"in_flight\[0\] must be a non-empty list"),
        ({"draws": 2, "in_flight": [[1, 10, -1]]}, r"in_flight\[0\] holds task ids \[10, -1\]"),
        ({"draws": 2, "in_flight": [], "extra": 1}, r"got one with 'extra' unexpected$"),
        ({"in_flight": [[0, 1, 2]] * 200}, r"got one with 'draws' missing$"),
    ],
)
def test_a_bad_ledger_state_is_refused_and_changes_nothing(state, message):
    _, ledger = _ledger()
    ids = ledger.draw(4)
    with pytest.raises(ValueError, match=message):
        ledger.set_state(state)
    assert ledger.state() == {"draws": 1, "in_flight": [ids.tolist()]}


def test_observe_names_the_first_group_out_of_order_and_refuses_a_grid_of_ids():
    _, ledger = _ledger()
    ids = np.concatenate([ledger.draw(5), ledger.draw(5)])
    wrong = ids.copy()
    wrong[9] = (wrong[9] + 1) % 10
    rewards = np.ones((10, 3), np.float32)
    with pytest.raises(ValueError, match=rf"group 9 is task {wrong[9]}, the draw's is {ids[9]}"):
        ledger.observe(wrong, rewards)
    with pytest.raises(ValueError, match=r"11 groups observed, 10 in flight"):
        ledger.observe(np.concatenate([ids, ids[:1]]), np.ones((11, 3), np.float32))
    with pytest.raises(ValueError, match=r"task_ids must be int\[G\].*shape \(2, 5\)"):
        ledger.observe(ids.reshape(2, 5), rewards)
    assert len(ledger.in_flight) == 2


def test_a_draw_is_one_exact_call_of_the_sampler():
    """A trainer's batch size is fixed: each draw is ``sample(n, exact=True)``, one call of
    the sampler, so ``uniform`` (which never repeats a task within a call) never repeats one
    within a batch of 5, nothing is kept, and one program serves every draw."""
    cur, ledger = _ledger()
    for _ in range(100):
        ids = ledger.draw(5)
        assert len(set(ids.tolist())) == 5
        assert cur.num_kept == 0
        ledger.observe(ids, np.ones((5, 3), np.float32), answers=np.zeros((5, 3), int))
    assert cur.trace_counts["sample"] == 1


def test_requeue_hands_the_draws_in_flight_out_again_first_and_counts_them_once():
    """A trainer that starts a new loop (a second ``train()``) never observes the groups of
    its old loop's look-ahead draws: they are handed out again, before a restored replay."""
    cur, ledger = _ledger()
    first, ahead = ledger.draw(4), ledger.draw(4)
    ledger.observe(first[:2], np.ones((2, 3), np.float32), answers=np.zeros((2, 3), int))
    ledger.requeue()
    assert ledger.in_flight == [] and ledger.replaying and ledger.draws == 2
    assert ledger.draw(4).tolist() == first.tolist()  # whole, as after a restore
    assert ledger.draw(4).tolist() == ahead.tolist()
    assert not ledger.replaying and ledger.draws == 2
    ledger.observe(first, np.ones((4, 3), np.float32), answers=np.zeros((4, 3), int))
    assert cur.observe_calls == 2

    ledger.set_state({"draws": 2, "in_flight": [[1, 2, 3, 4], [5, 6, 7, 8]]})
    assert ledger.draw(4).tolist() == [1, 2, 3, 4]
    ledger.requeue()
    assert [ledger.draw(4).tolist() for _ in range(2)] == [[1, 2, 3, 4], [5, 6, 7, 8]]


def test_per_batch_names_the_metrics_that_describe_the_last_batch():
    from curriculax.integrations._ledger import per_batch

    assert per_batch("curriculum/admission_rate")
    assert per_batch("curriculum/gate/zero_advantage/admit_rate")
    assert per_batch("curriculum/sampler/inner/inner/zero_variance_share")
    assert not per_batch("curriculum/groups")
    assert not per_batch("curriculum/gate/zero_advantage/rejected")
    assert not per_batch("admission_rate")  # a logged key carries the prefix


def test_put_back_hands_a_draw_out_again_first_and_counts_it_once():
    """A draw whose batch never reached the trainer (a record lookup failed) is put back: the
    next draw is the same one, ``draws`` counts it once, and its groups observe as usual."""
    cur, ledger = _ledger()
    ids = ledger.draw(4)
    ledger.put_back(ids)
    assert ledger.in_flight == [] and ledger.replaying and ledger.draws == 1
    assert ledger.draw(4).tolist() == ids.tolist()
    assert ledger.draws == 1 and not ledger.replaying
    ledger.observe(ids, np.ones((4, 3), np.float32), answers=np.zeros((4, 3), int))
    assert ledger.in_flight == [] and cur.observe_calls == 1

    # a replayed draw goes back in front of the rest of the replay
    ledger.set_state({"draws": 3, "in_flight": [[1, 2, 3, 4], [5, 6, 7, 8]]})
    ledger.put_back(ledger.draw(4))
    assert ledger.state() == {"draws": 3, "in_flight": [[1, 2, 3, 4], [5, 6, 7, 8]]}

    # only a draw in flight with no group observed yet; nothing changes otherwise
    first = ledger.draw(4)
    ledger.observe(first[:1], np.ones((1, 3), np.float32), answers=np.zeros((1, 3), int))
    for ids in (first, [9, 9, 9, 9]):
        with pytest.raises(ValueError, match="not a draw in flight with no group observed"):
            ledger.put_back(ids)
    assert ledger.state() == {"draws": 3, "in_flight": [[1, 2, 3, 4], [5, 6, 7, 8]]}


def test_answer_ids_give_each_missing_answer_an_id_of_its_own():
    """``None`` (the answer key found no answer) is no answer: every such rollout gets an id
    no other rollout and no answer gets (they once all got the id of ``str(None)``)."""
    from curriculax.integrations._ledger import answer_ids

    ids = answer_ids([None, "None", None, "4", 4, "5", None])
    assert ids.dtype == np.int64
    missing, given = ids[[0, 2, 6]], ids[[1, 3, 4, 5]]
    assert len(set(missing.tolist())) == 3 and (missing < 0).all()
    assert ((given >= 0) & (given < 2**31)).all()  # apart from the missing ones
    assert ids[3] == ids[4] != ids[5] and ids[1] != ids[3]
    assert answer_ids(["4", "None"]).tolist() == given[[1, 0]].tolist()  # stable
    # the curriculum keeps an id's low 32 bits: distinct ids stay distinct there
    low = ids.astype(np.uint32).view(np.int32)
    assert len(set(low.tolist())) == 6


def test_rollouts_without_an_answer_prove_no_contradiction():
    """Two answerless rollouts of a task with different rewards (a format bonus on one) are
    not one answer with two rewards: the robust preset marks no task and admits every group.
    They once shared one id, and one batch marked the whole pool for the rest of the run."""
    import re

    import curriculax as cx
    from curriculax.integrations._ledger import DrawLedger, answers_of

    cur = cx.HostCurriculum(cx.robust_curriculum(8), seed=0)
    ledger = DrawLedger(cur, 8)
    ids = ledger.draw(8)

    def extract(completion):
        found = re.search(r"\\boxed\{(\d+)\}", completion)
        return found.group(1) if found else None

    completions = ["<t> \\boxed{4}", "<t> \\boxed{5}", "<t> no idea", "no idea"] * 8
    rewards = np.array([[1.1, 0.1, 0.1, 0.0]] * 8, np.float32)
    answers = answers_of(extract, completions).reshape(8, 4)
    assert ledger.observe(ids, rewards, answers=answers).all()
    assert cx.samplers.contradicted_tasks(cur.state).tolist() == []
    # one extracted answer with two rewards still proves it
    answers[0, 3] = answers[0, 0]
    ids = ledger.draw(8)
    assert not ledger.observe(ids, rewards, answers=answers)[0]
    assert cx.samplers.contradicted_tasks(cur.state).tolist() == [int(ids[0])]


def test_a_bare_curriculum_is_refused_at_construction():
    """It once failed only at the first draw (``sample() got an unexpected keyword``)."""
    import curriculax as cx
    from curriculax.integrations._ledger import DrawLedger

    with pytest.raises(TypeError, match=r"got Curriculum; wrap it: cx.HostCurriculum\("):
        DrawLedger(cx.curriculum(cx.samplers.uniform(8)), 8)
