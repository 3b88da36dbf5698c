"""A finished study's tables (Markdown) and per-seed numbers (JSON), and reading them back."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import NamedTuple

import numpy as np

from curriculax import tasks as T
from experiments import _cli
from experiments import _markdown as md
from experiments import _stats as S
from experiments._builders import GRPOExperimentConfig, make_study_pool
from experiments._environment import describe_all
from experiments._oracle import probe_rows
from experiments.compare.cache import NOT_RUN, as_floats
from experiments.compare.config import (
    CompareConfig,
    arm_experiment,
    budget,
    find_arm,
    shown_categories,
)
from experiments.compare.noise import noise_diagnostic


def reach(curve: dict, target: float, field: str = "rollouts") -> np.ndarray:
    """``f64[S]``: per seed, ``field`` (rollouts, updates) at the first evaluation at target
    (``inf``: a miss)."""
    return S.first_hit(curve[field], curve["held_out"], target)


def summarize(config: CompareConfig, curves: dict[str, dict]) -> tuple[str, dict]:
    """The markdown tables and the JSON data of a finished study."""
    data = seed_data(config, curves)
    return tables(config, data), data


def sometimes(c: dict, target_levels) -> np.ndarray:
    """``f64[S, E]`` the third panel's per-seed curve: the share of probed target-level tasks
    with 0 < p < 1 at each evaluation, from an arm's probes (``pass_rate``) or as stored
    (``sometimes``, :func:`~experiments.compare.plot.stored_curves`)."""
    if "sometimes" in c:
        return np.asarray(c["sometimes"], float)
    in_target = np.isin(c["probe_category"], target_levels)
    p = c["pass_rate"][:, :, in_target]
    return ((p > 0) & (p < 1)).mean(axis=2)


def seed_data(config: CompareConfig, curves: dict[str, dict]) -> dict[str, dict]:
    """Per arm, the per-seed numbers the tables are made from (the JSON's ``arms``), from the
    arms' curves."""
    target = config.experiment.target
    data = {}
    for name, c in curves.items():
        hits = reach(c, target)
        upd = reach(c, target, "updates")
        data[name] = {
            "rollouts_to_target": [None if np.isinf(x) else float(x) for x in hits],
            "updates_to_target": [None if np.isinf(x) else float(x) for x in upd],
            # null, not NaN (not JSON): a seed with no held-out score, a level without a
            # held-out task
            "final_held_out": _nan_as_null(c["held_out"][:, -1]),
            "final_levels": _nan_as_null(c["levels"][:, -1]),
            "final_updates": c["updates"][:, -1].tolist(),
            "signal_share": (c["signal"].sum(1) / c["groups"].sum(1)).tolist(),
            "admission_rate": (c["admitted"].sum(1) / c["groups"].sum(1)).tolist(),
            "draw_share": (c["draws"].sum(1) / c["draws"].sum((1, 2))[:, None]).tolist(),
            "category_names": c["category_names"],
            "curve_rollouts": c["rollouts"][0].tolist(),
            "curve_held_out": _nan_as_null(c["held_out"]),
            "seconds": c["seconds"],
            "load": list(c["load"]),
            "environment": c.get("environment"),
        }
        if "task_draws" in c:  # absent from arms saved before per-entry draws were kept
            pool = make_study_pool(arm_experiment(config, find_arm(config, name)))
            spread = draw_spread(
                c["task_draws"],
                c["entry_category"],
                len(c["category_names"]),
                T.distinct_tasks(pool.train),
            )
            data[name]["draw_spread"] = [
                [None if np.isnan(x) else float(x) for x in row] for row in spread
            ]
        rates = _pass_rate_data(config, c)
        if rates is not None:
            data[name]["pass_rates"] = rates
            # the figure's third panel, per seed, so --report can redraw it
            target = config.experiment.task.target_levels
            data[name]["curve_sometimes"] = _nan_as_null(sometimes(c, target))
        if "step0_pass_rate" in c:
            data[name]["step0"] = step0_data(c["step0_pass_rate"], c["step0_category"])
        if "forgotten_share" in c:  # absent: an arm that does not skip, or saved before
            data[name]["replay"] = {
                "target_share": np.round(c["replay_target_share"], 4).tolist(),
                "forgotten_share": np.round(c["forgotten_share"], 4).tolist(),
            }
        if "noise_coin_flagged" in c:  # absent: not recorded (an arm saved before, or none)
            data[name]["noise_flags"] = {
                "unit": c["noise_unit"],
                "coin_flips_flagged": _finite(c["noise_coin_flagged"]),
                "real_flagged": _finite(c["noise_real_flagged"]),
            }
    return data


def draw_spread(
    task_draws: np.ndarray,
    entry_category: np.ndarray,
    num_cat: int,
    entry_task: np.ndarray | None = None,
) -> np.ndarray:
    """``f64[S, C]``: how spread each seed's draws within each category were, per evaluation
    interval: the distinct tasks drawn at least once over the number ``n (1 - (1 - 1/n)**d)``
    that ``d`` independent uniform draws over the category's ``n`` tasks reach on average,
    ``d`` the interval's draws in the category; the mean over intervals with draws (NaN: none).
    1: as spread as uniform draws; below 1: the arm drew some tasks again and left others.
    A pool that repeats a task over several entries counts its copies as one task (a sampler
    that shares their state may draw any copy).

    Args:
      task_draws: ``int[S, E, N]`` draws of each pool entry per evaluation interval.
      entry_category: ``int[N]`` each entry's category.
      num_cat: the number of categories ``C``.
      entry_task: ``int[N]`` each entry's first entry with the same task
        (:func:`curriculax.tasks.distinct_tasks`), or None (every entry a task of its own).
    """
    counts = np.asarray(task_draws, np.float64)
    n_entries = counts.shape[-1]
    onehot = np.eye(num_cat, dtype=np.float64)[np.asarray(entry_category)]  # [N, C]
    if entry_task is not None:  # each copy's draws to its first entry; only those count
        rep = np.asarray(entry_task)
        flat = counts.reshape(-1, n_entries)
        summed = np.zeros_like(flat)
        np.add.at(summed, (slice(None), rep), flat)  # O(S E N), not an N x N matrix
        counts = summed.reshape(counts.shape)
        onehot = onehot * (rep == np.arange(n_entries))[:, None]
    d = counts @ onehot  # [S, E, C]
    drawn = (counts > 0) @ onehot
    n = onehot.sum(0)  # [C]
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = n * (1.0 - (1.0 - 1.0 / n) ** d)
        ok = d > 0
        spread = np.where(ok, drawn / np.where(ok, expected, 1.0), 0.0)
        return spread.sum(1) / ok.sum(1)  # NaN where a category had no draws


def spread_table(config: CompareConfig, data: dict[str, dict]) -> str:
    """:func:`draw_spread` per arm and category as markdown (mean over seeds; ``-``: not
    recorded or no draws there); empty when no arm has it."""
    if not any("draw_spread" in d for d in data.values()):
        return ""
    names = next(iter(data.values()))["category_names"]
    cats = shown_categories(config, names)
    rows = []
    for name, d in data.items():
        spread = d.get("draw_spread")
        if spread is None:
            rows.append([name, *("-" for _ in cats)])
            continue
        x = np.array([[np.nan if v is None else v for v in row] for row in spread], np.float64)
        means = [x[:, i][np.isfinite(x[:, i])] for i in cats]
        rows.append([name, *(f"{m.mean():.2f}" if m.size else "-" for m in means)])
    return (
        "\n\nHow spread each arm's draws were within a category, per evaluation interval: "
        "the distinct tasks it drew over the number as many independent uniform draws over the "
        "category's distinct tasks reach on average (1: as spread as uniform; below 1: some "
        "tasks drawn again and others left), mean over intervals with draws and over seeds; "
        "- : not recorded (an arm file saved before per-entry draws were kept) or never drawn.\n\n"
        + md.table(["arm", *(names[i] for i in cats)], rows)
    )


def noise_table(config: CompareConfig, data: dict[str, dict]) -> str:
    """The noise diagnostic's flag rates at the end of the budget as markdown, one row per arm
    whose sampler has the diagnostic (``-``: not recorded, or no entry of that kind); empty
    when no arm has it."""
    rows = []
    for name, d in data.items():
        diag = noise_diagnostic(find_arm(config, name))
        if diag is None:
            continue
        flags = d.get("noise_flags")
        cells = ["-", "-"]
        if flags is not None:
            cells = [_fmt_spread(flags[k]) for k in ("coin_flips_flagged", "real_flagged")]
        rows.append([name, f"per {diag.unit}", *cells])
    if not rows:
        return ""
    return (
        "\n\nNoise diagnostic at the end of the budget (docs/noise.md): the share of the pool's "
        "coin-flip entries and of its real entries that the arm's sampler flags as looking "
        "like noise (its own `noisy_tasks` / `noisy_categories` on each seed's final state, "
        "with the arm's thresholds; a flagged category flags every entry filed under it, as "
        "the samplers are told the categories), mean over seeds (min-max); - : not recorded "
        "(an arm file saved before the flags were kept) or no such entry in the pool.\n\n"
        + md.table(["arm", "flags", "coin flips flagged", "real entries flagged"], rows)
    )


def _fmt_spread(values) -> str:
    """``0.97 (0.95-1.00)``: mean (min-max) over seeds of the finite values; ``-`` if none."""
    x = np.array([np.nan if v is None else v for v in values], np.float64)
    x = x[np.isfinite(x)]
    if not x.size:
        return "-"
    return f"{x.mean():.2f} ({x.min():.2f}-{x.max():.2f})"


def step0_data(p: np.ndarray, category: np.ndarray) -> dict:
    """The step-0 histogram's per-seed numbers: per seed and category, the probed tasks never
    (p = 0), sometimes (0 < p < 1) and always (p = 1) solved by the initial policy."""
    p, category = np.asarray(p), np.asarray(category)
    num_cat = int(category.max()) + 1 if category.size else 0
    onehot = np.eye(num_cat, dtype=np.int64)[category]  # [R, C]
    return {
        "never": ((p == 0) @ onehot).tolist(),
        "sometimes": (((p > 0) & (p < 1)) @ onehot).tolist(),
        "always": ((p == 1) @ onehot).tolist(),
        "probed": onehot.sum(0).tolist(),
    }


def step0_table(config: CompareConfig, data: dict[str, dict]) -> str:
    """The step-0 histogram as markdown (empty when it is off). Every arm shares each seed's
    initial policy, so the first arm that has it stands for all."""
    d = next((d["step0"] for d in data.values() if "step0" in d), None)
    if d is None:
        return ""
    names = next(iter(data.values()))["category_names"]
    probed = np.asarray(d["probed"])
    shown = [c for c in shown_categories(config, names) if c < probed.size and probed[c]]
    counts = {k: np.asarray(d[k], np.float64) for k in ("never", "sometimes", "always")}
    total = probed.sum()
    rows = [
        [names[c], str(probed[c]), *(f"{counts[k][:, c].mean() / probed[c]:.2f}" for k in counts)]
        for c in shown
    ]
    rows.append(["pool", str(total), *(f"{counts[k].sum(1).mean() / total:.2f}" for k in counts)])
    return (
        f"\n\nPass rates of the initial policy ({_init_text(config.experiment.init)}; "
        f"{config.step0_samples} rollouts per distinct task at the run's temperature, at most "
        f"{config.pass_rate_per_category} tasks per category), share of probed tasks, mean over "
        "seeds:\n\n" + md.table(["category", "tasks probed", "never", "sometimes", "always"], rows)
    )


def _init_text(init) -> str:
    if init == "scratch":
        return "init scratch: random weights"
    base = init["base"]
    return f"init base {base!r}" if isinstance(base, str) else f"init base {base}"


def stored_hits(d: dict, field: str = "rollouts_to_target", arm: str | None = None) -> np.ndarray:
    """``f64[S]`` from the JSON's per-seed list (``None``: a miss, ``inf``). A NaN (a stored
    number that is neither a value nor a miss) is refused, naming ``arm`` and the seeds."""
    x = np.array([np.inf if v is None else v for v in d[field]], np.float64)
    if np.isnan(x).any():
        where = "an arm" if arm is None else f"arm {arm!r}"
        raise ValueError(
            f"{where}: {field} holds NaN at seeds {np.flatnonzero(np.isnan(x)).tolist()}; a "
            "seed's number is a value or null (a miss)"
        )
    return x


def compare_arms(base: np.ndarray, arm: np.ndarray, spend: float) -> dict:
    """``base``'s median rollouts to target over ``arm``'s: the ratio with an unpaired and a
    paired (by seed) bootstrap interval, Fisher's exact test on seeds at target, and the
    verdict the intervals allow (none below :data:`~experiments._stats.MIN_SEEDS` seeds)."""
    unpaired = S.censored_ratio(base, arm, spend, S.median)
    paired = (
        S.censored_ratio(base, arm, spend, S.median, paired=True) if base.size == arm.size else None
    )
    reached = [int(np.isfinite(arm).sum()), int(np.isfinite(base).sum())]
    fisher = S.fisher_exact(
        [[reached[0], arm.size - reached[0]], [reached[1], base.size - reached[1]]]
    )
    return {
        "ratio": unpaired,
        "paired": paired,
        # Why there is no paired interval, for the text (seeds pair only between equal counts).
        "unpaired_why": None if paired is not None else f"{base.size} vs {arm.size} seeds",
        "fisher_p": fisher,
        "verdict": S.verdict(
            *(r for r in (unpaired, paired) if r is not None), seeds=min(base.size, arm.size)
        ),
    }


_COMPARISON_KEYS = (
    "ratio_to_baseline",
    "ratio_bound",
    "ratio_kind",
    "ratio_paired",
    "ratio_paired_kind",
    "fisher_p",
    "verdict",
)


def _comparison_json(cmp: dict, key: str = "ratio_to_baseline") -> dict:
    """:func:`compare_arms`' result, JSON-safe: an ``inf`` or ``nan`` value as ``None``; an
    interval's open lower end stays ``0`` as in :class:`~experiments._stats.Ratio` (its
    ``ratio_kind`` / ``ratio_paired_kind`` says which ends are open)."""
    r, rp = cmp["ratio"], cmp["paired"]
    return {
        key: _finite(r[:3]),
        "ratio_bound": r.bound,
        "ratio_kind": r.kind,
        "ratio_paired": None if rp is None else _finite(rp[:3]),
        "ratio_paired_kind": None if rp is None else rp.kind,
        "fisher_p": cmp["fisher_p"],
        "verdict": cmp["verdict"],
    }


def _comparison_text(cmp: dict) -> str:
    """``>= 2.86x [1.81, inf); paired [1.82, inf)`` (``paired: none, 10 vs 6 seeds`` where
    the two ran different numbers of seeds)."""
    text = S.fmt_ratio(cmp["ratio"])
    if cmp["paired"] is not None:
        text += f"; paired {S.fmt_ratio_interval(cmp['paired'])}"
    elif cmp.get("unpaired_why"):
        text += f"; paired: none, {cmp['unpaired_why']}"
    return text


def tables(config: CompareConfig, data: dict[str, dict]) -> str:
    """The markdown tables of a finished study, from its per-seed numbers (:func:`seed_data`,
    or a stored ``compare.json``'s ``arms``); the statistics are written into ``data``."""
    exp = config.experiment
    target = exp.target
    g, k = exp.groups_per_generation, exp.group_size
    spend = budget(config)
    base = data.get(config.baseline)
    base_reach = stored_hits(base, arm=config.baseline) if base is not None else None
    rows = []
    for name, d in data.items():
        hits = stored_hits(d, arm=name)
        upd = stored_hits(d, "updates_to_target", arm=name)
        final = np.asarray(d["final_held_out"], np.float32)
        final_updates = np.asarray(d["final_updates"])
        med = S.censored_bootstrap(hits, S.median, spend)
        iq = S.censored_bootstrap(hits, S.iqm, spend)
        d.update(median=_finite(med), iqm=_finite(iq))
        for key in _COMPARISON_KEYS:  # redone below (a stored study may hold older ones)
            d.pop(key, None)
        if base_reach is not None and name != config.baseline:
            cmp = compare_arms(base_reach, hits, spend)
            d.update(_comparison_json(cmp))
            ratio, against, fisher = _comparison_text(cmp), cmp["verdict"], S.fmt_p(cmp["fisher_p"])
        else:
            ratio = "1 (baseline)" if name == config.baseline else "-"
            against, fisher = "-", "-"
            d.update(ratio_to_baseline=None, ratio_kind=None)
        signal = float(np.mean(d["signal_share"]))
        rows.append(
            [
                name,
                f"{np.isfinite(hits).sum()}/{hits.size}",
                fisher,
                S.fmt_censored_interval(hits, S.median, spend, med),
                S.fmt_censored_interval(hits, S.iqm, spend, iq),
                ratio,
                against,
                f"{final.mean():.3f} ± {final.std():.3f}",
                # a seed that missed needed more updates than it made
                S.fmt_censored(upd, S.median, final_updates),
                f"{final_updates.mean():,.0f}",
                f"{signal:.2f}",
            ]
        )
    levels = list(exp.task.target_levels)
    title = f"{config.title}: " if config.title else ""
    overrides = [n for n in data if find_arm(config, n).get("experiment")]
    header = (
        f"{title}{exp.task.family}, levels {list(exp.task.pool_levels)} with pool shares "
        f"{_shares(exp)}{_distractor_text(exp)}; pool of {exp.task.size} entries. "
        f"Budget {spend:,} rollouts per run ({config.generations} generation batches of {g} "
        f"groups x {k} rollouts); {config.seeds} seeds per arm; target: held-out exact match "
        f">= {target} on levels {levels}, evaluated every {config.eval_every} batches "
        f"({config.eval_every * g * k:,} rollouts). Intervals: bootstrap 95% over seeds "
        f"({S.REPS:,} resamples); a seed "
        f"that misses counts as > budget. Ratios: the baseline's median over the arm's, with a "
        f"bootstrap 95% interval resampling each arm on its own, then one resampling seeds "
        f"jointly (paired: seed i of every arm starts from the same initial policy). A miss is "
        f"only known to lie beyond the budget: a median that misses makes the ratio a bound "
        f"(>= when the baseline's missed, <= when the arm's did, - unknown), and an interval "
        f"end that resampled misses reach is open ([1.81, inf), (0, 0.41]). 'Against "
        f"{config.baseline}': beat where both intervals lie above 1 (under 2.5% of each one's "
        f"resamples at or below 1), lost where both lie below 1, borderline (neither claimed) "
        f"where that share is within {S.BORDERLINE:g} Monte Carlo standard errors of 2.5% for "
        f"an interval and no interval is clearly on the other side, did not beat otherwise; "
        f"not judged (N seeds) where an arm ran fewer than {S.MIN_SEEDS} seeds. Fisher p: "
        f"Fisher's exact test (two-sided) on the seeds at target, the arm's against the baseline's."
        + (f" Arms with their own settings: {overrides}." if overrides else "")
    )
    main = md.table(
        [
            "arm",
            "seeds at target",
            "Fisher p",
            "rollouts to target: median [95% CI]",
            "IQM [95% CI]",
            f"{config.baseline} / arm (median) [95% CI; paired]",
            f"against {config.baseline}",
            "final held-out (mean ± sd)",
            "updates to target (median)",
            "updates in budget (mean)",
            "groups with signal",
        ],
        rows,
    )
    names = next(iter(data.values()))["category_names"]
    pool_levels = list(exp.task.pool_levels)
    cats = shown_categories(config, names)
    draws = "\n\nShare of each arm's draws per category (mean over seeds):\n\n" + md.table(
        ["arm", *(names[i] for i in cats)],
        (
            [name, *(f"{x:.2f}" for x in np.asarray(d["draw_share"]).mean(0)[cats])]
            for name, d in data.items()
        ),
    )
    per_level = (
        "\n\nFinal held-out exact match per level (mean over seeds; - : no held-out task):\n\n"
        + md.table(
            ["arm", *(f"level {lv}" for lv in pool_levels)],
            (
                [
                    name,
                    *(
                        _fmt_level(x)
                        for x in _mean_finite(_float_rows(d["final_levels"]))[pool_levels]
                    ),
                ]
                for name, d in data.items()
            ),
        )
    )
    wall = (
        "\n\nWall time per arm (all seeds, compile included): "
        + ", ".join(
            f"{n} {d['seconds']:.0f} s (load {d['load'][0]:.1f}-{d['load'][1]:.1f})"
            for n, d in data.items()
        )
        + ".\n"
        + describe_all([d.get("environment") for d in data.values()])
        + "\n"
    )
    rates = pass_rate_table(config, data)
    best = best_of_text(config, data)
    step0 = step0_table(config, data)
    noise = noise_table(config, data)
    spread = spread_table(config, data)
    return header + "\n\n" + main + best + draws + spread + per_level + rates + step0 + noise + wall


def best_of(config: CompareConfig, data: dict[str, dict]) -> list[dict]:
    """Per ``best_of`` group, its best arm (lowest median rollouts to target, a miss counting
    as infinite; ties: more seeds at target) and, after the first group, the first group's
    best over it (``comparison``: :func:`compare_arms`)."""
    spend = budget(config)
    out = []
    for group in config.best_of:
        hits = {n: stored_hits(data[n], arm=n) for n in group if n in data}
        if not hits:
            continue
        name = min(hits, key=lambda n: (S.median(hits[n]), -np.isfinite(hits[n]).sum()))
        entry = {"group": list(group), "best": name, "median": S.median(hits[name])}
        if out:
            first = stored_hits(data[out[0]["best"]], arm=out[0]["best"])
            entry["comparison"] = compare_arms(first, hits[name], spend)
        out.append(entry)
    return out


def best_of_json(entry: dict) -> dict:
    """One :func:`best_of` entry, JSON-safe (a miss or an unbounded end as ``None``)."""
    out = {k: v for k, v in entry.items() if k != "comparison"}
    out["median"] = _finite([entry["median"]])[0]
    if "comparison" in entry:
        out.update(_comparison_json(entry["comparison"], "ratio_from_first"))
    return out


def best_of_text(config: CompareConfig, data: dict[str, dict]) -> str:
    """The ``best_of`` paragraph of the study's table ('' without two groups run)."""
    entries = best_of(config, data)
    if len(entries) < 2:
        return ""
    spend = budget(config)
    first = entries[0]["best"]
    medians = {
        e["best"]: S.fmt_censored(stored_hits(data[e["best"]], arm=e["best"]), S.median, spend)
        for e in entries
    }
    parts = [f"{e['best']} (median {medians[e['best']]})" for e in entries]
    ratios = [
        f"{first} / {e['best']}: {_comparison_text(e['comparison'])}, "
        f"{e['comparison']['verdict']} (Fisher p {S.fmt_p(e['comparison']['fisher_p'])})"
        for e in entries[1:]
    ]
    sizes = [len(e["group"]) for e in entries]
    unequal = (
        f" The groups hold {' vs '.join(map(str, sizes))} arms: the best of more arms gains "
        "more from the choice."
        if len(set(sizes)) > 1
        else ""
    )
    return (
        "\n\nEach group's best arm (lowest median rollouts to target): "
        + "; ".join(parts)
        + ". Best against best (median, 95% CI; paired): "
        + "; ".join(ratios)
        + ". The best arms were chosen on these same seeds; the intervals are not adjusted for "
        "that choice." + unequal
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


def _pass_rate_data(config: CompareConfig, c: dict) -> dict | None:
    """The pass-rate diagnostics' per-seed numbers of one arm (None when they are off)."""
    sp = pass_rate_split(c)
    if sp is None:
        return None
    cat = np.asarray(c["probe_category"])
    in_target = np.isin(cat, list(config.experiment.task.target_levels))
    p = np.asarray(c["pass_rate"])[:, :, in_target]
    never, always = (p == 0).mean(), (p == 1).mean()
    # Tasks that went from never solved (first evaluation) to always solved (last): how
    # many evaluations they spent in between, sometimes solved.
    crossed = (p[:, 0] == 0) & (p[:, -1] == 1)
    between = ((p > 0) & (p < 1)).sum(1)[crossed]
    return {
        "sometimes_by_category": sp["sometimes"].mean(1).tolist(),
        "never_by_category": sp["never"].mean(1).tolist(),
        "always_by_category": sp["always"].mean(1).tolist(),
        "offered_signal_share": sp["offered"].mean(1).tolist(),
        "target_never": float(never),
        "target_always": float(always),
        "target_sometimes": float(1.0 - never - always),
        "evaluations_between": between.tolist(),
        "probed_per_category": np.bincount(cat, minlength=len(c["category_names"])).tolist(),
    }


def _probed_per_category(config: CompareConfig, name: str) -> np.ndarray:
    """Tasks the pass-rate probe measured per category, from the arm's pool (for a study saved
    before ``compare.json`` kept the counts)."""
    exp = arm_experiment(config, find_arm(config, name))
    return probe_rows(make_study_pool(exp), config.pass_rate_per_category).probed


def pass_rate_table(config: CompareConfig, data: dict[str, dict]) -> str:
    """The pass-rate diagnostics as markdown (empty when they are off)."""
    probed = {n: d for n, d in data.items() if "pass_rates" in d}
    if not probed:
        return ""
    exp = config.experiment
    names = next(iter(data.values()))["category_names"]
    cats = shown_categories(config, names)
    target = list(exp.task.target_levels)
    rows, per_cat = [], None
    for name, d in probed.items():
        pr = d["pass_rates"]
        counts = pr.get("probed_per_category")
        counts = np.asarray(counts) if counts is not None else _probed_per_category(config, name)
        per_cat = counts if per_cat is None else per_cat
        if "target_never" in pr:
            never, always = pr["target_never"], pr["target_always"]
        else:  # saved before the counts were: the same means, weighted by tasks per category
            w = np.where(np.isin(np.arange(counts.size), target), counts, 0) / counts[target].sum()
            never = float(np.mean(np.asarray(pr["never_by_category"]) @ w))
            always = float(np.mean(np.asarray(pr["always_by_category"]) @ w))
        sometimes = 1.0 - never - always
        between = np.asarray(pr["evaluations_between"])
        mid = f"{np.median(between):.0f} ({between.size} tasks)" if between.size else "-"
        own = float(np.mean(d["signal_share"]))
        rows.append(
            [
                name,
                f"{never:.2f} / {sometimes:.2f} / {always:.2f}",
                *(f"{x:.2f}" for x in np.asarray(pr["sometimes_by_category"]).mean(0)[cats]),
                f"{np.mean(pr['offered_signal_share']):.2f}",
                f"{own:.2f}",
                mid,
            ]
        )
    samples = config.pass_rate_samples
    return (
        f"\n\nPass rates measured by a free probe ({samples} rollouts per "
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


def load_study(path: str) -> tuple[CompareConfig, dict[str, dict], str]:
    """``(config, data, command)`` of the study saved at ``path`` (its ``compare.json``): the
    config it ran, its per-seed numbers per arm and the command that made it."""
    with open(path) as f:
        study = json.load(f)
    # Onto the defaults, key by key: a study saved before a config gained fields (the nested
    # model and GRPO configs, init) reads back with those fields' defaults.
    config = _cli.apply_mapping(CompareConfig(), study["config"], where=f"{path}: config")
    for d in study["arms"].values():
        # A study stored before null was written holds NaN for a level without a held-out
        # task: read as null, so its tables are the same and a rewrite writes JSON.
        for key in NAN_AS_NULL:
            if key in d:
                d[key] = _nan_as_null(np.asarray(d[key], np.float64))
    return config, study["arms"], study.get("command", "python -m experiments.compare")


def study_json(config: CompareConfig, data: dict[str, dict], command: str) -> dict:
    """What ``compare.json`` holds: the config, the command, the per-seed numbers and
    statistics per arm (:func:`tables` writes the statistics in) and the best-of groups."""
    study = {
        "config": dataclasses.asdict(config),
        "command": command,
        "arms": data,
        "best_of": [best_of_json(e) for e in best_of(config, data)],
    }
    refuse_nan(study)
    return study


def refuse_nan(value, where: str = "compare.json") -> None:
    """Raises a ValueError naming the first NaN in ``value`` (nested dicts, lists, tuples, numpy
    arrays and scalars): NaN is written as a bare ``NaN``, which strict JSON readers reject;
    a number that is not there is written as null. (``inf`` passes: a config's setting may be
    unbounded, e.g. ``half_life = inf``.)"""
    if isinstance(value, dict):
        for k, v in value.items():
            refuse_nan(v, f"{where}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            refuse_nan(v, f"{where}[{i}]")
    elif isinstance(value, np.ndarray):
        if value.dtype.kind in "fc" and np.isnan(value).any():
            raise ValueError(f"{where} holds NaN, which is not JSON; write null instead")
        if value.dtype.kind == "O":
            refuse_nan(value.tolist(), where)
    elif isinstance(value, float | np.floating) and np.isnan(value):
        raise ValueError(f"{where} is NaN, which is not JSON; write null instead")


class StudyResult(NamedTuple):
    """What a finished study measured for one arm, as the main job quotes it.

    ``median`` and ``baseline_median`` are rollouts to target (``inf``: a miss); ``ratio`` and
    ``paired`` the baseline's median over the arm's with its unpaired and paired interval
    (:class:`experiments._stats.Ratio`; None for the baseline itself or where there is no
    baseline); ``fisher_p`` Fisher's exact test on seeds at target; ``verdict`` ``"beat"``,
    ``"lost"``, ``"borderline"``, ``"did not beat"`` or ``"not judged (N seeds)"``
    (:func:`experiments._stats.verdict`)."""

    arm: str
    baseline: str
    seeds: int
    reached: int
    baseline_reached: int | None
    median: float
    baseline_median: float | None
    ratio: S.Ratio | None
    paired: S.Ratio | None
    fisher_p: float | None
    verdict: str | None
    command: str
    init: str | dict  # the regime the arm ran in: its experiment's init ...
    labels: str | dict  # ... and what its sampler was told of the categories
    experiment: GRPOExperimentConfig  # the arm's experiment (the study's, with its overrides)
    curriculum: dict | None  # the arm's curriculum table as written; None: an oracle arm


def study_result(path: str, arm: str) -> StudyResult | str:
    """What the study saved at ``path`` (its ``compare.json``) measured for ``arm``, computed
    from its per-seed numbers the way its tables are.

    Returns:
      A :class:`StudyResult`, or a sentence saying why there is none (no such file, no such
      arm), for the caller to print in its place.
    """
    if not os.path.exists(path):
        return f"the study {path} is not there; run it to compare"
    config, data, command = load_study(path)
    if arm not in data:
        return f"the study {path} has no arm {arm!r}; its arms are {list(data)}"
    hits = stored_hits(data[arm], arm=arm)
    exp = arm_experiment(config, find_arm(config, arm))
    base = data.get(config.baseline)
    base_hits = None if base is None else stored_hits(base, arm=config.baseline)
    cmp = None
    if base_hits is not None and arm != config.baseline:
        cmp = compare_arms(base_hits, hits, budget(config))
    return StudyResult(
        arm=arm,
        baseline=config.baseline,
        seeds=hits.size,
        reached=int(np.isfinite(hits).sum()),
        baseline_reached=None if base_hits is None else int(np.isfinite(base_hits).sum()),
        median=S.median(hits),
        baseline_median=None if base_hits is None else S.median(base_hits),
        ratio=None if cmp is None else cmp["ratio"],
        paired=None if cmp is None else cmp["paired"],
        fisher_p=None if cmp is None else cmp["fisher_p"],
        verdict=None if cmp is None else cmp["verdict"],
        command=command,
        init=exp.init,
        labels=exp.task.labels,
        experiment=exp,
        curriculum=arm_curriculum(find_arm(config, arm)),
    )


def arm_curriculum(arm) -> dict | None:
    """An ``[[arms]]`` table's curriculum as written (``{}``: the default), or None for an
    oracle arm (it draws by the policy's true pass rates: no curriculum is the same)."""
    return None if "oracle" in arm else arm.get("curriculum", {})


def run_settings(exp: GRPOExperimentConfig) -> dict:
    """The experiment settings a run reads, flat by key (``grpo.learning_rate``; numbers as
    floats, sequences as lists), to compare a run with a study's arm. Leaves out what a run
    never reads (:data:`~experiments.compare.cache.NOT_RUN`, the curriculum among them),
    ``seed`` (a study runs several) and the regime, ``init`` and ``task.labels``, which the
    main job compares on their own."""
    out = {}
    for key, value in dataclasses.asdict(exp).items():
        if key in (*NOT_RUN, "seed", "init"):
            continue
        table = value if isinstance(value, dict) else {None: value}  # task, model, grpo
        for k, v in table.items():
            out[key if k is None else f"{key}.{k}"] = as_floats(v)
    out.pop("task.labels")
    return out


class BestAgainstBest(NamedTuple):
    """A study's best-against-best comparison, as the main job quotes it: ``first`` (the first
    ``best_of`` group's best arm) over ``best`` (another group's best), median rollouts to
    target. ``comparison`` is :func:`compare_arms`'s dict; ``init`` the regime the study ran in
    (its experiment's ``init``); ``experiment`` and ``curriculum`` the ``best`` arm's (its
    :func:`arm_experiment` and :func:`arm_curriculum`); ``grid`` the settings
    (:func:`run_settings`) its group's arms differ in, each with the values they ran: what
    choosing the group's best chose among."""

    first: str
    best: str
    comparison: dict
    text: str
    init: object
    command: str
    experiment: GRPOExperimentConfig
    curriculum: dict | None
    grid: dict[str, list]


def study_best_of(path: str) -> list[BestAgainstBest] | str:
    """The best-against-best comparisons of the study saved at ``path`` (one per ``best_of``
    group after the first), or a sentence saying why there are none."""
    if not os.path.exists(path):
        return f"the study {path} is not there; run it to compare"
    config, data, command = load_study(path)
    entries = best_of(config, data)
    if len(entries) < 2:
        return f"the study {path} has no two best_of groups run"
    first = entries[0]["best"]
    out = []
    for e in entries[1:]:
        runs = [
            run_settings(arm_experiment(config, find_arm(config, n)))
            for n in e["group"]
            if n in data
        ]
        grid = {k: [r[k] for r in runs] for k in runs[0] if any(r[k] != runs[0][k] for r in runs)}
        best = find_arm(config, e["best"])
        out.append(
            BestAgainstBest(
                first=first,
                best=e["best"],
                comparison=e["comparison"],
                text=_comparison_text(e["comparison"]),
                init=config.experiment.init,
                command=command,
                experiment=arm_experiment(config, best),
                curriculum=arm_curriculum(best),
                grid=grid,
            )
        )
    return out


def _finite(values) -> list[float | None]:
    """JSON-safe: ``inf`` (a miss, an unbounded end) and ``nan`` as ``None``."""
    return [float(x) if np.isfinite(x) else None for x in values]


# The per-seed numbers that may hold a number that is not there (NaN in the curves), written
# as null: compare.json holds no NaN (:func:`refuse_nan`).
NAN_AS_NULL = ("final_held_out", "final_levels", "curve_held_out", "curve_sometimes")


def _nan_as_null(x) -> list:
    """``x`` (an array) as nested lists of floats, None where it is NaN."""
    x = np.asarray(x)
    if x.ndim == 0:
        return None if np.isnan(x) else x.item()
    return [_nan_as_null(row) for row in x]


def _float_rows(rows) -> np.ndarray:
    """``f32[S, C]`` from per-seed rows as stored: null (or NaN, as studies stored before
    null was written hold) as NaN, so both spellings give the same tables."""
    return np.asarray([[np.nan if x is None else x for x in row] for row in rows], np.float32)


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
