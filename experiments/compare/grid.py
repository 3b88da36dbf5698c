"""Issue 16's condition for ``auto``, checked on every finished study at once.

``python -m experiments.compare.grid`` reads every study table's per-seed numbers
(``docs/compare/*.json``), groups the arms into cells (the same pool, init, seeds, schedule,
target and training settings: arms whose runs share each seed's initial policy) and, in every
cell where the candidate curriculum ran, compares it with the best non-oracle arm: the lowest
median rollouts to target among the arms that read the same labels or none (ties, and cells
where every median misses, go to the most seeds at target). ``auto`` may be
registered only where the candidate's median is within ``--within`` (1.2) of that arm's in
every cell of the grid; the table says where it is, with the paired bootstrap interval of the
ratio (the point estimate is what the condition reads; the interval says how much of a gap is
the seeds). It also lists every cell of the grid the candidate has not run.
Reruns of stored arms on newer code (``docs/compare/reruns/*.json``, ``--reruns``) are read in
place of the stored runs they did not reproduce (:func:`superseded`).

The best arm of a cell is the minimum over many arms' noisy medians, so an arm as good as the
best could trail it by chance: ``--split-halves`` measures how much, choosing each 20-seed
cell's best arm on half of its seeds and comparing it on the other half with the best arm there
(:func:`split_halves`). ``--curriculum`` puts any other arm (say
``'{"sampler": {"type": "learnability"}}'``) to the same rule, to see how the arms that are
best somewhere fare; ``--by-init`` does it for a default that picks its curriculum by where
the policy starts (one for a warm-started base, one for random weights), and ``--no-labels``
for one that also picks by whether it is given labels (:func:`by_labels`).
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import inspect
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from curriculax import _config
from experiments import _cli, _markdown, _stats
from experiments._builders import experiment_grpo
from experiments.compare.config import MAIN_JOB_ONLY, CompareConfig, arm_experiment
from experiments.compare.report import stored_hits

# Experiment settings that do not change what an arm's runs do (the main job's).
_NOT_IN_CELL = MAIN_JOB_ONLY


class Arm(NamedTuple):
    """One arm of one study, as the grid sees it.

    Attributes:
      name: the arm's name in its study.
      study: the study's file stem (``docs/compare/<study>.json``).
      cell: the cell key (pool, init, seeds, schedule, training settings; no labels).
      family: the cell key without the number of seeds (a 20-seed study's seeds 0-9 are the
        10-seed study's).
      seeds: seeds per arm.
      tuning: the study ran on the tuning split (``experiment.seed`` other than 0), which
        issue 16's condition does not read.
      checks: the cell changes a training setting (a learning-rate or entropy check), so it is
        not a cell of the grid.
      labels: the labels the arm's samplers were told (``"levels"``, ``"none"``, ...), as text.
      reads_labels: whether any of its samplers or gates takes the pool's categories.
      oracle: an oracle arm (never a best arm).
      curriculum: its curriculum table, presets written out (None for an oracle).
      rollouts: ``f64[S]`` rollouts to target per seed (``inf``: a miss).
      budget: rollouts per run.
      describe: the cell in words.
      init: where its policy starts: ``"scratch"`` (random weights) or ``"base"`` (a
        warm-started base).
    """

    name: str
    study: str
    cell: str
    family: str
    seeds: int
    tuning: bool
    checks: bool
    labels: str
    reads_labels: bool
    oracle: bool
    curriculum: Any
    rollouts: np.ndarray
    budget: float
    describe: str
    init: str


def _takes_categories(kind: str, table: Mapping, spec: Any) -> bool:
    if not isinstance(spec, Mapping) or "type" not in spec:
        return False
    factory = _config._resolve(kind, table, spec["type"], f"{kind} {spec['type']!r}")
    own = "categories" in inspect.signature(factory).parameters and "categories" not in spec
    return own or _takes_categories(kind, table, spec.get("inner"))


def reads_labels(curriculum: Mapping) -> bool:
    """Whether a curriculum table (a preset written out) is told the pool's categories."""
    if _takes_categories("sampler", _config._SAMPLERS, curriculum.get("sampler")):
        return True
    gates = curriculum.get("gates") or {}
    return any(_takes_categories("gate", _config._GATES, g) for g in gates.values())


def _labels_text(labels: Any) -> str:
    if isinstance(labels, Mapping):
        return ", ".join(f"{k} {v}" for k, v in sorted(labels.items()))
    return str(labels)


# The label modes of issue 16's grid (a distractor pool's studies add levels_hide_noise).
GRID_LABELS = ("levels", "noise 0.5", "none")

_TRAINING_CHECKS = ("learning_rate", "entropy_coef")


def _checks(exp) -> dict[str, float]:
    """The training settings the arm changes from the studies' defaults."""
    default = experiment_grpo()
    return {
        f: getattr(exp.grpo, f)
        for f in _TRAINING_CHECKS
        if getattr(exp.grpo, f) != getattr(default, f)
    }


def _init(exp) -> str:
    return "scratch" if exp.init == "scratch" else "base"


def _describe(config: CompareConfig, exp) -> str:
    task = exp.task
    if task.distractors:
        pool = f"distractors {round(100 * task.distractors)}%"
    else:
        pool = config.title.split(",")[0].split(":")[0].strip()
    init = _init(exp)
    every = config.eval_every * exp.groups_per_generation * exp.group_size
    extra = "" if exp.seed == 0 else f", experiment seed {exp.seed} (tuning split)"
    for field, value in _checks(exp).items():
        extra += f", {field} {value:g}"
    return f"{init}, {pool}, {config.seeds} seeds, evaluated every {every:,} rollouts{extra}"


def study_arms(path: str) -> list[Arm]:
    """The arms of one study's ``compare.json`` (or a table's copy in docs/compare)."""
    with open(path) as f:
        data = json.load(f)
    config = _cli.apply_mapping(CompareConfig(), data["config"], where=path)
    study = os.path.splitext(os.path.basename(path))[0]
    out = []
    for arm in config.arms:
        if arm["name"] not in data["arms"]:
            continue  # an arm the study did not run (--arms)
        exp = arm_experiment(config, arm)
        settings = dataclasses.asdict(exp)
        for key in _NOT_IN_CELL:
            settings.pop(key)
        labels = settings["task"].pop("labels")
        family = json.dumps([settings, config.generations, config.eval_every], sort_keys=True)
        curriculum = None
        if "curriculum" in arm:
            curriculum = _config.expand_preset(arm["curriculum"])
        try:
            rollouts = stored_hits(data["arms"][arm["name"]], arm=arm["name"])
        except ValueError as e:  # a NaN: name the file too
            raise ValueError(f"{path}: {e}") from None
        out.append(
            Arm(
                name=arm["name"],
                study=study,
                cell=f"{family} {config.seeds}",
                family=family,
                seeds=config.seeds,
                tuning=exp.seed != 0,
                checks=bool(_checks(exp)),
                labels=_labels_text(labels),
                reads_labels=curriculum is not None and reads_labels(curriculum),
                oracle=curriculum is None,
                curriculum=curriculum,
                rollouts=rollouts,
                budget=float(config.generations * exp.groups_per_generation * exp.group_size),
                describe=_describe(config, exp),
                init=_init(exp),
            )
        )
    return out


class Row(NamedTuple):
    """The candidate in one cell: ``ratio`` is its median over the best arm's (a paired
    :class:`~experiments._stats.Ratio`; None where it did not run there). ``runs``: how many
    runs of the candidate the cell holds (``candidate`` is the least favourable of them)."""

    describe: str
    labels: str
    candidate: Arm | None
    best: list[Arm]
    ratio: _stats.Ratio | None
    runs: int = 1


def _eligible(arms: Sequence[Arm], labels: str) -> list[Arm]:
    return [a for a in arms if not a.oracle and (not a.reads_labels or a.labels == labels)]


def _at_target(a: Arm) -> int:
    return int(np.isfinite(a.rollouts).sum())


def _key(a: Arm) -> tuple[float, int]:
    """Lower is better: the median rollouts to target, then fewer seeds at target."""
    return _stats.median(a.rollouts), -_at_target(a)


def _best(arms: Sequence[Arm]) -> list[Arm]:
    """The arms with the lowest median rollouts to target and, among those, the most seeds at
    target (where every median is a miss, the seeds at target are all that tells arms apart)."""
    keys = [_key(a) for a in arms]
    low = min(keys)
    return [a for a, k in zip(arms, keys) if k == low]


def _same(a: Arm) -> tuple:
    """What makes two runs one measurement: the cell, labels, curriculum and per-seed numbers."""
    return a.cell, a.labels, json.dumps(a.curriculum, sort_keys=True), a.rollouts.tobytes()


def distinct_runs(arms: Sequence[Arm]) -> list[Arm]:
    """``arms`` without the runs that repeat an earlier one (:func:`_same`): a study that
    reused another study's finished arm, or reran it on the same machine and got the same
    per-seed numbers, adds no evidence, so it is listed once, under the first study (load
    order). Runs that differ in any seed's number (another machine or install) all stay."""
    seen: set[tuple] = set()
    out = []
    for a in arms:
        key = _same(a)
        if key not in seen:
            seen.add(key)
            out.append(a)
    return out


def on_shared_seeds(arms: Sequence[Arm]) -> list[Arm]:
    """Each run restricted to the seeds of every smaller study of its family.

    A study of ``S`` seeds runs the keys ``split(key, S)``, whose first ``k`` are
    ``split(key, k)``: a 20-seed study's seeds 0-9 are the 10-seed study's (per-seed numbers
    of an arm both ran are equal). The copies (study ``"<study>, seeds 0-9"``) put every run
    into the smaller cells of its family, so a cell counted with 20 seeds is also held against
    the arms that ran only on seeds 0-9 (:func:`report`), and a candidate that ran only on seeds
    0-9 is held against every arm's seeds 0-9, not only the arms of 10-seed studies."""
    sizes: dict[str, set[int]] = {}
    for a in arms:
        sizes.setdefault(a.family, set()).add(a.seeds)
    ran = {_same(a) for a in arms}
    copies = [
        a._replace(
            rollouts=a.rollouts[:k],
            seeds=k,
            cell=f"{a.family} {k}",
            study=f"{a.study}, seeds 0-{k - 1}",
            describe=a.describe.replace(f"{a.seeds} seeds", f"{k} seeds", 1),
        )
        for a in arms
        for k in sorted(sizes[a.family])
        if k < a.seeds
    ]
    # a copy equal to a run of the same arm on those seeds adds nothing
    return [c for c in copies if _same(c) not in ran]


def grid(arms: Sequence[Arm], is_candidate, *, within: float = 1.2) -> list[Row]:
    """A row per cell and label mode: the candidate (``is_candidate(arm)``) against the best
    eligible arm, or the cell's label modes where the candidate did not run (``candidate``
    None). Label modes of a cell: the grid's (:data:`GRID_LABELS`) and any other its
    label-reading arms ran with. Where the candidate ran in several studies of a cell, the
    least favourable run is the one compared (the highest median, then the fewest seeds at
    target): runs of one seed on another install or machine are other draws of chaotic
    training, not copies, so the grid does not pick the luckiest. A run with more seeds than
    another study of its cell's family also runs, on its first seeds, in that study's cell
    (:func:`on_shared_seeds`), the candidate's and every other arm's. Each row's ratio counts
    its resamples against ``within`` (:func:`interval_says` reads them)."""
    arms = [*arms, *on_shared_seeds(arms)]
    cells: dict[str, list[Arm]] = {}
    for a in arms:
        cells.setdefault(a.cell, []).append(a)
    rows = []
    for members in cells.values():
        modes = sorted({a.labels for a in members if a.reads_labels} | set(GRID_LABELS))
        for labels in modes:
            eligible = _eligible(members, labels)
            if not eligible:
                continue
            # an arm that reads no labels ran the same in every label mode
            cands = [
                a
                for a in eligible
                if is_candidate(a) and (a.labels == labels or not a.reads_labels)
            ]
            if not cands:
                rows.append(Row(members[0].describe, labels, None, _best(eligible), None))
                continue
            cand = max(cands, key=_key)  # the first of equals: load order, stable
            # the candidate's other runs are not other arms
            best = _best([a for a in eligible if a is cand or all(a is not c for c in cands)])
            ref = best[0]
            paired = cand.rollouts.shape == ref.rollouts.shape
            ratio = _stats.censored_ratio(
                cand.rollouts, ref.rollouts, cand.budget, paired=paired, cut=within
            )
            rows.append(Row(cand.describe, labels, cand, best, ratio, len(cands)))
    return sorted(rows, key=lambda r: (r.describe, r.labels))


def by_labels(labelled: Sequence[Row], bare: Sequence[Row]) -> list[Row]:
    """The rows of a default that picks its curriculum by whether it is given labels:
    ``labelled`` (:func:`grid`'s rows for the curriculum it builds from categories) in every
    label mode but ``"none"``, ``bare`` (the rows for the one it builds without) in ``"none"``.
    Label noise is not visible to a sampler, so ``"noise 0.5"`` is a labelled mode."""
    rows = [r for r in labelled if r.labels != "none"] + [r for r in bare if r.labels == "none"]
    return sorted(rows, key=lambda r: (r.describe, r.labels))


def _names(arms: Sequence[Arm]) -> str:
    """``name (study); ...``: arms of one cell may share a name across studies."""
    return "; ".join(f"{a.name} ({a.study})" for a in arms)


def _median_text(a: Arm) -> str:
    """The median; where seeds missed, with the seeds at target (``> 64,000, 1/10 at target``)."""
    text = _stats.fmt_censored(a.rollouts, _stats.median, a.budget)
    if _at_target(a) < a.seeds:
        text += f", {_at_target(a)}/{a.seeds} at target"
    return text


def _counted(rows: Sequence[Row]) -> tuple[list[Row], list[Row], list[Row], list[Row]]:
    """``(headline, superseded, aside, missing)``: the candidate's rows on the headline seeds
    (per cell and labels, the study with the most seeds), those a study with more seeds
    replaces, those on the tuning split or in a training-setting check, and the cells of the
    grid it has run at no seed count."""
    ran = [r for r in rows if r.candidate is not None]
    most: dict[tuple[str, str], int] = {}
    for r in ran:
        key = (r.candidate.family, r.labels)
        most[key] = max(most.get(key, 0), r.candidate.seeds)
    headline, superseded, aside = [], [], []
    for r in ran:
        if r.candidate.tuning or r.candidate.checks:
            aside.append(r)
        elif r.candidate.seeds < most[(r.candidate.family, r.labels)]:
            superseded.append(r)
        else:
            headline.append(r)
    missing: dict[tuple[str, str], Row] = {}
    for r in rows:
        ref = r.best[0]
        key = (ref.family, r.labels)
        in_grid = r.candidate is None and key not in most and not (ref.tuning or ref.checks)
        if in_grid and (key not in missing or missing[key].best[0].seeds < ref.seeds):
            missing[key] = r
    return headline, superseded, aside, list(missing.values())


def is_within(ratio: _stats.Ratio, within: float) -> bool:
    """Issue 16's condition on one ratio (first arm over second): its point estimate is at
    most ``within``, and is the ratio itself or an upper bound on it (not where a median that
    missed leaves it unknown or only bounded below)."""
    return ratio.bound in ("", "<=") and ratio.point <= within


def interval_says(ratio: _stats.Ratio, within: float, seeds: int | None = None) -> str:
    """What the paired interval of candidate / best says of the condition, by the rule of the
    studies' verdicts (:func:`experiments._stats.verdict`): ``"within"`` where under 2.5% of
    the resamples may put the ratio above ``within`` (:attr:`~experiments._stats.Ratio.over`),
    ``"behind"`` where under 2.5% may put it at ``within`` or below
    (:attr:`~experiments._stats.Ratio.below`), ``"borderline"`` where such a share is within
    Monte Carlo error of 2.5% (:func:`experiments._stats.side`; neither is claimed),
    ``"cannot tell"`` otherwise (the interval holds ``within``, or is open above where a
    resample's median missed); ``"not judged (N seeds)"`` where the cell ran fewer than
    :data:`~experiments._stats.MIN_SEEDS` ``seeds``.

    Raises:
      ValueError: ``ratio`` counted its resamples against another value than ``within``
        (build the rows with :func:`grid`'s ``within``).
    """
    if ratio.cut != within:
        raise ValueError(
            f"the ratio's resamples were counted against {ratio.cut}, not {within}: build the "
            f"rows with grid(..., within={within})"
        )
    if seeds is not None and seeds < _stats.MIN_SEEDS:
        return f"not judged ({seeds} seeds)"
    inside = _stats.side(ratio, ratio.over, ratio.high <= within)
    behind = _stats.side(ratio, ratio.below, ratio.low > within)
    if inside == "yes":
        return "within"
    if behind == "yes":
        return "behind"
    return "borderline" if "near" in (inside, behind) else "cannot tell"


def _table(
    rows: Sequence[Row], within: float, fewer: Mapping[tuple[str, str], list[Row]] | None = None
) -> tuple[list[str], int, dict[str, int]]:
    """The rows as a markdown table, how many are within, and what their intervals say.
    ``fewer``: per (family, labels), the candidate's rows in the same cell with fewer seeds; a
    row is within only where those are too."""
    header = [
        "cell",
        "labels",
        "candidate: median (study)",
        "best arm: median (study)",
        "candidate / best [95% CI, paired]",
        f"within {within}x",
        "the interval says",
    ]
    says = {"within": 0, "behind": 0, "borderline": 0, "cannot tell": 0, "not judged": 0}
    cells, inside = [], 0
    for r in rows:
        best = _names(r.best)
        also = (fewer or {}).get((r.candidate.family, r.labels), [])
        missed = [f for f in also if not is_within(f.ratio, within)]
        ok = is_within(r.ratio, within) and not missed
        inside += ok
        seeds = min(r.candidate.rollouts.size, r.best[0].rollouts.size)
        verdict = interval_says(r.ratio, within, seeds)
        says[verdict.split(" (")[0]] += 1
        if ok:
            mark = "yes"
        elif r.ratio.bound == "?":
            mark = "**no** (both medians miss)"
        elif is_within(r.ratio, within):
            on = "; ".join(
                f"seeds 0-{f.candidate.seeds - 1}: {_stats.fmt_ratio(f.ratio)}" for f in missed
            )
            mark = f"**no** (on {on})"
        else:
            mark = "**no**"
        cells.append(
            [
                r.describe,
                r.labels,
                f"{_median_text(r.candidate)} ({r.candidate.study}"
                + (f"; the least favourable of {r.runs} runs)" if r.runs > 1 else ")"),
                f"{_median_text(r.best[0])}: {best}",
                _stats.fmt_ratio(r.ratio),
                mark,
                verdict,
            ]
        )
    return _markdown.table(header, cells, align="llrlrll").splitlines(), inside, says


def report(rows: Sequence[Row], *, within: float, candidate: str) -> str:
    """The grid as markdown: the candidate's headline cells, then the cells a study with more
    seeds replaces, the tuning split and the cells it has not run."""
    headline, superseded, aside, missing = _counted(rows)
    lines = [
        f"Candidate: {candidate}. Best arm: the lowest median rollouts to target among the "
        "non-oracle arms of the cell that read the same labels or none (ties listed). "
        "Where medians tie (or all miss), the arms with the most seeds at target. "
        "Ratio: the candidate's median over the best arm's, paired bootstrap 95% interval "
        f"(above 1: the candidate needs more); within {within}x: the point estimate, as issue "
        "16's condition reads it; the interval says, by the rule of the studies' verdicts: "
        f'"within" where under 2.5% of the resamples may put the ratio above {within}, '
        f'"behind" where under 2.5% may put it at {within} or below, "borderline" where that '
        'share is within Monte Carlo error of 2.5%, "cannot tell" otherwise (where medians are '
        'a few evaluation steps in, one step is itself a ratio of that size), "not judged" '
        f"where the cell ran fewer than {_stats.MIN_SEEDS} seeds. "
        "A cell with a 10-seed and a 20-seed study counts once, with 20, and "
        "within only where the candidate's seeds 0-9 (the 10-seed study's seeds) are also "
        "within of the best arm on those seeds (the rows replaced, below); every run with "
        'more seeds also runs on its seeds 0-9 (named "<study>, seeds 0-9"), so the best '
        "arm on seeds 0-9 is chosen among every arm's runs on them. Where the "
        "candidate ran in several studies of one cell, the least favourable run counts (the "
        "highest median, then the fewest seeds at target). A run with the same per-seed "
        "numbers as another study's run of the same arm (an arm one study reused from "
        "another) is one measurement, listed under the first study by file name.",
        "",
    ]
    fewer: dict[tuple[str, str], list[Row]] = {}
    for r in superseded:
        fewer.setdefault((r.candidate.family, r.labels), []).append(r)
    table, inside, says = _table(headline, within, fewer)
    lines += [
        *table,
        "",
        f"**Within {within}x in {inside} of {len(headline)} cells.** The paired interval shows "
        f"the candidate within {within}x in {says['within']}, more than {within}x behind in "
        f"{says['behind']}, borderline in {says['borderline']}, and cannot tell in "
        f"{says['cannot tell']}"
        + (
            f"; not judged in {says['not judged']} (fewer than {_stats.MIN_SEEDS} seeds)."
            if says["not judged"]
            else "."
        ),
    ]
    for title, part in (
        ("Replaced by the same cell with more seeds", superseded),
        ("Tuning split and training-setting checks (not counted)", aside),
    ):
        if part:
            lines += ["", f"{title}:", ""] + _table(part, within)[0]
    if missing:
        lines += ["", "Cells of the grid the candidate has not run:", ""]
        lines += [f"- {r.describe}, labels {r.labels}" for r in missing]
    return "\n".join(lines) + "\n"


class Split(NamedTuple):
    """A cell's best arm chosen on one half of its seeds, measured on the other half.

    Attributes:
      describe: the cell in words.
      labels: the label modes this comparison stands for (modes whose eligible arms are the
        same give the same comparison, so they share a row), as text.
      chose: ``"first"`` or ``"second"``: the half of the seeds that chose.
      chosen: the best arms on that half (ties listed; the first is measured).
      chosen_median: the first chosen arm's median rollouts to target on the choosing half,
        as text (:func:`experiments._stats.fmt_censored`).
      other: the first chosen arm restricted to the other half's seeds.
      best: the best arms on the other half.
      ratio: ``other``'s median over ``best[0]``'s, paired over the other half's seeds (above
        1: the arm chosen on one half trails on the other).
    """

    describe: str
    labels: str
    chose: str
    chosen: list[Arm]
    chosen_median: str
    other: Arm
    best: list[Arm]
    ratio: _stats.Ratio


def _seeds(a: Arm, index: np.ndarray) -> Arm:
    """``a`` restricted to the seeds ``index`` (``i32[S']``)."""
    return a._replace(rollouts=a.rollouts[index], seeds=len(index))


def split_halves(arms: Sequence[Arm], *, min_seeds: int = 20) -> list[Split]:
    """Is a cell's best arm still (nearly) the best on seeds that did not choose it?

    In every headline cell (not the tuning split, not a training-setting check) with an even
    number of seeds, at least ``min_seeds``, and every label mode with two or more eligible
    arms: the best arm on seeds ``0 .. S/2 - 1`` is measured on seeds ``S/2 .. S - 1`` against
    the best arm there, and the other way round. Issue 16's condition asks a candidate to be
    within 1.2x of a cell's best arm; where even the best arm chosen on one half of the seeds
    is not within 1.2x of the best on the other half, the condition reads the seeds' noise and
    no candidate could be expected to meet it there.

    Args:
      arms: every arm of the studies (:func:`load`).
      min_seeds: the fewest seeds a cell needs (each half then has at least half of them).

    Returns:
      A :class:`Split` per cell, distinct comparison and choosing half, sorted by cell.
    """
    cells: dict[str, list[Arm]] = {}
    for a in arms:
        if a.seeds >= min_seeds and a.seeds % 2 == 0 and not (a.tuning or a.checks):
            cells.setdefault(a.cell, []).append(a)
    out = []
    for members in cells.values():
        n = members[0].seeds
        halves = (np.arange(n // 2), np.arange(n // 2, n))
        # label modes with the same eligible arms give the same comparison: one row for them
        groups: dict[tuple[int, ...], tuple[list[Arm], list[str]]] = {}
        for labels in sorted({a.labels for a in members if a.reads_labels} | set(GRID_LABELS)):
            eligible = _eligible(members, labels)
            if len(eligible) >= 2:
                groups.setdefault(tuple(map(id, eligible)), (eligible, []))[1].append(labels)
        for eligible, modes in groups.values():
            for chose, (pick, test) in (("first", halves), ("second", halves[::-1])):
                picked = [_seeds(a, pick) for a in eligible]
                chosen = _best(picked)
                other = _seeds(eligible[picked.index(chosen[0])], test)
                best = _best([_seeds(a, test) for a in eligible])
                ratio = _stats.censored_ratio(
                    other.rollouts, best[0].rollouts, other.budget, paired=True
                )
                out.append(
                    Split(
                        members[0].describe,
                        ", ".join(modes),
                        chose,
                        chosen,
                        _stats.fmt_censored(chosen[0].rollouts, _stats.median, other.budget),
                        other,
                        best,
                        ratio,
                    )
                )
    return sorted(out, key=lambda r: (r.describe, r.labels, r.chose))


def split_report(rows: Sequence[Split], *, within: float) -> str:
    """The split-half check (:func:`split_halves`) as markdown, with its count."""
    header = [
        "cell",
        "labels",
        "chosen on",
        "best arm on that half: median",
        "its median on the other half",
        "best arm on the other half: median",
        "ratio [95% CI, paired]",
        f"within {within}x",
    ]
    lines, inside = [], 0
    for r in rows:
        n = r.other.seeds
        first, second = f"seeds 0-{n - 1}", f"seeds {n}-{2 * n - 1}"
        ok = is_within(r.ratio, within)
        inside += ok
        lines.append(
            [
                r.describe,
                r.labels,
                first if r.chose == "first" else second,
                _names(r.chosen) + f": {r.chosen_median}",
                _median_text(r.other),
                _names(r.best) + f": {_median_text(r.best[0])}",
                _stats.fmt_ratio(r.ratio),
                "yes" if ok else "**no**",
            ]
        )
    intro = (
        "Split-half check of issue 16's condition: in every cell with 20 or more seeds, the "
        "best non-oracle arm on one half of the seeds (the lowest median rollouts to target "
        "among the arms that read the label mode's labels or none; ties listed, the first "
        "measured) against the best arm on the other half, on that half's seeds. Label modes "
        "with the same eligible arms share a row. Where the arm chosen on one half is not "
        f"within {within}x of the best on the other, the condition reads the seeds' noise "
        "there; where it is, the best arm held on fresh seeds at the resolution of the "
        "evaluations (medians a step apart on a coarse evaluation grid can still tie)."
    )
    count = (
        f"**The arm chosen on one half is within {within}x of the best on the other in "
        f"{inside} of {len(rows)} comparisons.**"
    )
    table = _markdown.table(header, lines, align="lllrrlrl")
    return "\n".join([intro, "", table, "", count]) + "\n"


def _one_arm(a: Arm) -> tuple:
    """What makes two runs runs of one arm: the cell family (seeds aside), labels and
    curriculum (and, for an oracle, which oracle)."""
    return a.family, a.labels, json.dumps(a.curriculum, sort_keys=True), a.oracle and a.name


def _agrees(a: Arm, b: Arm) -> bool:
    """Whether two runs of one arm have the same numbers on the seeds both ran."""
    k = min(a.seeds, b.seeds)
    return bool(np.array_equal(a.rollouts[:k], b.rollouts[:k]))


def superseded(arms: Sequence[Arm], reruns: Sequence[Arm], *, strict: bool = True) -> list[Arm]:
    """``arms`` with every run of an arm that ``reruns`` reran differently replaced by the
    rerun.

    A rerun (``docs/compare/reruns/``) runs stored arms again on newer code (a fix that
    changed what they draw). Every stored run of that arm in that cell family
    (:func:`_one_arm`; a 20-seed rerun's seeds 0-9 stand for a 10-seed study's run,
    :func:`on_shared_seeds`) whose numbers differ from the rerun's on the seeds both ran is
    replaced by the rerun, so one arm stays one competitor for the best-arm pick and the
    numbers read are those of the code a user gets. A stored run the rerun reproduced stays
    (an arm the fix did not change); a rerun that reproduced every stored run adds nothing.
    With ``strict`` False a rerun of a cell family ``arms`` has no run of is skipped (the
    tables read may be a subset: ``--tables 'docs/compare/base-*.json'``).

    Raises:
      ValueError: naming a rerun arm that reruns no stored arm (a typo or a changed config
        would otherwise add an arm), or one with fewer seeds than a run it replaces.
    """
    families = {a.family for a in arms}
    gone: set[int] = set()
    added = []
    for r in reruns:
        if not strict and r.family not in families:
            continue
        runs = [i for i, a in enumerate(arms) if _one_arm(a) == _one_arm(r)]
        if not runs:
            raise ValueError(
                f"rerun {r.study!r} arm {r.name!r} reruns no stored arm (no study table holds "
                "that curriculum and labels in that cell)"
            )
        differ = [i for i in runs if not _agrees(arms[i], r)]
        short = [arms[i].study for i in differ if arms[i].seeds > r.seeds]
        if short:
            raise ValueError(
                f"rerun {r.study!r} arm {r.name!r} ran {r.seeds} seeds, fewer than the run "
                f"it replaces in {', '.join(short)}: rerun it on all of them"
            )
        if differ:
            gone.update(differ)
            added.append(r)
    return [a for i, a in enumerate(arms) if i not in gone] + added


def load(pattern: str, reruns: str | None = None, *, strict: bool = True) -> list[Arm]:
    """Every arm of every study file matching ``pattern`` (sorted by path), each arm that a
    file matching ``reruns`` reran read from the rerun (:func:`superseded`, ``strict`` passed
    on; the rerun's study is named ``reruns/<file stem>``), a run that repeats an earlier one
    listed once (:func:`distinct_runs`). ``reruns`` may match no file."""
    paths = sorted(glob.glob(pattern))
    if not paths:
        raise FileNotFoundError(f"no study tables match {pattern!r}")
    arms = [a for p in paths for a in study_arms(p)]
    again = [
        a._replace(study=f"reruns/{a.study}")
        for p in sorted(glob.glob(reruns or ""))
        for a in study_arms(p)
    ]
    return distinct_runs(superseded(arms, again, strict=strict))


def _by_init(tables: Any) -> dict[str, Any]:
    """``--by-init``'s mapping, each table written out; names a missing or unknown init."""
    if not isinstance(tables, Mapping) or set(tables) != {"base", "scratch"}:
        got = sorted(tables) if isinstance(tables, Mapping) else type(tables).__name__
        raise ValueError(f'--by-init needs a curriculum for "base" and for "scratch", got {got}')
    return {init: _config.expand_preset(table) for init, table in tables.items()}


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m experiments.compare.grid", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--tables", default="docs/compare/*.json", help="study files (a glob)")
    p.add_argument(
        "--reruns",
        help="reruns of stored arms on newer code, read in place of every stored run of each "
        "arm they ran (a glob; default: reruns/*.json beside --tables, those of cells the "
        "tables hold; '' for none)",
    )
    candidate = p.add_mutually_exclusive_group()  # one flag names the candidate
    candidate.add_argument(
        "--preset",
        choices=sorted(_config.PRESETS),
        help="the candidate: arms running this preset's tables (default: robust)",
    )
    candidate.add_argument(
        "--curriculum",
        help="the candidate as a curriculum table in JSON (instead of --preset), e.g. "
        '\'{"sampler": {"type": "learnability"}}\'',
    )
    candidate.add_argument(
        "--by-init",
        help="the candidate as a default that picks by where the policy starts: JSON mapping "
        '"base" and "scratch" to a curriculum table or {"preset": NAME}, e.g. '
        '\'{"base": {"preset": "robust"}, "scratch": {"sampler": {"type": "uniform"}}}\'',
    )
    p.add_argument(
        "--no-labels",
        help="the candidate where its samplers are told no labels (label mode none), a mapping "
        "as --by-init's: for a default that reads labels only when it is given them (default: "
        "the candidate of the other label modes)",
    )
    p.add_argument("--within", type=float, default=1.2, help="the allowed ratio (default 1.2)")
    p.add_argument(
        "--split-halves",
        action="store_true",
        help="instead: is each cell's best arm on one half of its seeds within --within of "
        "the best on the other half (cells with 20+ seeds)?",
    )
    args = p.parse_args(argv)
    strict = args.reruns is not None  # the default reruns may hold cells --tables leaves out
    if args.reruns is None:
        args.reruns = os.path.join(os.path.dirname(args.tables), "reruns", "*.json")
    if args.split_halves:
        given = [
            f"--{flag.replace('_', '-')}"
            for flag in ("preset", "curriculum", "by_init", "no_labels")
            if getattr(args, flag) is not None
        ]
        if given:
            p.error(
                f"--split-halves takes no candidate (it measures each cell's best arm), got "
                f"{', '.join(given)}"
            )
        rows = split_halves(load(args.tables, args.reruns, strict=strict))
        print(split_report(rows, within=args.within), end="")
        return
    if args.by_init is not None:
        by_init = _by_init(json.loads(args.by_init))
        name = f"by init {args.by_init}"
    elif args.curriculum is not None:
        target = _config.expand_preset(json.loads(args.curriculum))
        by_init = {"base": target, "scratch": target}
        name = f"curriculum {args.curriculum}"
    else:
        preset = args.preset or "robust"
        target = _config.expand_preset({"preset": preset})
        by_init = {"base": target, "scratch": target}
        name = f"preset {preset!r}"
    arms = load(args.tables, args.reruns, strict=strict)
    rows = grid(arms, lambda a: a.curriculum == by_init[a.init], within=args.within)
    if args.no_labels is not None:
        bare = _by_init(json.loads(args.no_labels))
        rows = by_labels(
            rows, grid(arms, lambda a: a.curriculum == bare[a.init], within=args.within)
        )
        name += f"; told no labels (label mode none): by init {args.no_labels}"
    print(report(rows, within=args.within, candidate=name), end="")


if __name__ == "__main__":
    _cli.entry(main)
