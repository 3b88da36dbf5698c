"""The one Markdown table helper: aligned columns, pipes escaped, shapes checked."""

import pytest

from experiments import _markdown as md


def test_a_table_has_a_header_a_rule_and_rows_with_pipes_escaped():
    text = md.table(["arm", "ms"], [["bandit (|advantage|)", 1.5]], align="lr")
    assert text.splitlines() == ["| arm | ms |", "|---|---:|", "| bandit (\\|advantage\\|) | 1.5 |"]
    # The default alignment: the first column left, the others right.
    assert md.table(["a", "b", "c"], []).splitlines()[1] == "|---|---:|---:|"


def test_rows_and_alignments_that_do_not_match_the_header_are_refused():
    with pytest.raises(ValueError, match="row 0 has 1 cells, the header 2"):
        md.table(["a", "b"], [["x"]])
    with pytest.raises(ValueError, match="align gives 3 columns, the header 2"):
        md.table(["a", "b"], [], align="lrr")
    with pytest.raises(ValueError, match="align takes 'l' and 'r'"):
        md.rule("lc")
