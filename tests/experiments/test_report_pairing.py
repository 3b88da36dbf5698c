"""A comparison between arms that ran different numbers of seeds has no paired interval; the
table says so and why, instead of leaving it out silently."""

import numpy as np

from experiments.compare import report


def test_unequal_seed_counts_say_why_there_is_no_paired_interval():
    base = np.array([400.0, 480.0, 560.0, np.inf, 640.0, 720.0])
    arm = np.array([160.0, 240.0, 200.0, 320.0])
    cmp = report.compare_arms(base, arm, 1000.0)
    assert cmp["paired"] is None
    assert report._comparison_text(cmp).endswith("; paired: none, 6 vs 4 seeds")
    equal = report.compare_arms(base[:4], arm, 1000.0)
    assert equal["paired"] is not None
    assert "; paired [" in report._comparison_text(equal)
