"""A finished study's tables (Markdown) and per-seed numbers (JSON), and reading them back."""

from __future__ import annotations

import json
import os
from typing import NamedTuple

import numpy as np

from experiments import _markdown as md
from experiments import _stats as S
from experiments._builders import GRPOExperimentConfig
from experiments.compare.config import CompareConfig, budget, find_arm, shown_categories


def reach(curve: dict, target: float, field: str = "rollouts") -> np.ndarray:
    """``f64[S]``: per seed, ``field`` (rollouts, updates) at the first evaluation at target
    (``inf``: a miss)."""
    return S.first_hit(curve[field], curve["held_out"], target)


def summarize(config: CompareConfig, curves: dict[str, dict]) -> tuple[str, dict]:
    """The markdown tables and the JSON data of a finished study."""
    exp = config.experiment
    target = exp.target
    g, k = exp.groups_per_generation, exp.group_size
    spend = budget(config)
    base = curves.get(config.baseline)
    base_reach = reach(base, target) if base is not None else None
    rows, data = [], {}
    for name, c in curves.items():
        hits = reach(c, target)
        upd = reach(c, target, "updates")
        final = c["held_out"][:, -1]
        med = S.bootstrap(hits, S.median)
        iq = S.bootstrap(hits, S.iqm)
        ratio_values = None
        if base_reach is not None and name != config.baseline:
            ratio_values = S.censored_ratio(base_reach, hits, spend, S.median)
            ratio = S.fmt_ratio(*ratio_values)
        else:
            ratio = "1 (baseline)" if name == config.baseline else "-"
        signal = c["signal"].sum() / c["groups"].sum()
        data[name] = {
            "rollouts_to_target": [None if np.isinf(x) else float(x) for x in hits],
            "updates_to_target": [None if np.isinf(x) else float(x) for x in upd],
            "final_held_out": final.tolist(),
            "final_levels": c["levels"][:, -1].tolist(),
            "final_updates": c["updates"][:, -1].tolist(),
            "signal_share": (c["signal"].sum(1) / c["groups"].sum(1)).tolist(),
            "admission_rate": (c["admitted"].sum(1) / c["groups"].sum(1)).tolist(),
            "draw_share": (c["draws"].sum(1) / c["draws"].sum((1, 2))[:, None]).tolist(),
            "category_names": c["category_names"],
            "curve_rollouts": c["rollouts"][0].tolist(),
            "curve_held_out": c["held_out"].tolist(),
            "seconds": c["seconds"],
            "load": list(c["load"]),
            "median": _finite(med),
            "iqm": _finite(iq),
            "ratio_to_baseline": None if ratio_values is None else _finite(ratio_values[:3]),
            "ratio_kind": None if ratio_values is None else ratio_values[3],
        }
        rows.append(
            [
                name,
                f"{np.isfinite(hits).sum()}/{hits.size}",
                S.fmt_interval(*med, bound=spend),
                S.fmt_interval(*iq, bound=spend),
                ratio,
                f"{final.mean():.3f} ± {final.std():.3f}",
                S.fmt_count(S.median(upd), bound=c["updates"][:, -1].max()),
                f"{c['updates'][:, -1].mean():,.0f}",
                f"{signal:.2f}",
            ]
        )
    levels = list(exp.task.target_levels)
    title = f"{config.title}: " if config.title else ""
    overrides = [n for n in curves if find_arm(config, n).get("experiment")]
    header = (
        f"{title}{exp.task.family}, levels {list(exp.task.pool_levels)} with pool shares "
        f"{_shares(exp)}{_distractor_text(exp)}; pool of {exp.task.size} entries. "
        f"Budget {spend:,} rollouts per run ({config.generations} generation batches of {g} "
        f"groups x {k} rollouts); {config.seeds} seeds per arm; target: held-out exact match "
        f">= {target} on levels {levels}, evaluated every {config.eval_every} batches "
        f"({config.eval_every * g * k:,} rollouts). Intervals: bootstrap 95% over seeds; a seed "
        f"that misses counts as > budget. Ratios count a miss as the budget: >= marks a lower "
        f"bound (the baseline's median missed), <= an upper bound (the arm's did), - unknown."
        + (f" Arms with their own settings: {overrides}." if overrides else "")
    )
    main = md.table(
        [
            "arm",
            "seeds at target",
            "rollouts to target: median [95% CI]",
            "IQM [95% CI]",
            f"{config.baseline} / arm (median) [95% CI]",
            "final held-out (mean ± sd)",
            "updates to target (median)",
            "updates in budget (mean)",
            "groups with signal",
        ],
        rows,
    )
    names = next(iter(curves.values()))["category_names"]
    pool_levels = list(exp.task.pool_levels)
    cats = shown_categories(config, names)
    draws = "\n\nShare of each arm's draws per category (mean over seeds):\n\n" + md.table(
        ["arm", *(names[i] for i in cats)],
        (
            [name, *(f"{x:.2f}" for x in np.asarray(data[name]["draw_share"]).mean(0)[cats])]
            for name in curves
        ),
    )
    per_level = (
        "\n\nFinal held-out exact match per level (mean over seeds; - : no held-out task):\n\n"
        + md.table(
            ["arm", *(f"level {lv}" for lv in pool_levels)],
            (
                [name, *(_fmt_level(x) for x in _mean_finite(c["levels"][:, -1])[pool_levels])]
                for name, c in curves.items()
            ),
        )
    )
    wall = (
        "\n\nWall time per arm (all seeds, compile included): "
        + ", ".join(
            f"{n} {c['seconds']:.0f} s (load {c['load'][0]:.1f}-{c['load'][1]:.1f})"
            for n, c in curves.items()
        )
        + "\n"
    )
    rates = pass_rate_table(config, curves, data)
    best = best_of_text(config, curves)
    return header + "\n\n" + main + best + draws + per_level + rates + wall, data


def best_of(config: CompareConfig, curves: dict[str, dict]) -> list[dict]:
    """Per ``best_of`` group, its best arm (lowest median rollouts to target, a miss counting
    as infinite; ties: more seeds at target) and, after the first group, the first group's
    best over it: ``(point, low, high, kind)`` of :func:`~experiments._stats.censored_ratio`."""
    exp = config.experiment
    spend = budget(config)
    out = []
    for group in config.best_of:
        hits = {n: reach(curves[n], exp.target) for n in group if n in curves}
        if not hits:
            continue
        name = min(hits, key=lambda n: (S.median(hits[n]), -np.isfinite(hits[n]).sum()))
        entry = {"group": list(group), "best": name, "median": S.median(hits[name])}
        if out:
            first = reach(curves[out[0]["best"]], exp.target)
            entry["ratio_from_first"] = S.censored_ratio(first, hits[name], spend, S.median)
        out.append(entry)
    return out


def best_of_json(entry: dict) -> dict:
    """One :func:`best_of` entry, JSON-safe (a miss or an unbounded end as ``None``)."""
    out = {**entry, "median": _finite([entry["median"]])[0]}
    if "ratio_from_first" in entry:
        *ratio, kind = entry["ratio_from_first"]
        out.update(ratio_from_first=_finite(ratio), ratio_kind=kind)
    return out


def best_of_text(config: CompareConfig, curves: dict[str, dict]) -> str:
    """The ``best_of`` paragraph of the study's table ('' without two groups run)."""
    entries = best_of(config, curves)
    if len(entries) < 2:
        return ""
    spend = budget(config)
    first = entries[0]["best"]
    parts = [f"{e['best']} (median {S.fmt_count(e['median'], bound=spend)})" for e in entries]
    ratios = [f"{first} / {e['best']}: {S.fmt_ratio(*e['ratio_from_first'])}" for e in entries[1:]]
    return (
        "\n\nEach group's best arm (lowest median rollouts to target): "
        + "; ".join(parts)
        + ". Best against best (median, 95% CI): "
        + "; ".join(ratios)
        + "."
    )


def pass_rate_split(c: dict) -> dict[str, np.ndarray] | None:
    """Shares of each category's probed tasks never (``never``), sometimes (``sometimes``) and
    always (``always``) solved by the probe, ``f[S, E, C]``, and ``offered``: the share of
    groups that would carry a signal if drawn uniformly over the pool's entries at that
    moment, ``f[S, E]`` (None without pass-rate diagnostics)."""
    if "pass_rate" not in c:
        return None
    p, cat = np.asarray(c["pass_rate"]), np.asarray(c["probe_category"])
    num_cat = len(c["category_names"])
    onehot = np.eye(num_cat)[cat]  # [R, C]
    count = np.maximum(onehot.sum(0), 1)
    out = {
        "never": (p == 0) @ onehot / count,
        "sometimes": ((p > 0) & (p < 1)) @ onehot / count,
        "always": (p == 1) @ onehot / count,
    }
    entries = np.asarray(c["category_entries"], np.float64)
    out["offered"] = out["sometimes"] @ (entries / entries.sum())
    return out


def pass_rate_table(config: CompareConfig, curves: dict[str, dict], data: dict) -> str:
    """The pass-rate diagnostics as markdown (empty when they are off), and per-seed numbers
    into ``data``."""
    splits = {n: pass_rate_split(c) for n, c in curves.items()}
    if not any(v is not None for v in splits.values()):
        return ""
    exp = config.experiment
    names = next(iter(curves.values()))["category_names"]
    cats = shown_categories(config, names)
    target = list(exp.task.target_levels)
    rows = []
    for name, sp in splits.items():
        if sp is None:
            continue
        c = curves[name]
        cat = np.asarray(c["probe_category"])
        in_target = np.isin(cat, target)
        p = np.asarray(c["pass_rate"])[:, :, in_target]
        never, always = (p == 0).mean(), (p == 1).mean()
        sometimes = 1.0 - never - always
        # Tasks that went from never solved (first evaluation) to always solved (last): how
        # many evaluations they spent in between, sometimes solved.
        crossed = (p[:, 0] == 0) & (p[:, -1] == 1)
        between = ((p > 0) & (p < 1)).sum(1)[crossed]
        data[name]["pass_rates"] = {
            "sometimes_by_category": sp["sometimes"].mean(1).tolist(),
            "never_by_category": sp["never"].mean(1).tolist(),
            "always_by_category": sp["always"].mean(1).tolist(),
            "offered_signal_share": sp["offered"].mean(1).tolist(),
            "target_sometimes": float(sometimes),
            "evaluations_between": between.tolist(),
        }
        mid = f"{np.median(between):.0f} ({crossed.sum()} tasks)" if between.size else "-"
        own = c["signal"].sum() / c["groups"].sum()
        rows.append(
            [
                name,
                f"{never:.2f} / {sometimes:.2f} / {always:.2f}",
                *(f"{x:.2f}" for x in sp["sometimes"].mean((0, 1))[cats]),
                f"{sp['offered'].mean():.2f}",
                f"{own:.2f}",
                mid,
            ]
        )
    probed = next(c for c in curves.values() if "pass_rate" in c)
    per_cat = np.bincount(np.asarray(probed["probe_category"]), minlength=len(names))
    return (
        f"\n\nPass rates measured by a free probe ({config.pass_rate_samples} rollouts per "
        f"distinct task at the run's temperature, at every evaluation; tasks probed per "
        f"category: {', '.join(f'{names[i]} {per_cat[i]}' for i in cats)}), mean over "
        "evaluations and seeds. A task with 0 < p < 1 in its probe is one whose group would "
        "carry a learning signal. 'Offered': the share of groups with a signal that uniform "
        "draws over the pool would have got at that moment; 'own': the arm's own share. "
        "'Between': evaluations a target task spent sometimes solved on its way from never "
        f"(first evaluation) to always (last), median over such tasks and seeds (an evaluation "
        f"every {config.eval_every * exp.groups_per_generation * exp.group_size:,} rollouts)."
        "\n\n"
        + md.table(
            [
                "arm",
                f"target levels {target}: never / sometimes / always solved",
                *(f"{names[i]}: sometimes" for i in cats),
                "offered",
                "own",
                "between",
            ],
            rows,
        )
    )


class StudyResult(NamedTuple):
    """What a finished study measured for one arm, as the main job quotes it.

    ``median`` and ``baseline_median`` are rollouts to target (None: a miss); ``ratio`` is the
    baseline's median over the arm's, ``(point, low, high)`` with ``inf`` for an open end
    (None without a ratio); ``ratio_kind`` ``">="`` / ``"<="`` when it bounds the true ratio."""

    arm: str
    baseline: str
    seeds: int
    reached: int
    median: float | None
    baseline_median: float | None
    ratio: tuple[float, float, float] | None
    ratio_kind: str
    command: str


def study_result(path: str, arm: str) -> StudyResult | str:
    """Reads what the study saved at ``path`` (its ``compare.json``) measured for ``arm``.

    Returns:
      A :class:`StudyResult`, or a sentence saying why there is none (no such file, no such
      arm), for the caller to print in its place.
    """
    if not os.path.exists(path):
        return f"the study {path} is not there; run it to compare"
    with open(path) as f:
        study = json.load(f)
    data = study["arms"].get(arm)
    if data is None:
        return f"the study {path} has no arm {arm!r}"
    base = study["config"]["baseline"]
    ratio = data.get("ratio_to_baseline")
    if ratio is not None and ratio[0] is None:
        ratio = None
    hits = data["rollouts_to_target"]
    return StudyResult(
        arm=arm,
        baseline=base,
        seeds=len(hits),
        reached=sum(x is not None for x in hits),
        median=data["median"][0],
        baseline_median=study["arms"][base]["median"][0] if base in study["arms"] else None,
        ratio=None if ratio is None else tuple(float("inf") if x is None else x for x in ratio),
        ratio_kind=data.get("ratio_kind") or "",
        command=study.get("command", "python -m experiments.compare"),
    )


def _finite(values) -> list[float | None]:
    """JSON-safe: ``inf`` (a miss, an unbounded end) and ``nan`` as ``None``."""
    return [float(x) if np.isfinite(x) else None for x in values]


def _mean_finite(x: np.ndarray) -> np.ndarray:
    """Mean over seeds (axis 0) per level; NaN where a level has no held-out task."""
    ok = np.isfinite(x)
    return np.where(ok.any(0), np.where(ok, x, 0).sum(0) / np.maximum(ok.sum(0), 1), np.nan)


def _fmt_level(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{x:.2f}"


def _shares(exp: GRPOExperimentConfig) -> str:
    m = exp.task.mass
    return "[" + ", ".join(f"{m[lv]:.2f}" for lv in exp.task.pool_levels) + "]"


def _distractor_text(exp: GRPOExperimentConfig) -> str:
    t = exp.task
    if not t.distractors:
        return ""
    return f", plus {t.distractors:.0%} coin-flip distractors (reward 1 w.p. {t.distractor_p})"
