"""The grid check of issue 16's ``auto`` condition (experiments/compare/grid.py)."""

import json
import math
import re

import pytest

from curriculax import _config
from experiments.compare import grid

STUDY = "docs/compare/base-hard-skew-auto.json"  # uniform and the robust preset, 3 label modes


def _study(tmp_path, name, rollouts, *, seeds=10):
    """A copy of STUDY with its per-seed rollouts to target replaced (None: a miss)."""
    with open(STUDY) as f:
        data = json.load(f)
    data["config"]["seeds"] = seeds
    for arm, values in rollouts.items():
        data["arms"][arm]["rollouts_to_target"] = values
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


def _robust_rows(tmp_path, rollouts):
    """The robust preset's grid rows, by label mode, on one study with ``rollouts``."""
    _study(tmp_path, "a", rollouts)
    robust = _config.expand_preset({"preset": "robust"})
    rows = grid.grid(grid.load(str(tmp_path / "*.json")), lambda a: a.curriculum == robust)
    return {r.labels: r for r in rows}


def test_reads_labels_follows_the_factories_that_take_categories():
    assert not grid.reads_labels({"sampler": {"type": "uniform"}})
    assert not grid.reads_labels({"sampler": {"type": "learnability"}})
    assert grid.reads_labels({"sampler": {"type": "category_bandit"}})
    wrapped = {"sampler": {"type": "reward_consistency", "inner": {"type": "learnability"}}}
    assert not grid.reads_labels({**wrapped, "gates": {"c": {"type": "reward_consistency"}}})
    assert grid.reads_labels(_config.expand_preset({"preset": "robust"}))


def test_the_candidate_is_compared_with_the_best_arm_that_reads_its_labels_or_none(tmp_path):
    # uniform reads no labels, so it is eligible in every label mode; each robust arm only in
    # its own.
    rows = _robust_rows(
        tmp_path,
        {
            "uniform": [1000.0] * 10,
            "robust, labels levels": [1100.0] * 10,
            "robust, labels noise 0.5": [800.0] * 10,
            "robust, labels none": [1500.0] * 5 + [None] * 5,
        },
    )
    assert [b.name for b in rows["levels"].best] == ["uniform"]
    assert rows["levels"].ratio.point == pytest.approx(1.1)
    # the noise-0.5 arm is its own cell's best: the level-label arm is not eligible there
    assert [b.name for b in rows["noise 0.5"].best] == ["robust, labels noise 0.5"]
    assert rows["noise 0.5"].ratio.point == 1.0
    # half its seeds missed: the median is a miss, so the ratio is only bounded below
    assert rows["none"].ratio.bound == ">="
    assert math.isinf(rows["none"].ratio.high)
    text = grid.report(list(rows.values()), within=1.2, candidate="robust")
    assert "**Within 1.2x in 2 of 3 cells.**" in text
    assert re.search(r"\| none \|.*\| \*\*no\*\* \|", text)


def test_the_interval_says_within_behind_or_cannot_tell(tmp_path):
    # paired seeds: the candidate needs exactly 1.1x or 2x the uniform arm's rollouts, or 1.5x
    # on half its seeds (so the median ratio's interval straddles 1.2)
    rows = _robust_rows(
        tmp_path,
        {
            "uniform": [1000.0] * 10,
            "robust, labels levels": [1100.0] * 10,
            "robust, labels noise 0.5": [2000.0] * 10,
            "robust, labels none": [1000.0, 1500.0] * 5,
        },
    )
    assert grid.interval_says(rows["levels"].ratio, 1.2) == "within"
    assert grid.interval_says(rows["noise 0.5"].ratio, 1.2) == "behind"
    assert rows["none"].ratio.low < 1.2 < rows["none"].ratio.high
    assert grid.interval_says(rows["none"].ratio, 1.2) == "cannot tell"
    text = grid.report(list(rows.values()), within=1.2, candidate="robust")
    assert (
        "within 1.2x in 1, more than 1.2x behind in 1, borderline in 0, and cannot tell in 1."
        in text
    )


def test_the_interval_says_it_by_the_share_of_resamples_like_the_verdicts(tmp_path):
    # exactly 1.2x on every seed is within (the condition is "at most 1.2x"); a candidate
    # open above (3 of 10 seeds missed) whose every finite resample is 2x is behind; where
    # its median misses the interval holds 1.2
    rows = _robust_rows(
        tmp_path,
        {
            "uniform": [1000.0] * 10,
            "robust, labels levels": [1200.0] * 10,
            "robust, labels noise 0.5": [2000.0] * 7 + [None] * 3,
            "robust, labels none": [1000.0] * 4 + [None] * 6,
        },
    )
    assert rows["levels"].ratio.over == 0.0 and rows["levels"].ratio.above == 1.0
    assert grid.interval_says(rows["levels"].ratio, 1.2) == "within"
    assert math.isinf(rows["noise 0.5"].ratio.high)
    assert grid.interval_says(rows["noise 0.5"].ratio, 1.2) == "behind"
    assert grid.interval_says(rows["none"].ratio, 1.2) == "cannot tell"
    # a share of resamples within Monte Carlo error of 2.5% claims neither side
    near = rows["noise 0.5"].ratio._replace(below=0.025)
    assert grid.interval_says(near, 1.2) == "borderline"
    assert grid.interval_says(near._replace(below=0.02), 1.2) == "behind"
    assert grid.interval_says(rows["levels"].ratio._replace(over=0.0255), 1.2) == "borderline"
    # shares counted against another value than the one asked about are refused
    with pytest.raises(ValueError, match=r"counted against 1\.2, not 1\.5"):
        grid.interval_says(rows["levels"].ratio, 1.5)


def test_where_every_median_misses_the_best_arm_is_the_one_at_target_most_often(tmp_path):
    rows = _robust_rows(
        tmp_path,
        {
            "uniform": [1000.0] * 5 + [None] * 5,
            "robust, labels levels": [1000.0] + [None] * 9,
            "robust, labels noise 0.5": [1000.0] * 3 + [None] * 7,
            "robust, labels none": [None] * 10,
        },
    )
    # every median is a miss: uniform (5/10 at target) is the best arm, alone
    assert [[b.name for b in r.best] for r in rows.values()] == [["uniform"]] * 3
    assert rows["levels"].ratio.bound == "?"
    text = grid.report(list(rows.values()), within=1.2, candidate="robust")
    assert "**Within 1.2x in 0 of 3 cells.**" in text
    # uniform's median is above the mean of its fifth hit and a miss: (1,000 + 38,400) / 2
    assert "| > 38,400, 1/10 at target (a) | > 19,700, 5/10 at target: uniform (a) |" in text
    assert text.count("**no** (both medians miss)") == 3


def test_a_study_with_more_seeds_replaces_the_same_cell_and_misses_are_listed(tmp_path):
    ten = {"uniform": [1000.0] * 10, "robust, labels levels": [2000.0] * 10}
    _study(tmp_path, "ten", ten)
    twenty = {"uniform": [1000.0] * 20, "robust, labels levels": [1000.0] * 20}
    _study(tmp_path, "twenty", twenty, seeds=20)
    arms = [a for a in grid.load(str(tmp_path / "*.json")) if "noise" not in a.name]
    arms = [a for a in arms if a.name != "robust, labels none"]
    robust = _config.expand_preset({"preset": "robust"})
    rows = grid.grid(arms, lambda a: a.curriculum == robust)
    headline, superseded, aside, missing = grid._counted(rows)
    assert [(r.candidate.study, r.candidate.seeds) for r in headline] == [("twenty", 20)]
    assert [(r.candidate.study, r.ratio.point) for r in superseded] == [("ten", 2.0)]
    assert aside == []
    # the grid's other label modes, run by no arm of the candidate, at the most seeds
    assert sorted((r.labels, r.best[0].seeds) for r in missing) == [
        ("noise 0.5", 20),
        ("none", 20),
    ]


def test_a_cell_counted_with_20_seeds_is_held_against_arms_run_only_on_its_seeds_0_9(tmp_path):
    # uniform ran on seeds 0-9 alone faster than the candidate; at 20 seeds the candidate ties
    # the only other arm there. The cell counts with 20 seeds, and not as within: on the seeds
    # the two studies share the candidate needs twice uniform's rollouts.
    _study(tmp_path, "ten", {"uniform": [500.0] * 10})
    _study(
        tmp_path,
        "twenty",
        {"uniform": [1000.0] * 20, "robust, labels levels": [1000.0] * 19 + [None]},
        seeds=20,
    )
    arms = [a for a in grid.load(str(tmp_path / "*.json")) if a.labels in ("levels", "none")]
    arms = [a for a in arms if a.study == "twenty" or a.name == "uniform"]
    arms = [a for a in arms if a.name != "robust, labels none"]
    robust = _config.expand_preset({"preset": "robust"})
    rows = grid.grid(arms, lambda a: a.curriculum == robust)
    headline, superseded, _, _ = grid._counted(rows)
    assert [(r.candidate.study, r.ratio.point) for r in headline] == [("twenty", 1.0)]
    [copy] = superseded
    assert (copy.candidate.study, copy.candidate.seeds, copy.ratio.point) == (
        "twenty, seeds 0-9",
        10,
        2.0,
    )
    assert copy.candidate.describe.startswith("base, hard-skew, 10 seeds")
    out = grid.report(rows, within=1.2, candidate="x")
    assert "Within 1.2x in 0 of 1 cells" in out
    assert "**no** (on seeds 0-9: 2.00x" in out
    # a copy equal to the candidate's own 10-seed run adds no second run
    _study(tmp_path, "ten", {"uniform": [500.0] * 10, "robust, labels levels": [1000.0] * 10})
    arms = [a for a in grid.load(str(tmp_path / "*.json")) if a.name == "robust, labels levels"]
    assert grid.on_shared_seeds(arms) == []


def test_a_candidate_run_only_on_seeds_0_9_is_held_against_every_arm_on_them(tmp_path):
    # uniform ran only in the 20-seed study, twice as fast as the candidate on its seeds 0-9;
    # the candidate ran only in the 10-seed study. Its cell counts with 10 seeds, against
    # uniform's seeds 0-9 (before, the 10-seed cell held only the 10-seed study's arms, and
    # the candidate was its own best arm there).
    _study(tmp_path, "ten", {"robust, labels levels": [1000.0] * 10})
    _study(tmp_path, "twenty", {"uniform": [500.0] * 10 + [4000.0] * 10}, seeds=20)
    arms = grid.load(str(tmp_path / "*.json"))
    arms = [
        a
        for a in arms
        if (a.study, a.name) in {("ten", "robust, labels levels"), ("twenty", "uniform")}
    ]
    robust = _config.expand_preset({"preset": "robust"})
    rows = grid.grid(arms, lambda a: a.curriculum == robust)
    headline, superseded, _, _ = grid._counted(rows)
    [row] = headline
    assert (row.candidate.study, row.candidate.seeds) == ("ten", 10)
    assert [(a.study, a.name) for a in row.best] == [("twenty, seeds 0-9", "uniform")]
    assert row.ratio.point == 2.0
    assert superseded == []


def test_where_the_candidate_ran_twice_in_a_cell_the_least_favourable_run_counts(tmp_path):
    # the same cell run twice (another install: other draws of the same seeds); whichever
    # order the files load in, the run with the higher median is compared, and the row says so
    runs = {
        "lucky": {"uniform": [1000.0] * 10, "robust, labels levels": [900.0] * 10},
        "unlucky": {"uniform": [1000.0] * 10, "robust, labels levels": [1500.0] * 9 + [None]},
    }
    for name, rollouts in runs.items():
        (tmp_path / name).mkdir()
        _study(tmp_path / name, "s", rollouts)
    robust = _config.expand_preset({"preset": "robust"})
    for order in (["lucky", "unlucky"], ["unlucky", "lucky"]):
        arms = [a for name in order for a in grid.load(str(tmp_path / name / "*.json"))]
        rows = {r.labels: r for r in grid.grid(arms, lambda a: a.curriculum == robust)}
        row = rows["levels"]
        assert row.runs == 2
        assert grid._at_target(row.candidate) == 9
        assert row.ratio.point == pytest.approx(1.5)
        assert "the least favourable of 2 runs" in grid.report([row], within=1.2, candidate="x")


def test_a_run_that_repeats_another_studys_is_one_measurement(tmp_path):
    # "reuse" took "orig"'s finished arms (same per-seed numbers); "other" ran the preset again
    # on another machine (one seed differs): its run stays, the repeat does not
    _study(tmp_path, "orig", {"uniform": [1000.0] * 10, "robust, labels levels": [900.0] * 10})
    _study(tmp_path, "reuse", {"uniform": [1000.0] * 10, "robust, labels levels": [900.0] * 10})
    _study(
        tmp_path,
        "other",
        {"uniform": [1000.0] * 10, "robust, labels levels": [900.0] * 9 + [800.0]},
    )
    arms = grid.load(str(tmp_path / "*.json"))
    robust = _config.expand_preset({"preset": "robust"})
    rows = {r.labels: r for r in grid.grid(arms, lambda a: a.curriculum == robust)}
    row = rows["levels"]
    assert row.runs == 2  # "orig" (first by path of the two equal runs) and "other"
    assert {a.study for a in arms if a.name == "robust, labels levels"} == {"orig", "other"}
    # uniform: three studies, one measurement, listed under the first
    assert [a.study for a in arms if a.name == "uniform"] == ["orig"]


def test_a_rerun_replaces_the_stored_runs_of_its_arm_that_it_did_not_reproduce(tmp_path, capsys):
    levels = "robust, labels levels"
    _study(tmp_path, "a", {"uniform": [1000.0] * 10, levels: [1300.0] * 10})
    _study(tmp_path, "b", {"uniform": [1000.0] * 20, levels: [800.0] * 20}, seeds=20)
    (tmp_path / "reruns").mkdir()
    _study(tmp_path / "reruns", "x", {"uniform": [1000.0] * 20, levels: [1100.0] * 20}, seeds=20)
    arms = grid.load(str(tmp_path / "*.json"), str(tmp_path / "reruns" / "*.json"))
    # the preset's two stored runs (seeds 0-9 of both differ from the rerun's) are gone: one
    # arm, one competitor; uniform was reproduced, so its stored runs stay and the rerun adds
    # nothing
    assert sorted(a.study for a in arms if a.name == levels) == ["reruns/x"]
    assert sorted(a.study for a in arms if a.name == "uniform") == ["a", "b"]
    robust = _config.expand_preset({"preset": "robust"})

    def ratios(arms):  # the preset over the best arm with level labels, by seeds per cell
        rows = grid.grid(arms, lambda a: a.curriculum == robust)
        return {r.candidate.seeds: r.ratio.point for r in rows if r.labels == "levels"}

    assert ratios(arms) == pytest.approx({10: 1.1, 20: 1.1})
    # without the reruns: the stored runs (1,300 and 800 on seeds 0-9)
    assert ratios(grid.load(str(tmp_path / "*.json"))) == pytest.approx({10: 1.3, 20: 1.0})
    # the command line reads reruns/ beside --tables by default, '' for none
    grid.main(["--tables", str(tmp_path / "*.json")])
    assert "reruns/x" in capsys.readouterr().out
    grid.main(["--tables", str(tmp_path / "*.json"), "--reruns", ""])
    assert "reruns/x" not in capsys.readouterr().out


def test_a_rerun_of_no_stored_arm_or_of_fewer_seeds_is_refused(tmp_path):
    _study(tmp_path, "b", {"uniform": [1000.0] * 20}, seeds=20)
    (tmp_path / "reruns").mkdir()
    short = _study(tmp_path / "reruns", "short", {"uniform": [900.0] * 10})
    with pytest.raises(ValueError, match=r"'reruns/short' arm 'uniform' ran 10 seeds, fewer .* b"):
        grid.load(str(tmp_path / "*.json"), str(short))
    data = json.loads(short.read_text())
    data["config"]["generations"] += data["config"]["eval_every"]  # another cell
    short.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="'reruns/short' arm 'uniform' reruns no stored arm"):
        grid.load(str(tmp_path / "*.json"), str(short))
    # read by default (beside --tables), a rerun of a cell the tables do not hold is skipped:
    # --tables may read a subset of the studies
    loose = grid.load(str(tmp_path / "*.json"), str(short), strict=False)
    assert {a.study for a in loose} == {"b"}
    grid.main(["--tables", str(tmp_path / "*.json")])
    with pytest.raises(ValueError, match="reruns no stored arm"):
        grid.main(["--tables", str(tmp_path / "*.json"), "--reruns", str(short)])


def _stored_output(capsys, argv, path, counted, quoted):
    """The grid's output for ``argv`` on the stored tables, checked against its copy at
    ``path``; the two numbers the ``counted`` pattern reads from it must be quoted in
    docs/noise.md as ``quoted`` (a format with two ``{}``)."""
    grid.main(["--tables", "docs/compare/*.json", *argv])
    out = capsys.readouterr().out
    with open(path) as f:
        assert f.read() == out, (
            f"rerun: {' '.join(['python -m experiments.compare.grid', *argv])} > {path}"
        )
    numbers = re.search(counted, out)
    assert numbers is not None
    with open("docs/noise.md") as f:
        noise = " ".join(f.read().split())
    assert quoted.format(numbers[1], numbers[2]) in noise
    return out


def test_the_docs_state_what_the_grid_reads_from_the_stored_tables(capsys):
    out = _stored_output(
        capsys,
        [],
        "docs/compare/grid-robust.md",
        r"Within 1\.2x in (\d+) of (\d+) cells",
        "within 1.2x of the best arm in {} of {} cells",
    )
    # every table row has its 7 columns (a '|' inside an arm's name is escaped)
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert rows and all(len(re.findall(r"(?<!\\)\|", line)) == 8 for line in rows)


def test_split_halves_measures_the_arm_one_half_chose_on_the_other_half(tmp_path):
    # levels: uniform is best on seeds 0-9, the level-label arm on seeds 10-19, each 2x the
    # other on the half that did not choose it; in the other modes uniform is best on both
    halves = {
        "uniform": [1000.0] * 10 + [2000.0] * 10,
        "robust, labels levels": [2000.0] * 10 + [1000.0] * 10,
        "robust, labels noise 0.5": [5000.0] * 20,
        "robust, labels none": [5000.0] * 19 + [None],
    }
    _study(tmp_path, "twenty", halves, seeds=20)
    _study(tmp_path, "ten", {"uniform": [9000.0] * 10}, seeds=10)  # too few seeds: not read
    rows = grid.split_halves(grid.load(str(tmp_path / "*.json")))
    got = {(r.labels, r.chose): r for r in rows}
    assert sorted(got) == [
        (labels, half) for labels in ("levels", "noise 0.5", "none") for half in ("first", "second")
    ]
    first = got[("levels", "first")]
    assert [a.name for a in first.chosen] == ["uniform"]
    assert first.chosen_median == "1,000" and first.other.seeds == 10
    assert [a.name for a in first.best] == ["robust, labels levels"]
    assert first.ratio.point == pytest.approx(2.0)
    assert [a.name for a in got[("levels", "second")].chosen] == ["robust, labels levels"]
    assert got[("levels", "second")].ratio.point == pytest.approx(2.0)
    for mode in ("noise 0.5", "none"):
        assert [got[(mode, h)].ratio.point for h in ("first", "second")] == [1.0, 1.0]
    text = grid.split_report(rows, within=1.2)
    assert "in 4 of 6 comparisons.**" in text
    assert (
        "| seeds 10-19 | robust, labels levels (twenty): 1,000 | 2,000 | uniform (twenty): 1,000 |"
        in text
    )


def _consistency(inner: dict) -> dict:
    """``reward_consistency(skip_zero_variance(inner, skip="solved", ...))`` with its gate."""
    skip = {"type": "skip_zero_variance", "skip": "solved", **inner}
    return {
        "sampler": {"type": "reward_consistency", "inner": skip},
        "gates": {"consistency": {"type": "reward_consistency"}},
    }


# the rule by regime's scratch side: uniform skipping every solved task, in the wrapper and gate
SCRATCH_RULE = _consistency({"target_share": 0.0, "inner": {"type": "uniform"}})
# a base side measured on every base cell (session 17): the floored preset skipping solved tasks
# with the replay share following forgetting
FORGETTING = _consistency(
    {
        "target_share": 0.5,
        "replay": "forgetting",
        "inner": {
            "type": "floor",
            "uniform_share": 0.25,
            "inner": {"type": "hierarchical_learnability"},
        },
    }
)


# the same with a re-test counted as forgotten only at two missed rollouts, cap 1 (session 19)
TWO_MISSES = _consistency(
    {
        "target_share": 1.0,
        "replay": "forgetting",
        "forgotten_misses": 2,
        "inner": {
            "type": "floor",
            "uniform_share": 0.25,
            "inner": {"type": "hierarchical_learnability"},
        },
    }
)


@pytest.mark.parametrize(
    "base, path, quoted",
    [
        (
            {"preset": "robust"},
            "docs/compare/grid-by-init.md",
            "the rule by regime is within 1.2x in {} of {} cells",
        ),
        (
            FORGETTING,
            "docs/compare/grid-by-init-forgetting.md",
            "with the forgetting replay as its base side, within 1.2x in {} of {} cells",
        ),
        (
            TWO_MISSES,
            "docs/compare/grid-by-init-two-misses.md",
            "with two misses at cap 1 as its base side, within 1.2x in {} of {} cells",
        ),
    ],
    ids=["robust", "forgetting", "two-misses"],
)
def test_the_docs_state_each_rule_by_regime_on_the_stored_tables(capsys, base, path, quoted):
    out = _stored_output(
        capsys,
        ["--by-init", json.dumps({"base": base, "scratch": SCRATCH_RULE})],
        path,
        r"Within 1\.2x in (\d+) of (\d+) cells",
        quoted,
    )
    assert "Cells of the grid the candidate has not run" not in out


def test_the_docs_state_the_split_half_check_of_the_stored_tables(capsys):
    _stored_output(
        capsys,
        ["--split-halves"],
        "docs/compare/grid-split-halves.md",
        r"within 1\.2x of the best on the other in (\d+) of (\d+)",
        "within 1.2x of the best on the other half in {} of {}",
    )


def test_by_init_picks_the_candidate_by_where_the_policy_starts(tmp_path, capsys):
    # STUDY starts from the base: there the candidate is the "base" curriculum (uniform here),
    # and the robust preset is just another arm.
    _study(
        tmp_path,
        "a",
        {
            "uniform": [1000.0] * 10,
            "robust, labels levels": [500.0] * 10,
            "robust, labels noise 0.5": [2000.0] * 10,
            "robust, labels none": [2000.0] * 10,
        },
    )
    tables = {"base": {"sampler": {"type": "uniform"}}, "scratch": {"preset": "robust"}}
    grid.main(["--tables", str(tmp_path / "*.json"), "--by-init", json.dumps(tables)])
    out = capsys.readouterr().out
    assert out.startswith("Candidate: by init ")
    # uniform trails the level-label arm 2x with levels, and is the best arm in the other modes
    assert "**Within 1.2x in 2 of 3 cells.**" in out
    assert re.search(r"\| levels \| 1,000 \(a\) \| 500: robust, labels levels \(a\) \|", out)
    with pytest.raises(ValueError, match=r'--by-init needs a curriculum for "base" and for '):
        grid.main(["--tables", str(tmp_path / "*.json"), "--by-init", '{"base": {}}'])


def test_no_labels_picks_the_candidate_by_whether_it_is_given_labels(tmp_path, capsys):
    # The robust preset where it is given labels (levels, noise 0.5), uniform where it is told
    # none: each label mode's row reads its own curriculum's runs.
    _study(
        tmp_path,
        "a",
        {
            "uniform": [1000.0] * 10,
            "robust, labels levels": [500.0] * 10,
            "robust, labels noise 0.5": [2000.0] * 10,
            "robust, labels none": [700.0] * 10,
        },
    )
    robust = {"base": {"preset": "robust"}, "scratch": {"preset": "robust"}}
    bare = {"base": {"sampler": {"type": "uniform"}}, "scratch": {"sampler": {"type": "uniform"}}}
    args = ["--tables", str(tmp_path / "*.json"), "--by-init", json.dumps(robust)]
    grid.main([*args, "--no-labels", json.dumps(bare)])
    out = capsys.readouterr().out
    assert "; told no labels (label mode none): by init " in out
    # levels: robust is best (500); noise 0.5: robust 2,000 trails uniform 2x; none: uniform
    # 1,000 trails robust's 700 (1.43x) although robust is not the candidate there
    assert "**Within 1.2x in 1 of 3 cells.**" in out
    assert re.search(r"\| none \| 1,000 \(a\) \| 700: robust, labels none \(a\) \|", out)
    assert re.search(r"\| levels \| 500 \(a\) \| 500: robust, labels levels \(a\) \|", out)
    # without --no-labels the preset is the candidate in every mode: its none row is within
    grid.main(args)
    assert "**Within 1.2x in 2 of 3 cells.**" in capsys.readouterr().out


def test_every_stored_cell_has_one_name():
    """A cell (one pool, init and budget) is named from its studies' titles: every study of it
    must name the pool alike, or the grid's row shows one study's wording (a title once began
    "cap 0.25:", and two base cells were printed as pool "cap 0.25")."""
    names = {}
    for arm in grid.load("docs/compare/*.json"):
        names.setdefault(arm.cell, set()).add(arm.describe)
    assert {cell: n for cell, n in names.items() if len(n) > 1} == {}


def test_a_cell_of_fewer_than_ten_seeds_is_not_judged(tmp_path):
    # 2 seeds: the paired interval is a point (2x) and said "behind"; below 10 seeds, nothing
    rows = _robust_rows(
        tmp_path,
        {
            "uniform": [1000.0] * 2,
            "robust, labels levels": [2000.0] * 2,
            "robust, labels noise 0.5": [2000.0] * 2,
            "robust, labels none": [2000.0] * 2,
        },
    )
    row = rows["levels"]
    assert row.candidate.rollouts.size == 2 and row.ratio.low == row.ratio.high == 2.0
    assert grid.interval_says(row.ratio, 1.2) == "behind"
    assert grid.interval_says(row.ratio, 1.2, 2) == "not judged (2 seeds)"
    assert grid.interval_says(row.ratio, 1.2, 10) == "behind"
    text = grid.report(list(rows.values()), within=1.2, candidate="robust")
    assert "| not judged (2 seeds) |" in text
    assert "and cannot tell in 0; not judged in 3 (fewer than 10 seeds)." in text


def test_a_nan_in_a_study_file_is_refused_naming_the_study_and_arm(tmp_path):
    values = [1000.0] * 10
    values[4] = float("nan")
    path = _study(tmp_path, "a", {"uniform": values})
    with pytest.raises(
        ValueError, match=r"arm 'uniform': rollouts_to_target holds NaN at seeds \[4\]"
    ):
        grid.study_arms(str(path))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--by-init", "{}", "--curriculum", "{}"], "--curriculum: not allowed with argument"),
        (["--curriculum", "{}", "--preset", "robust"], "--preset: not allowed with argument"),
        (["--preset", "nosuchpreset"], "--preset: invalid choice: 'nosuchpreset'"),
        (
            ["--split-halves", "--curriculum", "{}", "--no-labels", "{}"],
            "--split-halves takes no candidate .*, got --curriculum, --no-labels",
        ),
        (["--split-halves", "--preset", "robust"], "--split-halves takes no candidate"),
    ],
)
def test_candidate_flags_that_would_be_ignored_are_refused(tmp_path, capsys, argv, message):
    """--by-init silently won over --curriculum, which won over --preset (an unknown preset
    was never checked), and --split-halves ignored every candidate flag."""
    _study(tmp_path, "a", {})
    with pytest.raises(SystemExit) as e:
        grid.main(["--tables", str(tmp_path / "*.json"), *argv])
    assert e.value.code == 2  # a parser error, before any table is read
    assert re.search(message, capsys.readouterr().err)
