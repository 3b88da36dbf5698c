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


def _config(groups, seeds=10):
    from experiments.compare.config import CompareConfig

    names = [n for g in groups for n in g]
    arms = tuple({"name": n, "curriculum": {"sampler": {"type": "uniform"}}} for n in names)
    return CompareConfig(
        arms=arms, baseline=names[0], best_of=tuple(map(tuple, groups)), seeds=seeds
    )


def _data(per_arm):
    return {
        n: {"rollouts_to_target": [None if x is None else float(x) for x in v]}
        for n, v in per_arm.items()
    }


def test_fewer_than_ten_seeds_give_no_verdict_and_ten_do():
    for seeds in range(1, 11):
        base = np.full(seeds, 800.0) + np.arange(seeds)
        cmp = report.compare_arms(base, base / 2, 1000.0)
        assert cmp["ratio"].low > 1  # the intervals alone would claim "beat"
        expected = "beat" if seeds >= 10 else f"not judged ({seeds} seeds)"
        assert cmp["verdict"] == expected, seeds
        assert report._comparison_json(cmp)["verdict"] == expected
    # unequal counts: the fewer decides
    cmp = report.compare_arms(np.full(12, 800.0), np.full(9, 400.0), 1000.0)
    assert cmp["verdict"] == "not judged (9 seeds)"


def test_a_nan_in_stored_per_seed_numbers_is_refused_naming_the_arm():
    import pytest

    with pytest.raises(
        ValueError, match=r"arm 'uniform': rollouts_to_target holds NaN at seeds \[1\]"
    ):
        report.stored_hits({"rollouts_to_target": [10.0, float("nan"), None]}, arm="uniform")
    assert report.stored_hits({"rollouts_to_target": [10.0, None]}).tolist() == [10.0, np.inf]
    config = _config([["a"], ["b"]])
    data = _data({"a": [100.0] * 10, "b": [50.0] * 9 + [None]})
    data["b"]["rollouts_to_target"][3] = float("nan")
    with pytest.raises(ValueError, match=r"arm 'b': rollouts_to_target holds NaN at seeds \[3\]"):
        report.best_of(config, data)


def test_best_against_best_says_the_arms_were_chosen_on_the_same_seeds():
    config = _config([["a"], ["b"]])
    data = _data({"a": [800.0 + i for i in range(10)], "b": [400.0 + i for i in range(10)]})
    text = report.best_of_text(config, data)
    assert "The best arms were chosen on these same seeds; the intervals are not adjusted" in text
    assert "arms: the best of more arms" not in text
    # unequal groups: the larger group's best gains more from the choice, and the text says so
    config = _config([["a"], ["b", "c", "d"]])
    data.update(_data({"c": [500.0] * 10, "d": [600.0] * 10}))
    text = report.best_of_text(config, data)
    assert "The groups hold 1 vs 3 arms: the best of more arms gains more from the choice." in text
