"""Statistics for studies that race arms to a target at an equal rollout budget.

A run that never reaches the target within the budget is **censored**: its time-to-target is
only known to exceed the budget. Here a miss is ``inf``, so order statistics (the median, the
interquartile mean) stay honest: a median over seeds is finite only when more than half of
them reached the target, and an interval's upper end is ``inf`` when the data cannot bound it.
Intervals are percentile bootstraps over seeds (:data:`REPS` resamples, the statistic computed
over all of them at once); quantiles are taken as order statistics (``method="inverted_cdf"``),
never interpolated towards ``inf``. A NaN is refused: a run's number is a value or a miss.

Example:
  >>> hits = first_hit(np.array([[10, 20, 30]]), np.array([[0.1, 0.6, 0.9]]), 0.5)
  >>> hits.tolist()
  [20.0]
  >>> point, lo, hi = bootstrap(np.array([10.0, 12.0, np.inf, 11.0]), median)
  >>> gain, lo, hi = difference_bootstrap(np.array([0.5, 0.6]), np.array([0.7, 0.6]))
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

Stat = Callable[[np.ndarray], float]

REPS = 50_000
"""Bootstrap resamples. Rollouts to target are counted in evaluation steps, so a ratio of two
medians takes few distinct values and many resamples sit exactly on 1; with 4,000 resamples
whether the share of them at or below 1 fell under 2.5% changed with the resampling seed. At
50,000 its Monte Carlo standard error near 2.5% is 0.0007 (0.0025 at 4,000)."""

MIN_SEEDS = 10
"""The fewest seeds per arm a verdict is given on (the project's rule): below it a bootstrap
over seeds is too narrow to read (one seed makes it a point; with two seeds per arm, arms drawn
from one distribution were called different in about a quarter of simulated studies)."""

BORDERLINE = 3.0
"""Monte Carlo standard errors: a verdict whose deciding share of resamples lies within this
many of the cut-off (2.5% for a 95% interval) is ``"borderline"``, as more resamples or another
resampling seed could put it on either side."""


def _runs(values: Any, what: str) -> np.ndarray:
    """``values`` as ``f64``; a NaN (a number that is neither a value nor a miss) is refused."""
    v = np.asarray(values, np.float64)
    if np.isnan(v).any():
        bad = np.flatnonzero(np.isnan(v).ravel()).tolist()
        raise ValueError(
            f"{what} holds NaN at runs {bad}: a run's number is a value, or inf for a miss"
        )
    return v


def first_hit(x: np.ndarray, y: np.ndarray, target: float) -> np.ndarray:
    """Per run, ``x`` at the first point where ``y >= target`` (``inf`` if never).

    Args:
      x: ``f[S, E]`` the cost axis (rollouts, updates) at each of ``E`` evaluations per run.
      y: ``f[S, E]`` the measured score at those points.
      target: the score to reach.

    Returns:
      ``f64[S]``.
    """
    x = np.asarray(x, np.float64)
    hit = np.asarray(y) >= target
    first = np.argmax(hit, axis=1)
    out = np.take_along_axis(x, first[:, None], axis=1)[:, 0]
    return np.where(hit.any(axis=1), out, np.inf)


def median(values: np.ndarray) -> float:
    """Median over runs, misses (``inf``) included as the largest values."""
    v = np.sort(np.asarray(values, np.float64))
    n = v.size
    if n == 0:
        return float("nan")
    lo, hi = v[(n - 1) // 2], v[n // 2]
    return float(lo if lo == hi else (lo + hi) / 2)  # inf when the upper middle is a miss


def iqm(values: np.ndarray) -> float:
    """Interquartile mean: the mean of the middle half of the sorted runs (``inf`` when a miss
    falls in the middle half). Drops ``floor(n / 4)`` runs from each end."""
    v = np.sort(np.asarray(values, np.float64))
    n = v.size
    if n == 0:
        return float("nan")
    cut = n // 4
    return float(np.mean(v[cut : n - cut]))


def mean(values: np.ndarray) -> float:
    """Plain mean (of final scores, say; ``inf`` if any run missed)."""
    return float(np.mean(np.asarray(values, np.float64)))


def _median_rows(v: np.ndarray) -> np.ndarray:
    s = np.sort(v, axis=-1)
    n = s.shape[-1]
    lo, hi = s[..., (n - 1) // 2], s[..., n // 2]
    return np.where(lo == hi, lo, (lo + hi) / 2)


def _iqm_rows(v: np.ndarray) -> np.ndarray:
    s = np.sort(v, axis=-1)
    n = s.shape[-1]
    cut = n // 4
    return np.mean(s[..., cut : n - cut], axis=-1)


def _mean_rows(v: np.ndarray) -> np.ndarray:
    return np.mean(v, axis=-1)


# Each statistic over the rows of ``f[R, S]`` at once (the same arithmetic per row).
_ROWS: dict[Callable, Callable[[np.ndarray], np.ndarray]] = {
    median: _median_rows,
    iqm: _iqm_rows,
    mean: _mean_rows,
}


def _over_resamples(stat: Stat, values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``f64[R]``: ``stat`` of each resample ``values[idx[r]]`` (``idx``: ``i[R, S]``), all at
    once for :func:`median`, :func:`iqm` and :func:`mean`; another statistic row by row."""
    rows = _ROWS.get(stat)
    if rows is not None:
        return np.asarray(rows(values[idx]), np.float64)
    return np.array([stat(values[i]) for i in idx], np.float64)


def _quantiles(samples: np.ndarray, level: float) -> tuple[float, float]:
    alpha = (1.0 - level) / 2.0
    s = np.sort(samples[~np.isnan(samples)])
    if s.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.quantile(s, [alpha, 1.0 - alpha], method="inverted_cdf")
    return float(lo), float(hi)


def bootstrap(
    values: np.ndarray,
    stat: Stat = median,
    *,
    reps: int = REPS,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``(point, low, high)``: ``stat`` over the runs and its percentile bootstrap interval.

    Args:
      values: ``f[S]`` one value per run (``inf`` for a miss).
      stat: e.g. :func:`median`, :func:`iqm`, :func:`mean`.
      reps: bootstrap resamples.
      level: interval coverage.
      seed: resampling seed (results are deterministic).
    """
    v = _runs(values, "bootstrap: values")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, v.size, size=(reps, v.size))
    return (stat(v), *_quantiles(_over_resamples(stat, v, idx), level))


def censored_bootstrap(
    values: np.ndarray, stat: Stat, budget: float | np.ndarray, **kwargs: Any
) -> tuple[float, float, float]:
    """:func:`bootstrap` for runs censored at ``budget`` (a miss is ``inf``: it needed more):
    the point and upper end with misses at ``inf``, the lower end with misses at ``budget``.
    A resample's statistic over misses is only known to lie between the two; its lowest value
    is what bounds the interval below (with misses at ``inf`` the lower end of a median whose
    resamples reach the misses came out too high: 99 where the data allow 80 in
    ``[60, 60, 99]`` and seven misses). A lower end that is ``inf`` with misses at ``inf``
    stays so (open: above its floor). Without misses it is :func:`bootstrap`."""
    v = _runs(values, "censored_bootstrap: values")
    point, lo, hi = bootstrap(v, stat, **kwargs)
    if np.isfinite(lo):  # an infinite one stays open: "more than" the floor, as it prints
        lo = bootstrap(np.minimum(v, budget), stat, **kwargs)[1]
    return point, lo, hi


def difference_bootstrap(
    base: np.ndarray,
    arm: np.ndarray,
    stat: Stat = mean,
    *,
    paired: bool = True,
    reps: int = REPS,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``stat(arm) - stat(base)`` with a percentile bootstrap interval (above 0 favours
    ``arm``), for finite scores such as a final held-out success.

    Args:
      base: ``f[S]`` one value per run of the baseline arm.
      arm: ``f[S]`` (paired: the same seeds, in the same order) or ``f[S']`` (unpaired).
      stat: the statistic of each arm (default :func:`mean`).
      paired: resample seeds jointly (run ``i`` of both arms shares its seed, so seed-to-seed
        variation common to both cancels); ``False`` resamples each arm on its own.
      reps: bootstrap resamples.
      level: interval coverage.
      seed: resampling seed (results are deterministic).
    """
    b, a = _runs(base, "difference_bootstrap: base"), _runs(arm, "difference_bootstrap: arm")
    if paired and a.shape != b.shape:
        raise ValueError(
            f"a paired difference needs one value per seed in each arm, got {b.shape} and "
            f"{a.shape}; pass paired=False for independent runs"
        )
    rng = np.random.default_rng(seed)
    ib = rng.integers(0, b.size, size=(reps, b.size))
    ia = ib if paired else rng.integers(0, a.size, size=(reps, a.size))
    samples = _over_resamples(stat, a, ia) - _over_resamples(stat, b, ib)
    return (stat(a) - stat(b), *_quantiles(samples, level))


def _ratio(a: float, b: float) -> float:
    """``a / b`` with misses: inf/x = inf, x/inf = 0, inf/inf undefined (nan)."""
    if np.isinf(a) and np.isinf(b):
        return float("nan")
    if np.isinf(b):
        return 0.0
    if b == 0:
        return float("inf")
    return float(a / b)


def _ratios(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`_ratio` elementwise."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(b == 0, np.inf, a / np.where(b == 0, 1.0, b))
    return np.where(np.isinf(b), np.where(np.isinf(a), np.nan, 0.0), out)


class Ratio(NamedTuple):
    """``stat(base) / stat(arm)`` from censored runs (above 1 favours ``arm``).

    Attributes:
      point: the ratio, or its bound when a median over the runs is a miss (``nan``: unknown).
      low: the interval's lower end; ``0`` is an open end (resamples where the arm's statistic
        is a miss bound the ratio only from above).
      high: the interval's upper end; ``inf`` is an open end (resamples where the base's
        statistic is a miss bound the ratio only from below).
      bound: what ``point`` is: ``""`` the ratio, ``">="`` a lower bound (the base's statistic
        missed), ``"<="`` an upper bound (the arm's did), ``"?"`` unknown (both did).
      kind: the interval's direction: ``">="`` open above only (the data bound the ratio from
        below), ``"<="`` open below only, ``"?"`` open at both ends, ``""`` closed.
      below: the share of the resamples whose ratio may be ``cut`` or less (their lower end is
        at most ``cut``): what :func:`verdict` weighs against ``"beat"`` (NaN: not resampled,
        the interval decides).
      above: the share whose ratio may be ``cut`` or more (upper end at least ``cut``), against
        ``"lost"``.
      reps: the resamples ``below``, ``above`` and ``over`` count (0: none).
      level: the interval's coverage.
      cut: the ratio the shares are counted against, and :func:`verdict` reads (1 unless
        asked otherwise).
      over: the share whose ratio may be more than ``cut`` (upper end above it): against a
        claim that the ratio is at most ``cut`` (the grid's "within 1.2x").
    """

    point: float
    low: float
    high: float
    bound: str
    kind: str
    below: float = math.nan
    above: float = math.nan
    reps: int = 0
    level: float = 0.95
    cut: float = 1.0
    over: float = math.nan


def censored_ratio(
    base: np.ndarray,
    arm: np.ndarray,
    budget: float,
    stat: Stat = median,
    *,
    paired: bool = False,
    reps: int = REPS,
    level: float = 0.95,
    seed: int = 0,
    cut: float = 1.0,
) -> Ratio:
    """``stat(base) / stat(arm)`` with a percentile bootstrap interval that stays open where
    misses leave it open.

    A miss (``inf``) is only known to lie beyond the ``budget``, so a statistic over runs is
    only known to lie between its value with every miss at the budget and its value with
    misses as ``inf``. Each resample's ratio is therefore a range, from the base's lowest
    statistic over the arm's highest to the base's highest over the arm's lowest; the interval
    runs from the ``(1 - level) / 2`` quantile of the lower ends to the ``(1 + level) / 2``
    quantile of the upper ends. Where the resamples at a quantile miss, that end is open
    (``inf`` above, ``0`` below): the budget never stands in for a miss where it would invent a
    finite end.

    Args:
      base: ``f[S]`` rollouts to target per run of the baseline (``inf``: a miss).
      arm: ``f[S]`` (paired) or ``f[S']`` the same for the arm.
      budget: the rollouts every run was given (where misses were censored).
      stat: the statistic of each arm (default :func:`median`).
      paired: resample seeds jointly (run ``i`` of both arms shares seed ``i``'s initial
        policy, so what a seed does to both arms cancels); ``False`` resamples each arm on its
        own.
      reps: bootstrap resamples.
      level: interval coverage.
      seed: resampling seed (results are deterministic).
      cut: the ratio the resample shares (:attr:`Ratio.below`, :attr:`Ratio.above`,
        :attr:`Ratio.over`) are counted against (1: does the arm beat the base; the grid of
        ``auto`` asks whether a candidate is within 1.2x of the best arm).

    Returns:
      A :class:`Ratio`.
    """
    b, a = _runs(base, "censored_ratio: base"), _runs(arm, "censored_ratio: arm")
    if paired and a.shape != b.shape:
        raise ValueError(
            f"a paired ratio needs one value per seed in each arm, got {b.shape} and {a.shape}; "
            "pass paired=False for independent runs"
        )

    def ends(bv: np.ndarray, av: np.ndarray) -> tuple[float, float]:
        low = _ratio(stat(np.minimum(bv, budget)), stat(av))
        high = _ratio(stat(bv), stat(np.minimum(av, budget)))
        return low, high

    rng = np.random.default_rng(seed)
    ib = rng.integers(0, b.size, size=(reps, b.size))
    ia = ib if paired else rng.integers(0, a.size, size=(reps, a.size))
    lows = _ratios(_over_resamples(stat, np.minimum(b, budget), ib), _over_resamples(stat, a, ia))
    highs = _ratios(_over_resamples(stat, b, ib), _over_resamples(stat, np.minimum(a, budget), ia))
    alpha = (1.0 - level) / 2.0
    low = float(np.quantile(lows, alpha, method="inverted_cdf"))
    high = float(np.quantile(highs, 1.0 - alpha, method="inverted_cdf"))
    # a resample with no ratio (nan: both statistics missed, an infinite budget) may be either
    below = float(np.mean(~(lows > cut)))
    above = float(np.mean(~(highs < cut)))
    over = float(np.mean(~(highs <= cut)))
    p_low, p_high = ends(b, a)
    if p_low == p_high:
        point, bound = p_low, ""
    elif np.isinf(p_high) and p_low > 0:
        point, bound = p_low, ">="
    elif p_low == 0 and np.isfinite(p_high):
        point, bound = p_high, "<="
    else:
        point, bound = float("nan"), "?"
    kind = {(False, False): "", (True, False): ">=", (False, True): "<=", (True, True): "?"}[
        (bool(np.isinf(high)), bool(low == 0))
    ]
    return Ratio(point, low, high, bound, kind, below, above, reps, level, cut, over)


def verdict(*ratios: Ratio, seeds: int | None = None) -> str:
    """What the intervals allow: ``"beat"`` where every interval lies above 1, ``"lost"`` where
    every one lies below 1, ``"did not beat"`` otherwise (an interval that holds 1 claims
    neither). 1 here is each ratio's :attr:`Ratio.cut` (1 unless it was counted against
    another value: then "beat" reads "above the cut").

    An interval lies above 1 where fewer than ``(1 - level) / 2`` (2.5%) of its resamples put
    the ratio at 1 or below (:attr:`Ratio.below`; below 1: :attr:`Ratio.above`). Where that
    share is within :data:`BORDERLINE` Monte Carlo standard errors of the cut-off for an
    interval and no interval is clearly on the other side, the verdict is ``"borderline"``: the
    resampling cannot settle it and neither is claimed. A :class:`Ratio` without its resamples
    (``reps`` 0) is read from its ends.

    Args:
      ratios: the intervals that must all agree (say the unpaired and the paired one).
      seeds: the fewest seeds of the two arms: below :data:`MIN_SEEDS` no verdict is given,
        ``"not judged (N seeds)"``.
    """
    if seeds is not None and seeds < MIN_SEEDS:
        return f"not judged ({seeds} seeds)"
    if not ratios:
        return "did not beat"
    beat = [side(r, r.below, r.low > r.cut) for r in ratios]
    lost = [side(r, r.above, r.high < r.cut) for r in ratios]
    for claim, sides in (("beat", beat), ("lost", lost)):
        if all(side == "yes" for side in sides):
            return claim
    if any(all(side != "no" for side in sides) for sides in (beat, lost)):
        return "borderline"
    return "did not beat"


def side(r: Ratio, share: float, holds: bool) -> str:
    """Whether ``r`` lies on a side of 1: ``"yes"`` where ``share`` (its resamples on the other
    side) is clearly under the cut-off, ``"no"`` where clearly over, ``"near"`` within
    :data:`BORDERLINE` Monte Carlo standard errors of it. Without resamples: ``holds``."""
    if r.reps <= 0 or math.isnan(share):
        return "yes" if holds else "no"
    cut = (1.0 - r.level) / 2.0
    margin = BORDERLINE * math.sqrt(cut * (1.0 - cut) / r.reps)
    if share < cut - margin:
        return "yes"
    if share > cut + margin:
        return "no"
    return "near"


def fisher_exact(table) -> float:
    """Fisher's exact test on a 2x2 table of counts, two-sided p-value.

    With the margins fixed, the top-left count is hypergeometric; the p-value sums the
    probabilities of every table no more likely than the one observed (computed on exact
    integers, so ties are ties).

    Args:
      table: ``[[a, b], [c, d]]``, e.g. seeds at target and seeds missing for two arms.

    Example:
      >>> round(fisher_exact([[3, 1], [1, 3]]), 4)  # Fisher's tea tasting: 34 / 70
      0.4857
    """
    (a, b), (c, d) = ((int(x) for x in row) for row in table)
    if min(a, b, c, d) < 0:
        raise ValueError(f"a 2x2 table holds counts >= 0, got {table!r}")
    row, col, n = a + b, a + c, a + b + c + d

    def weight(x: int) -> int:  # tables with top-left x, times C(n, row)
        return math.comb(col, x) * math.comb(n - col, row - x)

    observed = weight(a)
    tail = sum(
        w for x in range(max(0, row + col - n), min(row, col) + 1) if (w := weight(x)) <= observed
    )
    return tail / math.comb(n, row)


def reached_curve(values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """``f[len(grid)]``: the share of runs that reached the target by each grid point.

    Every run is censored at the same budget, so the Kaplan-Meier estimate of "reached by x"
    is this empirical share (it never rises past the budget).
    """
    v = np.asarray(values, np.float64)
    return (v[None, :] <= np.asarray(grid, np.float64)[:, None]).mean(axis=1)


def fmt_count(value: float, *, bound: float | None = None) -> str:
    """``12,345``; a miss prints as ``> budget`` when ``bound`` is given, else ``-``."""
    if np.isnan(value):
        return "-"
    if np.isinf(value):
        return f"> {bound:,.0f}" if bound is not None else "-"
    return f"{value:,.0f}"


def fmt_censored(values: np.ndarray, stat: Stat, budget: float | np.ndarray) -> str:
    """``stat`` over the runs as text; where a miss enters it, ``> x`` with ``x`` the same
    statistic with every miss counted at ``budget`` (scalar, or ``f[S]`` one per run): all
    the data say, as a miss needed more. The median of ten runs of which the upper five
    missed is above the mean of the fifth hit and the budget, not above the budget."""
    v = np.asarray(values, np.float64)
    return fmt_count(stat(v), bound=stat(np.minimum(v, budget)))


def fmt_censored_interval(
    values: np.ndarray,
    stat: Stat,
    budget: float | np.ndarray,
    interval: tuple[float, float, float] | None = None,
    **kwargs: Any,
) -> str:
    """``12,345 [10,000, 15,000]``: ``stat`` and its :func:`censored_bootstrap` interval
    (``kwargs`` passed on; ``interval``: that result where the caller has it already), each
    value a miss enters written as in :func:`fmt_censored` (its bound from the same resamples
    with every miss counted at ``budget``); a finite lower end is the one with misses at
    ``budget``."""
    v = np.asarray(values, np.float64)
    point, lo, hi = bootstrap(v, stat, **kwargs) if interval is None else interval
    floors = bootstrap(np.minimum(v, budget), stat, **kwargs)
    if np.isfinite(lo):  # the lower end censored_bootstrap takes
        lo = floors[1]
    point_text, lo_text, hi_text = (
        fmt_count(x, bound=f) for x, f in zip((point, lo, hi), floors, strict=True)
    )
    return f"{point_text} [{lo_text}, {hi_text}]"


def fmt_difference(point: float, lo: float, hi: float) -> str:
    """``+0.052 [-0.010, +0.118]``."""
    return f"{point:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def _one(x: float) -> str:
    if np.isnan(x):
        return "-"
    if np.isinf(x):
        return "inf"
    return f"{x:.2f}"


def fmt_ratio_interval(r: Ratio) -> str:
    """``[1.40, 3.05]``, with an open end written open: ``[1.81, inf)``, ``(0, 0.41]``."""
    low = "(0" if r.low == 0 else f"[{_one(r.low)}"
    high = "inf)" if np.isinf(r.high) else f"{_one(r.high)}]"
    return f"{low}, {high}"


def fmt_p(p: float) -> str:
    """A p-value to three decimals; one that rounds to 0 prints as ``< 0.001`` (a p-value
    is never 0)."""
    return "< 0.001" if p < 0.0005 else f"{p:.3f}"


def fmt_ratio(r: Ratio) -> str:
    """``2.10x [1.40, 3.05]``; a point that is only a bound carries its direction
    (``>= 2.86x [1.81, inf)``), an unknown one prints as ``-``, open ends as in
    :func:`fmt_ratio_interval`."""
    prefix = f"{r.bound} " if r.bound in (">=", "<=") else ""
    point = "-" if np.isnan(r.point) else f"{prefix}{_one(r.point)}x"
    return f"{point} {fmt_ratio_interval(r)}"
