"""Statistics for studies that race arms to a target at an equal rollout budget.

A run that never reaches the target within the budget is **censored**: its time-to-target is
only known to exceed the budget. Here a miss is ``inf``, so order statistics (the median, the
interquartile mean) stay honest: a median over seeds is finite only when more than half of
them reached the target, and an interval's upper end is ``inf`` when the data cannot bound it.
Intervals are percentile bootstraps over seeds; quantiles are taken as order statistics
(``method="inverted_cdf"``), never interpolated towards ``inf``.

Example:
  >>> hits = first_hit(np.array([[10, 20, 30]]), np.array([[0.1, 0.6, 0.9]]), 0.5)
  >>> hits.tolist()
  [20.0]
  >>> point, lo, hi = bootstrap(np.array([10.0, 12.0, np.inf, 11.0]), median)
  >>> gain, lo, hi = difference_bootstrap(np.array([0.5, 0.6]), np.array([0.7, 0.6]))
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Stat = Callable[[np.ndarray], float]


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
    reps: int = 4000,
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
    v = np.asarray(values, np.float64)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, v.size, size=(reps, v.size))
    samples = np.array([stat(v[i]) for i in idx])
    return (stat(v), *_quantiles(samples, level))


def difference_bootstrap(
    base: np.ndarray,
    arm: np.ndarray,
    stat: Stat = mean,
    *,
    paired: bool = True,
    reps: int = 4000,
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
    b, a = np.asarray(base, np.float64), np.asarray(arm, np.float64)
    if paired and a.shape != b.shape:
        raise ValueError(
            f"a paired difference needs one value per seed in each arm, got {b.shape} and "
            f"{a.shape}; pass paired=False for independent runs"
        )
    rng = np.random.default_rng(seed)
    ib = rng.integers(0, b.size, size=(reps, b.size))
    ia = ib if paired else rng.integers(0, a.size, size=(reps, a.size))
    samples = np.array([stat(a[j]) - stat(b[i]) for i, j in zip(ib, ia)])
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


def ratio_bootstrap(
    base: np.ndarray,
    arm: np.ndarray,
    stat: Stat = median,
    *,
    reps: int = 4000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``stat(base) / stat(arm)`` with a bootstrap interval, resampling each arm's runs
    independently. Above 1 favours ``arm`` (it needs fewer rollouts than ``base``).

    A resample where both statistics are misses has no ratio and is left out; where only the
    base's is a miss the ratio is ``inf`` (the arm reached, the base did not).
    """
    b, a = np.asarray(base, np.float64), np.asarray(arm, np.float64)
    rng = np.random.default_rng(seed)
    ib = rng.integers(0, b.size, size=(reps, b.size))
    ia = rng.integers(0, a.size, size=(reps, a.size))
    samples = np.array([_ratio(stat(b[i]), stat(a[j])) for i, j in zip(ib, ia)])
    return (_ratio(stat(b), stat(a)), *_quantiles(samples, level))


def censored_ratio(
    base: np.ndarray,
    arm: np.ndarray,
    budget: float,
    stat: Stat = median,
    *,
    reps: int = 4000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float, str]:
    """:func:`ratio_bootstrap` with every miss counted as the ``budget`` it was censored at,
    and which way the result bounds the true ratio.

    A statistic over runs that includes a miss is only known to be at least what the budget
    gives it, so: the base's statistic censored (and not the arm's) makes the ratio a lower
    bound (``">="``); the arm's censored makes it an upper bound (``"<="``); both censored
    leaves it unknown (``"?"``, the point is ``nan``); neither gives the ratio (``""``). The
    interval resamples the censored values the same way.

    Returns:
      ``(point, low, high, kind)``.
    """
    b, a = np.asarray(base, np.float64), np.asarray(arm, np.float64)
    censored_b, censored_a = np.isinf(stat(b)), np.isinf(stat(a))
    kind = {(False, False): "", (True, False): ">=", (False, True): "<=", (True, True): "?"}[
        (bool(censored_b), bool(censored_a))
    ]
    cb, ca = np.minimum(b, budget), np.minimum(a, budget)
    point, lo, hi = ratio_bootstrap(cb, ca, stat, reps=reps, level=level, seed=seed)
    if kind == "?":
        point = float("nan")
    return point, lo, hi, kind


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


def fmt_interval(point: float, lo: float, hi: float, *, bound: float | None = None) -> str:
    """``12,345 [10,000, 15,000]`` with misses shown as in :func:`fmt_count`."""
    return (
        f"{fmt_count(point, bound=bound)} "
        f"[{fmt_count(lo, bound=bound)}, {fmt_count(hi, bound=bound)}]"
    )


def fmt_difference(point: float, lo: float, hi: float) -> str:
    """``+0.052 [-0.010, +0.118]``."""
    return f"{point:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def fmt_ratio(point: float, lo: float, hi: float, kind: str = "") -> str:
    """``2.10x [1.40, 3.05]``; an unbounded end prints as ``inf``, an undefined one as ``-``
    (an undefined ratio, both arms missing, prints as ``-``); ``kind`` (see
    :func:`censored_ratio`) prefixes a bound: ``>= 2.10x [...]``."""

    def one(x: float) -> str:
        if np.isnan(x):
            return "-"
        if np.isinf(x):
            return "inf"
        return f"{x:.2f}"

    if np.isnan(point):
        return "-"
    prefix = f"{kind} " if kind in (">=", "<=") else ""
    return f"{prefix}{one(point)}x [{one(lo)}, {one(hi)}]"
