"""A study records, per seed, the share of coin-flip and of real entries the noise diagnostic
flags at the end of the budget, for the arms whose sampler has one (docs/noise.md)."""

import json

import jax
import numpy as np
import pytest

import curriculax as cx
import experiments.compare.run as run_module
from curriculax import tasks as T
from experiments import compare
from experiments._builders import make_study_pool, sampler_categories
from experiments.compare import noise

LP, BANDIT = "learning progress", "bandit (advantage x progress)"
STUDY = f"""
title = "tiny noise"
seeds = 2
generations = 4
eval_every = 2
baseline = "uniform"

[experiment]
batch_groups = 4
groups_per_generation = 4
group_size = 4

[experiment.task]
num_levels = 2
level_mass = [1, 1]
pool_size = 16
held_out_per_level = 2
distractors = 0.5
eval_levels = [1]

[[arms]]
name = "uniform"
curriculum = {{ sampler = {{ type = "uniform" }} }}

[[arms]]
name = "{LP}"
curriculum = {{ sampler = {{ type = "learning_progress", noise_visits = 1 }} }}

[[arms]]
name = "{BANDIT}"
[arms.curriculum.sampler]
type = "category_bandit"
reward = "advantage_progress"
noise_batches = 2
"""


def _config(path):
    return compare.cli._cli.load_config(
        compare.CompareConfig,
        compare.cli._cli.base_parser("", steps=0, run_dir="").parse_args(["--config", str(path)]),
    )


@pytest.fixture
def finals(monkeypatch):
    """``{arm name: final sampler state}`` of every arm a study runs (not of reused ones)."""
    out = {}
    run_seeds = run_module.run_seeds

    def spy(config, arm, mesh=None, progress=None):
        curves, final = run_seeds(config, arm, mesh, progress)
        out[arm["name"]] = final
        return curves, final

    monkeypatch.setattr(run_module, "run_seeds", spy)
    return out


def _noise_rows(table):
    part = table.split("Noise diagnostic at the end of the budget")[1].split("Wall time")[0]
    rows = [r for r in part.splitlines() if r.startswith("| ")][1:]  # after the header
    return {r.split(" | ")[0][2:]: r for r in rows}


def test_a_study_records_the_noise_flags_of_its_final_sampler_states(tmp_path, finals):
    toml = tmp_path / "study.toml"
    toml.write_text(STUDY)
    out = tmp_path / "out"
    compare.main(["--config", str(toml), "--run-dir", str(out), "--no-progress"])
    config = _config(toml)
    exp = config.experiment
    pool = make_study_pool(exp)
    coin = pool.category == pool.coin_level
    assert coin.sum() == 8 and (~coin).sum() == 8
    groups = config.generations * exp.groups_per_generation
    data = json.loads((out / "compare.json").read_text())["arms"]
    assert finals["uniform"] is None and "noise_flags" not in data["uniform"]

    # The states are the end of the budget's: every group of every seed was observed.
    lp, bandit = finals[LP], finals[BANDIT]
    assert isinstance(lp, cx.samplers.LearningProgressState)
    assert lp.clock.tolist() == [groups, groups]
    assert isinstance(bandit, cx.samplers.CategoryBanditState)
    assert bandit.draws.sum(1).tolist() == [groups, groups]

    for name, unit in ((LP, "task"), (BANDIT, "category")):
        flags = data[name]["noise_flags"]
        assert flags["unit"] == unit
        for key in ("coin_flips_flagged", "real_flagged"):
            assert len(flags[key]) == 2 and all(0.0 <= x <= 1.0 for x in flags[key])
    # Consistent with the samplers' own host functions on seed 0's final state.
    # A task is flagged at its first entry (its copies share its state), for every copy.
    ids = cx.samplers.noisy_tasks(jax.tree.map(lambda x: x[0], lp), noise_visits=1)
    flagged = np.isin(T.distinct_tasks(pool.train), ids)
    assert data[LP]["noise_flags"]["coin_flips_flagged"][0] == pytest.approx(flagged[coin].mean())
    assert data[LP]["noise_flags"]["real_flagged"][0] == pytest.approx(flagged[~coin].mean())
    cats = cx.samplers.noisy_categories(jax.tree.map(lambda x: x[0], bandit), noise_batches=2)
    told = sampler_categories(pool, exp.task.labels)
    flagged = np.array([c in cats.tolist() for c in told])
    assert data[BANDIT]["noise_flags"]["coin_flips_flagged"][0] == pytest.approx(
        flagged[coin].mean()
    )
    assert data[BANDIT]["noise_flags"]["real_flagged"][0] == pytest.approx(flagged[~coin].mean())

    # The table: one row per arm with the diagnostic, mean (min-max) over seeds.
    made = (out / "compare.md").read_text()
    rows = _noise_rows(made)
    assert set(rows) == {LP, BANDIT}
    coin_lp = np.asarray(data[LP]["noise_flags"]["coin_flips_flagged"])
    assert rows[LP].startswith(
        f"| {LP} | per task | {coin_lp.mean():.2f} ({coin_lp.min():.2f}-{coin_lp.max():.2f}) | "
    )
    assert f"| {BANDIT} | per category | " in rows[BANDIT]

    # --report rebuilds the same table from compare.json.
    compare.main(["--report", str(out / "compare.json")])
    assert (out / "compare.md").read_text().split("\n", 1)[1] == made.split("\n", 1)[1]

    # An arm file saved before the flags were kept still loads: its row reads "-".
    path = compare.cache.arm_path(str(out), config, compare.config.find_arm(config, LP))
    with np.load(path) as f:
        old = {k: f[k] for k in f.files if k not in noise.FIELDS}
    with open(path, "wb") as f:
        np.savez(f, **old)
    finals.clear()
    compare.main(["--config", str(toml), "--run-dir", str(out), "--no-progress"])
    assert finals == {}  # every arm reused
    rows = _noise_rows((out / "compare.md").read_text())
    assert rows[LP] == f"| {LP} | per task | - | - |"
    assert rows[BANDIT] == _noise_rows(made)[BANDIT]
    assert "noise_flags" not in json.loads((out / "compare.json").read_text())["arms"][LP]


@pytest.mark.parametrize(
    ("sampler", "unit", "thresholds"),
    [
        (
            {"type": "learning_progress", "noise_reliability": 0.3},
            "task",
            {"noise_reliability": 0.3},
        ),
        ({"type": "curriculax.samplers:learning_progress"}, "task", {}),
        (
            {"type": "floor", "inner": {"type": "learning_progress", "noise_visits": 3}},
            "task",
            {"noise_visits": 3},
        ),
        ({"type": "category_bandit", "reward": "advantage"}, "category", {}),
        (
            {
                "type": "skip_zero_variance",
                "inner": {"type": "category_bandit", "noise_batches": 5},
            },
            "category",
            {"noise_batches": 5},
        ),
        ({"type": "floor", "inner": {"type": "learnability"}}, None, None),
        ({"type": "uniform"}, None, None),
    ],
)
def test_which_arms_have_a_noise_diagnostic(sampler, unit, thresholds):
    diag = noise.noise_diagnostic({"name": "a", "curriculum": {"sampler": sampler}})
    if unit is None:
        assert diag is None
        return
    assert (diag.unit, diag.thresholds) == (unit, thresholds)
    assert diag.shares_copies == (unit == "task")  # learning_progress takes entry_task
    assert noise.noise_diagnostic({"name": "o", "oracle": {}}) is None


def test_a_task_flag_counts_for_its_copies_only_where_the_sampler_shares_their_state():
    # Entries 0-1 hold one coin flip, 2-3 another, 4-5 a real task; the sampler flags the
    # first coin flip (at its first entry) and nothing else.
    coin = np.array([1, 1, 1, 1, 0, 0], bool)
    entry_task = np.array([0, 0, 2, 2, 4, 4])
    states = np.zeros((1, 6))  # one seed; the fake host function ignores it

    def diag(shares):
        return noise.NoiseDiagnostic("task", object, {}, lambda state: np.array([0]), None, shares)

    got = noise.flag_shares(diag(True), states, coin, np.zeros(6, int), entry_task)
    assert got["noise_coin_flagged"].tolist() == [0.5] and got["noise_real_flagged"] == 0.0
    got = noise.flag_shares(diag(False), states, coin, np.zeros(6, int), entry_task)
    assert got["noise_coin_flagged"].tolist() == [0.25]  # per entry: only entry 0
    rc = noise.noise_diagnostic({"name": "c", "curriculum": {"preset": "robust"}})
    # reward_consistency takes entry_task (since 2026-12-07) and marks every copy's entry, so
    # counting per task or per entry gives the same share
    assert rc.unit == "task" and rc.shares_copies


@pytest.mark.parametrize(
    "sampler",
    [
        {"type": "floor", "inner": {"type": "learning_progress"}},
        {"type": "skip_zero_variance", "inner": {"type": "category_bandit"}},
    ],
)
def test_a_wrapped_samplers_state_is_found_in_the_engine_state(tmp_path, sampler):
    toml = tmp_path / "study.toml"
    toml.write_text(STUDY)
    config = _config(toml)
    arm = {"name": "wrapped", "curriculum": {"sampler": sampler}}
    built, _, _ = compare.build_arm(config, arm)
    state = jax.eval_shape(built.engine.init, jax.random.key(0))
    diag = noise.noise_diagnostic(arm)
    assert isinstance(noise.final_state(diag, state), diag.state_type)


def test_the_consistency_gate_keeps_proven_coin_flips_out_of_a_study_run(tmp_path, finals):
    # The real GRPO solver reports a hash of each completion; a coin flip's group that repeats an
    # answer with two rewards is proof, so its task is marked and its groups rejected. A real
    # task's reward is a function of its answer: none can be marked, on any seed.
    gated = """
[[arms]]
name = "gated"
[arms.curriculum.sampler]
type = "reward_consistency"
inner = { type = "uniform" }
[arms.curriculum.gates.consistency]
type = "reward_consistency"
"""
    toml = tmp_path / "study.toml"
    toml.write_text(
        STUDY.split("[[arms]]")[0] + '[[arms]]\nname = "uniform"\n'
        'curriculum = { sampler = { type = "uniform" } }\n' + gated
    )
    out = tmp_path / "out"
    compare.main(["--config", str(toml), "--run-dir", str(out), "--no-progress"])
    data = json.loads((out / "compare.json").read_text())["arms"]
    flags = data["gated"]["noise_flags"]
    assert flags["unit"] == "task"
    assert max(flags["coin_flips_flagged"]) > 0 and flags["real_flagged"] == [0.0, 0.0]
    # The gate rejected groups (the run's admission rate fell below 1); uniform admits all.
    assert min(data["gated"]["admission_rate"]) < 1.0
    assert data["uniform"]["admission_rate"] == [1.0, 1.0]
    state = finals["gated"]
    assert isinstance(state, cx.samplers.RewardConsistencyState)
