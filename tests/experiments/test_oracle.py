"""The oracle weighs each task by its own measured p (1 - p), not its level's."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curriculax import tasks as T
from curriculax.engine import Rollouts
from experiments._builders import GRPOExperimentConfig, TaskConfig, build, make_study_pool
from experiments._oracle import (
    OracleState,
    build_oracle,
    make_measure,
    make_probe,
    oracle,
    oracle_settings,
    probe_rows,
)


class _Built(NamedTuple):
    pool: object
    rollout: object
    engine: object = None


class _Cur(NamedTuple):
    sampler: object


class _State(NamedTuple):
    solver: object
    curricula: dict


def _pool():
    # 4 symbols: level 0 (length 1) has 4 distinct tasks for its 12 entries; level 1 has 16.
    task = TaskConfig(num_levels=2, level_mass=(1.0, 1.0), pool_size=24, held_out_per_level=2)
    return make_study_pool(GRPOExperimentConfig(task=task))


def test_probe_rows_are_the_distinct_tasks_capped_per_category():
    pool = _pool()
    rows = probe_rows(pool)
    prompts = np.asarray(pool.train.prompt)
    assert len({r.tobytes() for r in prompts[rows.rows]}) == rows.rows.size  # distinct
    assert rows.distinct.tolist() == rows.probed.tolist()
    assert rows.probed[0] <= 4 and rows.probed[1] == 12
    # every entry points at the probed task with its prompt
    assert np.array_equal(prompts[rows.rows[rows.row_of_entry]], prompts)
    capped = probe_rows(pool, per_category=3)
    assert capped.probed.tolist() == [3, 3]
    assert (capped.row_of_entry == -1).sum() == 24 - 3 * (12 // rows.probed[0]) - 3


def test_learnability_oracle_scores_tasks_not_levels():
    pool = _pool()
    rows = probe_rows(pool)
    # Level 1: the first half of its probed tasks always pass, the rest never (level mean
    # 0.5, level-mean p(1-p) 0.25, no task with signal); level 0: every task passes half
    # the time (every task has signal).
    solved = jnp.asarray(np.asarray(pool.train.key)[rows.rows[rows.category == 1][:6]])

    def rollout(state, tasks, key, group_size):
        half = (jnp.arange(group_size) % 2).astype(jnp.float32)
        always = jnp.isin(tasks.key, solved).astype(jnp.float32)[:, None]
        rewards = jnp.where((tasks.level == 0)[:, None], half, always * jnp.ones_like(half))
        shape = rewards.shape
        return Rollouts(rewards, jnp.ones(shape, bool), jnp.ones((*shape, 1), bool), ())

    built = _Built(pool, rollout)
    probe = make_probe(built, per_category=None, samples=4, env="e")
    n = pool.category.size
    state = _State(None, {"e": _Cur(OracleState(jnp.zeros(n), jnp.zeros(n)))})
    out = jax.jit(probe)(state, jax.random.key(0)).curricula["e"].sampler
    weight, rate = np.asarray(out.weight), np.asarray(out.pass_rate)
    level = pool.category
    assert np.allclose(weight[level == 0], 0.25) and np.allclose(weight[level == 1], 0.0)
    assert np.allclose(rate[level == 0], 0.5) and set(rate[level == 1].tolist()) == {0.0, 1.0}


def test_sampled_pass_rates_count_exact_matches_not_partial_credit():
    """With ``grpo.reward = "partial"`` a rollout right on half its positions earns 0.5: the
    sampled probe counted it as half a pass, so a task never solved read as "sometimes"."""
    pool = _pool()

    def rollout(state, tasks, key, group_size):
        # every rollout half right, except the first of each group of a level-0 task: right
        part = jnp.full((tasks.level.shape[0], group_size), 0.5)
        rewards = part.at[:, 0].set(jnp.where(tasks.level == 0, 1.0, 0.5))
        shape = rewards.shape
        return Rollouts(rewards, jnp.ones(shape, bool), jnp.ones((*shape, 1), bool), ())

    measure, rows = make_measure(_Built(pool, rollout), samples=4)
    rate = np.asarray(jax.jit(measure)(None, jax.random.key(0)))
    level = rows.category
    assert np.allclose(rate[level == 0], 0.25) and np.allclose(rate[level == 1], 0.0)


# --------------------------------------------------------------- the sound p(1 - p) oracle


def _top(n, weight, num=16, calls=64, **kwargs):
    """``i32[calls, num]``: draws of a ``"top"`` oracle from fixed weights, one key per call."""
    s = oracle(n, draw="top", **kwargs)
    state = OracleState(jnp.zeros(n), jnp.asarray(weight, jnp.float32))
    keys = jax.random.split(jax.random.key(0), calls)
    return np.asarray(jax.jit(jax.vmap(lambda k: s.sample(state, k, num)[0]))(keys))


def test_one_task_with_all_the_weight_gets_one_position_per_call_not_the_call():
    # The degenerate case of the old arm: one task with one hit in 8, every other task 0.
    n = 300
    weight = np.zeros(n)
    weight[137] = (1 / 8) * (7 / 8)
    draws = _top(n, weight)
    for call in draws:
        assert len(set(call.tolist())) == 16  # distinct within the call
        assert (call == 137).sum() == 1
    # The other 15 positions spread over the pool (ties broken at random), not a handful.
    assert len(set(draws.reshape(-1).tolist())) > 200


def test_copies_of_a_task_count_once_within_a_call():
    # Entries 0-99 hold 4 tasks (entry i: task i % 4), the rest are distinct; the 4 repeated
    # tasks have all the weight, as a solved-sometimes short level would.
    n = 300
    entry_task = np.where(np.arange(n) < 100, np.arange(n) % 4, np.arange(n))
    weight = np.where(np.arange(n) < 100, 0.2, 0.0)
    draws = _top(n, weight, entry_task=entry_task, uniform_share=0.0)
    for call in draws:
        tasks = entry_task[call]
        assert len(set(tasks.tolist())) == 16
        assert set(range(4)) <= set(tasks.tolist())


def test_the_uniform_share_is_drawn_over_the_entries():
    # Tasks 0-99 carry equal weight, the rest none: only the uniform share leaves them.
    n, num, calls, share = 1000, 16, 2000, 0.05
    weight = np.where(np.arange(n) < 100, 0.25, 0.0)
    draws = _top(n, weight, num=num, calls=calls, uniform_share=share)
    outside = int((draws >= 100).sum())
    expected = share * num * calls * 0.9  # a uniform pick lands outside 0-99 w.p. 0.9
    assert abs(outside - expected) < 5 * np.sqrt(expected) + 1
    none = _top(n, weight, num=num, calls=200, uniform_share=0.0)
    assert int((none >= 100).sum()) == 0


def test_oracle_settings_fill_each_modes_defaults_and_name_bad_keys():
    sound = oracle_settings({})
    assert sound["mode"] == "learnability" and sound["exact"] and sound["every"] == 1
    assert sound["draw"] == "top" and sound["uniform_share"] == 0.05
    frontier = oracle_settings({"mode": "frontier", "gates": {}})
    assert frontier["draw"] == "proportional" and frontier["every"] == 0
    with pytest.raises(ValueError, match=r"unknown oracle key\(s\) \['sample'\]"):
        oracle_settings({"sample": 8})
    with pytest.raises(ValueError, match=r"oracle.draw must be one of"):
        oracle_settings({"draw": "greedy"})


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"mode": "frontier", "mastered": 1.5}, r"oracle\.mastered must be .* got 1\.5"),
        ({"mastered": 0.0}, r"oracle\.mastered must be .* got 0\.0"),
        ({"mastered": float("nan")}, r"oracle\.mastered must be .* got nan"),
        ({"mastered": True}, r"oracle\.mastered must be .* got True"),
        ({"mastered": "0.9"}, r"oracle\.mastered must be .* got '0\.9'"),
        ({"exact": "no"}, r"oracle\.exact must be true or false, got 'no'"),
        ({"mode": "frontier", "exact": 1}, r"oracle\.exact must be true or false, got 1"),
        ({"uniform_share": "x"}, r"oracle\.uniform_share must be a number, got 'x'"),
        ({"uniform_share": 1.5}, r"oracle\.uniform_share must lie in \[0, 1\], got 1\.5"),
        ({"floor": float("inf")}, r"oracle\.floor must be a finite number > 0, got inf"),
        ({"floor": 0.0}, r"oracle\.floor must be a finite number > 0, got 0\.0"),
        ({"floor": True}, r"oracle\.floor must be a number, got True"),
        ({"floor": "x"}, r"oracle\.floor must be a number, got 'x'"),
    ],
    ids=[
        *("mastered above 1", "mastered 0", "mastered nan", "mastered bool", "mastered str"),
        *("exact str", "exact int", "uniform_share str", "uniform_share 1.5"),
        *("floor inf", "floor 0", "floor bool", "floor str"),
    ],
)
def test_oracle_settings_refuse_a_mastered_or_exact_out_of_range(table, message):
    """``mastered = 1.5`` kept the frontier on level 0 for the whole run and ``exact = "no"``
    read as true; both were accepted. ``floor = inf`` put every proportional draw on the
    pool's last entry; a string ``uniform_share`` failed with a bare TypeError."""
    with pytest.raises(ValueError, match=message):
        oracle_settings(table)
    assert oracle_settings({"mode": "frontier", "mastered": 1, "exact": True})["mastered"] == 1


def test_a_study_with_a_bad_mastered_is_refused_before_any_arm_runs(tmp_path, monkeypatch):
    from experiments import compare
    from experiments.compare import cli
    from tests.experiments.test_compare import STUDY, _fake_run_arm

    calls = []
    monkeypatch.setattr(cli, "run_arm", _fake_run_arm(calls))
    old = 'mode = "frontier" }'
    assert old in STUDY
    config = tmp_path / "study.toml"
    config.write_text(STUDY.replace(old, 'mode = "frontier", mastered = 1.5 }'))
    with pytest.raises(ValueError, match=r"arm 'oracle': oracle\.mastered must be .* got 1\.5"):
        compare.main(["--config", str(config), "--run-dir", str(tmp_path / "out")])
    assert calls == []


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"every": 2.5}, r"oracle\.every must be a whole number, got 2\.5"),
        ({"every": 0.5}, r"oracle\.every must be a whole number, got 0\.5"),
        ({"every": 2.0}, r"oracle\.every must be a whole number, got 2\.0"),
        ({"every": True}, r"oracle\.every must be a whole number, got True"),
        ({"mode": "frontier", "per_category": 1.5}, r"oracle\.per_category .* got 1\.5"),
        ({"samples": "8"}, r"oracle\.samples must be a whole number, got '8'"),
        ({"mode": "frontier", "samples": 2.5}, r"oracle\.samples .* got 2\.5"),
    ],
    ids=[
        "every 2.5",
        "every 0.5",
        "every 2.0",
        "every bool",
        "per_category",
        "samples str",
        "samples 2.5",
    ],
)
def test_oracle_settings_refuse_counts_that_are_not_whole_numbers(table, message):
    """``every = 2.5`` divided ``eval_every = 5`` (5 % 2.5 == 0), so the arm then scanned
    ``5 // 2.5 = 2`` blocks of ``int(2.5) = 2`` batches: 4 generation batches per evaluation
    instead of 5 (``every = 0.5``: none), while the tables stated the full budget."""
    with pytest.raises(ValueError, match=message):
        oracle_settings(table)
    assert oracle_settings({"every": np.int64(5), "per_category": 3, "samples": 2})["every"] == 5


def test_a_study_with_a_fractional_oracle_every_is_refused_before_any_arm_runs(
    tmp_path, monkeypatch
):
    from experiments import compare
    from experiments.compare import cli
    from tests.experiments.test_compare import STUDY, _fake_run_arm

    calls = []
    monkeypatch.setattr(cli, "run_arm", _fake_run_arm(calls))
    text = STUDY.replace("generations = 4\neval_every = 2", "generations = 10\neval_every = 5")
    text = text.replace("oracle = { every = 1,", "oracle = { every = 2.5,")
    assert "eval_every = 5" in text and "every = 2.5" in text
    config = tmp_path / "study.toml"
    config.write_text(text)
    with pytest.raises(ValueError, match=r"arm 'oracle': oracle\.every must be a whole .* 2\.5"):
        compare.main(["--config", str(config), "--run-dir", str(tmp_path / "out")])
    assert calls == []
    # CompareConfig's own check of every against eval_every takes whole numbers only, too
    arm = {"name": "o", "oracle": {"every": 2.5}}
    with pytest.raises(ValueError, match=r"arm 'o': oracle\.every must be a whole number"):
        compare.CompareConfig(generations=10, eval_every=5, baseline="o", arms=(arm,))


def _small_experiment():
    task = TaskConfig(num_levels=2, level_mass=(1.0, 1.0), pool_size=24, held_out_per_level=2)
    return GRPOExperimentConfig(task=task)


def test_exact_pass_rates_match_sampled_rollouts():
    # A random policy: each task's teacher-forced probability of its answer against the
    # share of 4096 sampled rollouts that match it exactly.
    exp = _small_experiment()
    built = build(exp)
    rows = probe_rows(built.pool)
    tasks = T.take(built.pool.train, jnp.asarray(rows.rows[:6]))
    state = built.engine.init(jax.random.key(3)).solver
    exact = np.asarray(jax.jit(built.pass_probability)(state, tasks))
    out = jax.jit(built.rollout, static_argnums=3)(state, tasks, jax.random.key(4), 4096)
    sampled = np.asarray(jnp.mean(out.rewards, axis=1))
    assert np.all((exact > 0) & (exact < 1))
    se = np.sqrt(exact * (1 - exact) / 4096)
    assert np.all(np.abs(sampled - exact) < 5 * se), (exact, sampled)


def test_the_sound_oracle_draws_the_distinct_tasks_of_highest_true_p_one_minus_p():
    exp = _small_experiment()
    built, probe = build_oracle(exp, oracle_settings({"uniform_share": 0.0}))
    env = built.engine.env_names[0]
    state = jax.jit(probe)(built.engine.init(jax.random.key(0)), jax.random.key(1))
    sampler_state = state.curricula[env].sampler
    rows = probe_rows(built.pool)
    p = np.asarray(
        jax.jit(built.pass_probability)(
            state.solver, T.take(built.pool.train, jnp.asarray(rows.rows))
        )
    )
    assert np.allclose(np.asarray(sampler_state.pass_rate)[rows.rows], p, rtol=1e-5)
    cur = built.engine.envs[0].curriculum
    ids, _ = jax.jit(cur.sample, static_argnums=2)(state.curricula[env], jax.random.key(2), 8)
    entry_task = T.distinct_tasks(built.pool.train)
    chosen = entry_task[np.asarray(ids)]
    assert len(set(chosen.tolist())) == 8
    # The 8 highest p (1 - p) (up to the ranking keys' resolution: 0.2% apart).
    score = dict(zip(rows.rows.tolist(), (p * (1 - p)).tolist(), strict=True))
    eighth = np.sort(p * (1 - p))[::-1][7]
    assert min(score[t] for t in chosen.tolist()) >= eighth * (1 - 0.01)


def test_tiny_weights_are_still_ranked_not_tied():
    # One task near 0.5 and the rest orders of magnitude below it (p ~ 1e-4 .. 1e-9): the
    # draws take the next-best tasks in order, not random ones.
    n = 100
    weight = np.zeros(n)
    weight[0] = 0.25
    weight[1:8] = 10.0 ** -np.arange(4, 11)  # tasks 1-7, decreasing
    draws = _top(n, weight, num=8, calls=16, uniform_share=0.0)
    for call in draws:
        assert sorted(call.tolist()) == list(range(8))
