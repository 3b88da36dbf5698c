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
