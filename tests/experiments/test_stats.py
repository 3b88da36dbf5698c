"""The study statistics: censored misses, order-statistic intervals, ratios, differences."""

import numpy as np
import pytest

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


def test_a_censored_median_or_iqm_interval_is_bounded_below_with_misses_at_the_budget():
    """A resample over misses (``inf``) is only known to lie between its value with misses at
    the budget and ``inf``; its lowest value bounds the interval below. With misses at ``inf``
    the lower end of this median came out 99 where the data allow 80 ((60 + 100) / 2: a
    resample's middle pair can be a 60 and a miss), and the IQM's 79.25 where they allow
    59.5 ((20 + 20 + 99 + 99) / 4)."""
    v = np.array([60.0, 60.0, 99.0] + [np.inf] * 7)
    assert S.bootstrap(v, S.median)[1] == 99.0  # the old lower end
    assert S.censored_bootstrap(v, S.median, 100.0) == (np.inf, 80.0, np.inf)
    assert S.fmt_censored_interval(v, S.median, 100.0) == "> 100 [80, > 100]"
    w = np.array([20.0, 99.0, 99.0] + [np.inf] * 3)
    assert S.bootstrap(w, S.iqm)[1] == 79.25
    assert S.censored_bootstrap(w, S.iqm, 100.0)[1] == 59.5
    hits = np.array([10.0, 12.0, 11.0, 13.0])  # no miss: the plain bootstrap
    assert S.censored_bootstrap(hits, S.median, 100.0) == S.bootstrap(hits, S.median)


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


def test_censored_ratio_says_which_way_a_censored_point_bounds_the_ratio():
    hits = np.array([10.0, 10.0, 10.0])
    # the base misses on most runs: its median is beyond the budget, the ratio at least 10
    r = S.censored_ratio(np.array([20.0, np.inf, np.inf]), hits, 100.0, reps=200)
    assert (r.point, r.bound) == (10.0, ">=") and r.low <= r.point
    # the arm misses on most runs: at most 20 / 100
    r = S.censored_ratio(hits * 2, np.array([5.0, np.inf, np.inf]), 100.0, reps=50)
    assert (r.point, r.bound) == (0.2, "<=")
    r = S.censored_ratio(hits, hits / 2, 100.0, reps=50)
    assert (r.point, r.low, r.high, r.bound, r.kind) == (2.0, 2.0, 2.0, "", "")
    both = S.censored_ratio(np.full(3, np.inf), np.full(3, np.inf), 100.0, reps=50)
    assert np.isnan(both.point) and both.bound == "?"
    assert (both.low, both.high, both.kind) == (0.0, np.inf, "?")


def test_a_censored_interval_end_is_open_not_the_budget_over_the_arm():
    # Hard-skew as stored (docs/compare/hard-skew.json): uniform reached the target on 5/10
    # seeds, the bandit on 10/10. Counting uniform's misses as the 64,000-rollout budget gave
    # the interval [1.81, 4.00], its upper end 64,000 / 16,000 (the budget over the bandit's
    # lowest median), which a larger budget would have moved: the data do not bound it.
    inf = np.inf
    uniform = np.array([inf, 35200, 48000, 38400, inf, inf, 64000, 57600, inf, inf])
    bandit = np.array([16000, 12800, 22400, 41600, 22400, 57600, 28800, 12800, 25600, 22400.0])
    r = S.censored_ratio(uniform, bandit, 64000.0)
    assert r.bound == ">=" and r.point == 64000 / 22400  # uniform's median: beyond 64,000
    assert r.kind == ">=" and r.high == np.inf and round(r.low, 2) == 1.80
    assert S.fmt_ratio(r).endswith(", inf)") and S.fmt_ratio(r).startswith(">= ")
    # The same data with a larger budget: the lower end moves, the upper end stays open.
    assert S.censored_ratio(uniform, bandit, 96000.0).high == np.inf
    # An arm that misses where the base reaches: open at 0, an upper bound.
    r = S.censored_ratio(bandit, uniform, 64000.0)
    assert (r.bound, r.kind, r.low) == ("<=", "<=", 0.0) and r.high < 1.0
    assert S.fmt_ratio_interval(r).startswith("(0, ")
    # Resamples that are only sometimes censored: the end they reach is open, the point is not
    # a bound (here the base's median reached, 6 of 10 seeds).
    some = np.array([40000, 41000, 42000, 43000, 44000, 45000, inf, inf, inf, inf])
    r = S.censored_ratio(some, bandit, 64000.0)
    assert r.bound == "" and np.isfinite(r.point) and r.kind == ">=" and r.high == np.inf


def test_the_paired_ratio_resamples_seeds_jointly():
    rng = np.random.default_rng(0)
    seed_effect = np.exp(rng.normal(0.0, 0.6, size=12))  # a seed's initial policy, both arms
    base = 1000.0 * seed_effect
    arm = base / 1.3 * np.exp(rng.normal(0.0, 0.02, size=12))
    unpaired = S.censored_ratio(base, arm, 1e6)
    paired = S.censored_ratio(base, arm, 1e6, paired=True)
    assert paired.point == unpaired.point
    assert 1.0 < paired.low <= paired.point <= paired.high < 1.5  # resolved once paired
    assert unpaired.low < 1.0 < unpaired.high  # the seeds' spread hides it unpaired
    assert S.verdict(unpaired, paired) == "did not beat" and S.verdict(paired) == "beat"
    with np.testing.assert_raises_regex(ValueError, "paired=False"):
        S.censored_ratio(base, arm[:5], 1e6, paired=True)


def test_a_verdict_is_claimed_only_where_every_interval_excludes_1():
    def ratio(low, high):
        return S.Ratio(1.0, low, high, "", "")

    assert S.verdict(ratio(1.2, np.inf)) == "beat"
    assert S.verdict(ratio(0.0, 0.8)) == "lost"
    assert S.verdict(ratio(0.8, 1.2)) == "did not beat"
    assert S.verdict(ratio(0.0, np.inf)) == "did not beat"  # never "lost" without the interval
    assert S.verdict(ratio(1.2, 2.0), ratio(0.9, 2.0)) == "did not beat"
    assert S.verdict() == "did not beat"


def test_fisher_exact_matches_hand_computed_tables():
    # Fisher's tea tasting, [[3, 1], [1, 3]]: with margins 4 / 4 of 8, the top-left count x
    # has weights C(4, x) C(4, 4 - x) = 1, 16, 36, 16, 1 over C(8, 4) = 70; the tables no
    # more likely than x = 3 weigh 1 + 16 + 16 + 1 = 34.
    assert S.fisher_exact([[3, 1], [1, 3]]) == 34 / 70
    # Hard-skew's bandit against uniform, seeds at target 10/10 against 5/10: margins 10 / 15
    # of 20, weights C(15, x) C(5, 10 - x) for x = 5..10 are 3003, 25025, 60060, 60060, 25025,
    # 3003 over C(20, 10) = 184756; x = 10 and x = 5 are the two least likely.
    assert S.fisher_exact([[10, 0], [5, 5]]) == 6006 / 184756
    assert round(S.fisher_exact([[10, 0], [5, 5]]), 4) == 0.0325
    assert S.fisher_exact([[5, 5], [5, 5]]) == 1.0
    assert S.fisher_exact([[0, 10], [0, 10]]) == 1.0  # no seed reached: nothing to tell apart
    assert S.fisher_exact([[1, 0], [0, 1]]) == 1.0  # 2 tables of weight 1 over C(2, 1) = 2
    # Symmetric in rows and columns.
    assert S.fisher_exact([[2, 7], [8, 3]]) == S.fisher_exact([[8, 3], [2, 7]])
    assert S.fisher_exact([[2, 7], [8, 3]]) == S.fisher_exact([[2, 8], [7, 3]])
    with np.testing.assert_raises_regex(ValueError, "counts >= 0"):
        S.fisher_exact([[1, -1], [0, 1]])


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
    # A miss in the middle: the median of [1, 2, inf, inf] is above (2 + budget) / 2, not the
    # budget; with a miss the middle value, above the budget.
    assert S.fmt_censored([1.0, 2.0, np.inf, np.inf], S.median, 100) == "> 51"
    assert S.fmt_censored([1.0, np.inf, np.inf], S.median, 100) == "> 100"
    assert S.fmt_censored([1.0, 2.0, 3.0], S.median, 100) == "2"
    # one budget per run (updates: each run made its own number before it missed)
    assert S.fmt_censored([5.0, np.inf, np.inf], S.median, np.array([9.0, 8.0, 30.0])) == "> 8"
    text = S.fmt_censored_interval([10.0, 20.0, np.inf, np.inf], S.median, 100, reps=200)
    point, interval = text.split(" [")
    assert point == "> 60" and interval.endswith(", > 100]")
    assert S.fmt_ratio(S.Ratio(2.0, 1.25, np.inf, "", ">=")) == "2.00x [1.25, inf)"
    assert S.fmt_ratio(S.Ratio(0.3, 0.0, 0.41, "<=", "<=")) == "<= 0.30x (0, 0.41]"
    assert S.fmt_ratio(S.Ratio(np.nan, 0.0, np.inf, "?", "?")) == "- (0, inf)"
    assert S.fmt_difference(0.05, -0.0104, 0.118) == "+0.050 [-0.010, +0.118]"


def _loop_bootstrap(v, stat, reps, seed=0):
    """The bootstrap one resample at a time (as it was computed before): the reference."""
    idx = np.random.default_rng(seed).integers(0, v.size, size=(reps, v.size))
    return np.array([stat(v[i]) for i in idx])


@pytest.mark.parametrize("stat", [S.median, S.iqm, S.mean])
def test_the_bootstrap_computes_every_resample_at_once_and_agrees_with_one_at_a_time(stat):
    v = np.array([12.0, 7.0, np.inf, 30.0, 12.0, 18.0, 9.0, np.inf, 25.0, 11.0, 14.0])
    idx = np.random.default_rng(0).integers(0, v.size, size=(3000, v.size))
    rows = S._over_resamples(stat, v, idx)
    assert rows.shape == (3000,)
    np.testing.assert_array_equal(rows, _loop_bootstrap(v, stat, 3000))
    assert S.bootstrap(v, stat, reps=3000)[1:] == S._quantiles(_loop_bootstrap(v, stat, 3000), 0.95)
    # the default resamples, at a speed a table of many arms can afford
    assert S.REPS >= 50_000 and S.bootstrap(v, stat)[0] == stat(v)


def test_the_verdict_reads_the_share_of_resamples_and_calls_a_near_one_borderline():
    # base hard-skew, learning progress against uniform (docs/compare/base-hard-skew.json): the
    # ratio takes few values and many resamples sit on 1. With 4,000 resamples the lower end
    # was 1.00 or 1.05 by the resampling seed and the verdict "beat" on 9 of 20 seeds; the share
    # of resamples at or below 1 is about 2.6% unpaired (2.0% paired), at the 2.5% cut-off.
    inf = np.inf
    uniform = np.array([26880, 38400, inf, 14080, 11520, 12800, 14080, 7680, 23040, 11520])
    lp = np.array([8960, 11520, 16640, 6400, 11520, 7680, 30720, 8960, 6400, 8960.0])
    said = set()
    for seed in range(3):
        r = S.censored_ratio(uniform, lp, 38400.0, seed=seed)
        p = S.censored_ratio(uniform, lp, 38400.0, paired=True, seed=seed)
        assert 0.022 < r.below < 0.03 and 0.017 < p.below < 0.023 and r.reps == S.REPS
        said.add(S.verdict(r, p))
    assert said == {"borderline"}


def test_borderline_claims_neither_and_clear_shares_decide():
    def ratio(below, above, low=1.1, high=2.0, reps=50_000):
        return S.Ratio(1.5, low, high, "", "", below, above, reps)

    margin = 3 * np.sqrt(0.025 * 0.975 / 50_000)
    assert S.verdict(ratio(0.01, 1.0)) == "beat"
    assert S.verdict(ratio(0.025 - 0.5 * margin, 1.0)) == "borderline"
    assert S.verdict(ratio(0.025 - 1.5 * margin, 1.0)) == "beat"
    assert S.verdict(ratio(0.025 + 0.5 * margin, 1.0, low=1.0)) == "borderline"
    assert S.verdict(ratio(0.025 + 1.5 * margin, 1.0, low=1.0)) == "did not beat"
    assert S.verdict(ratio(0.01, 1.0), ratio(0.026, 1.0)) == "borderline"
    assert S.verdict(ratio(0.01, 1.0), ratio(0.2, 1.0)) == "did not beat"
    assert S.verdict(ratio(1.0, 0.005, low=0.0, high=0.8)) == "lost"
    assert S.verdict(ratio(1.0, 0.024, low=0.0, high=0.8)) == "borderline"
    assert S.verdict(ratio(0.3, 0.7, low=0.8, high=1.2)) == "did not beat"
    # fewer resamples, a wider band: 2.2% is near the cut-off at 4,000, clear at 500,000
    assert S.verdict(ratio(0.022, 1.0, reps=4000)) == "borderline"
    assert S.verdict(ratio(0.022, 1.0, reps=500_000)) == "beat"


@pytest.mark.parametrize("seeds", range(1, 12))
def test_no_verdict_below_the_minimum_seeds(seeds):
    """One seed gave a point interval and "beat"; below 10 seeds nothing is claimed."""
    base, arm = np.full(seeds, 80.0) + np.arange(seeds), np.full(seeds, 40.0) + np.arange(seeds)
    r = S.censored_ratio(base, arm, 100.0, reps=2000)
    p = S.censored_ratio(base, arm, 100.0, paired=True, reps=2000)
    assert S.verdict(r, p) == "beat"  # the intervals alone would claim it
    said = S.verdict(r, p, seeds=seeds)
    if seeds < S.MIN_SEEDS:
        assert said == f"not judged ({seeds} seeds)"
    else:
        assert S.MIN_SEEDS == 10 and said == "beat"
    lost = S.verdict(S.censored_ratio(arm, base, 100.0, reps=2000), seeds=seeds)
    assert lost == ("lost" if seeds >= 10 else f"not judged ({seeds} seeds)")


def test_a_nan_run_is_refused_not_counted_as_the_slowest():
    v = np.array([10.0, np.nan, 30.0, np.inf])
    ok = np.array([10.0, 20.0, 30.0, 40.0])
    for call in (
        lambda: S.bootstrap(v, S.median),
        lambda: S.censored_bootstrap(v, S.iqm, 100.0),
        lambda: S.fmt_censored_interval(v, S.median, 100.0),
        lambda: S.censored_ratio(v, ok, 100.0),
        lambda: S.censored_ratio(ok, v, 100.0, paired=True),
        lambda: S.difference_bootstrap(ok, v),
    ):
        with pytest.raises(ValueError, match=r"NaN at runs \[1\]"):
            call()


def test_the_shares_and_the_verdict_read_the_ratio_against_its_cut():
    # the arm needs half the base's rollouts on every seed: 2x, against 1, 2 and 2.5
    base, arm = np.full(10, 2000.0), np.full(10, 1000.0)
    at = {c: S.censored_ratio(base, arm, 4000.0, paired=True, cut=c) for c in (1.0, 2.0, 2.5)}
    assert [at[c].cut for c in at] == [1.0, 2.0, 2.5]
    assert (at[2.0].below, at[2.0].above, at[2.0].over) == (1.0, 1.0, 0.0)
    assert [S.verdict(at[c]) for c in at] == ["beat", "did not beat", "lost"]
    assert S.censored_ratio(base, arm, 4000.0).cut == 1.0


def test_a_p_value_never_prints_as_zero():
    # Fisher's p of 0.000119 printed as "0.000" in 34 stored table rows.
    assert [S.fmt_p(p) for p in (0.000119, 0.0005, 0.01234, 1.0)] == [
        "< 0.001",
        "0.001",
        "0.012",
        "1.000",
    ]
