"""The adapters' shared helpers that need no trainer: the gates' zero-advantage rows."""

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
