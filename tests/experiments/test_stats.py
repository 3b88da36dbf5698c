"""The study statistics: censored misses, order-statistic intervals, ratios, differences."""

import numpy as np

from experiments import _stats as S


def test_first_hit_takes_the_first_crossing_and_marks_misses_inf():
    x = np.array([[10, 20, 30], [10, 20, 30], [5, 6, 7]])
    y = np.array([[0.1, 0.6, 0.2], [0.0, 0.1, 0.2], [0.5, 0.9, 0.9]])
    assert S.first_hit(x, y, 0.5).tolist() == [20.0, np.inf, 5.0]


def test_median_and_iqm_treat_misses_as_larger_than_every_hit():
    assert S.median(np.array([3.0, 1.0, 2.0])) == 2.0
    assert S.median(np.array([1.0, 2.0, 3.0, 4.0])) == 2.5
    assert S.median(np.array([1.0, np.inf, np.inf])) == np.inf  # most runs missed
    assert S.median(np.array([1.0, 2.0, np.inf])) == 2.0  # a minority missed
    # IQM of 8 runs: the middle 4 after sorting
    assert S.iqm(np.array([8.0, 1, 2, 3, 4, 5, 6, np.inf])) == np.mean([3.0, 4, 5, 6])
    assert S.iqm(np.array([1.0, np.inf, np.inf, np.inf])) == np.inf


def test_bootstrap_is_deterministic_and_brackets_the_point():
    rng = np.random.default_rng(1)
    v = rng.normal(100.0, 10.0, size=12)
    a = S.bootstrap(v, S.median, reps=500, seed=3)
    assert a == S.bootstrap(v, S.median, reps=500, seed=3)
    point, lo, hi = a
    assert lo <= point <= hi and lo < hi
    # a censored majority leaves the interval's top unbounded, never a nan
    _, lo, hi = S.bootstrap(np.array([1.0, 2.0, 3.0, np.inf, np.inf]), S.median, reps=500)
    assert np.isfinite(lo) and hi == np.inf


def test_ratio_bootstrap_favours_the_faster_arm_and_handles_misses():
    base = np.array([400.0, 380, 420, 410, 390, 405, 395, 415, 385, 400])
    arm = base / 2
    point, lo, hi = S.ratio_bootstrap(base, arm, S.median, reps=500)
    assert point == 2.0 and 1.5 < lo <= 2.0 <= hi < 2.5
    # the base never reaches, the arm always does: an unbounded ratio, never nan
    point, lo, hi = S.ratio_bootstrap(np.full(5, np.inf), np.ones(5), S.median, reps=200)
    assert point == np.inf and lo == np.inf
    # the arm never reaches: ratio 0
    assert S.ratio_bootstrap(np.ones(5), np.full(5, np.inf), reps=50)[0] == 0.0


def test_a_paired_difference_cancels_what_the_arms_share_by_seed():
    rng = np.random.default_rng(0)
    seed_effect = rng.normal(0.0, 0.2, size=10)  # shared by both arms of a seed
    base = 0.5 + seed_effect
    arm = base + 0.05 + rng.normal(0.0, 0.01, size=10)
    point, lo, hi = S.difference_bootstrap(base, arm, reps=1000)
    assert point == np.mean(arm) - np.mean(base)
    assert 0.0 < lo <= point <= hi < 0.1  # the gain is resolved once seeds are paired
    _, ulo, uhi = S.difference_bootstrap(base, arm, paired=False, reps=1000)
    assert ulo < 0.0 < uhi and uhi - ulo > 3 * (hi - lo)  # unpaired, the seeds' spread hides it
    assert S.difference_bootstrap(base, arm, reps=200) == S.difference_bootstrap(
        base, arm, reps=200
    )
    with np.testing.assert_raises_regex(ValueError, "paired=False"):
        S.difference_bootstrap(base, arm[:5])


def test_censored_ratio_counts_misses_at_the_budget_and_says_which_way_it_bounds():
    hits = np.array([10.0, 10.0, 10.0])
    # the base misses on most runs: its median is at least the budget, the ratio at least 10
    point, lo, hi, kind = S.censored_ratio(np.array([20.0, np.inf, np.inf]), hits, 100.0, reps=200)
    assert (point, kind) == (10.0, ">=") and lo <= point <= hi
    # the arm misses on most runs: at most 20 / 100
    point, *_, kind = S.censored_ratio(hits * 2, np.array([5.0, np.inf, np.inf]), 100.0, reps=50)
    assert (point, kind) == (0.2, "<=")
    assert S.censored_ratio(hits, hits / 2, 100.0, reps=50)[::3] == (2.0, "")
    both = S.censored_ratio(np.full(3, np.inf), np.full(3, np.inf), 100.0, reps=50)
    assert np.isnan(both[0]) and both[3] == "?"
    assert S.fmt_ratio(10.0, 5.0, np.inf, ">=") == ">= 10.00x [5.00, inf]"


def test_reached_curve_is_the_share_of_runs_at_target_by_each_budget():
    v = np.array([10.0, 20.0, np.inf, 20.0])
    assert S.reached_curve(v, np.array([0, 10, 19, 20, 1e9])).tolist() == [
        0.0,
        0.25,
        0.25,
        0.75,
        0.75,
    ]


def test_formatting_marks_censored_values():
    assert S.fmt_count(np.inf, bound=1000) == "> 1,000"
    assert S.fmt_interval(10.0, 5.0, np.inf, bound=100) == "10 [5, > 100]"
    assert S.fmt_ratio(2.0, 1.25, np.inf) == "2.00x [1.25, inf]"
    assert S.fmt_difference(0.05, -0.0104, 0.118) == "+0.050 [-0.010, +0.118]"
