"""The curriculum-step benchmark runs, and its host baseline keeps the library's semantics."""

import importlib
import math

import jax
import numpy as np
import pytest

import curriculax as cx
from benchmarks import _host_baseline, _numpy_baseline, curriculum_step, varying_n

# hard holds 0..19, medium (weight 0) 20..39, easy 40..49, unscored (weight 0) 50..59. The
# weights make a first draw hard with probability 1.0 / (1.0 + 0.2) = 5/6: a draw uniform over
# the 30 drawable tasks gives 2/3, one uniform over the two bands 1/2.
BANDS = (("hard", 0.25, 1.0), ("medium", 0.75, 0.0), ("easy", 1.0, 0.2))
P_HARD = 1.0 / 1.2
# 400 first draws: the weighted draw lies in (0.76, 0.91) but for a 4-sigma miss (sd 0.019);
# the uniform draw's 2/3 is 4 of its sds (0.024) below 0.76.
LOW, HIGH = 0.76, 0.91
N, NUM = 60, 20
HARD, MEDIUM, EASY = set(range(20)), set(range(20, 40)), set(range(40, 50))


def test_quick_mode_prints_one_row_per_size(capsys):
    out = curriculum_step.main(["--quick"])
    rows = out["rows"]
    assert [r["n"] for r in rows] == list(curriculum_step.QUICK_SIZES)
    for r in rows:
        for field in ("cx_ms", "cx_sample_ms", "cx_observe_ms", "drv_ms", "drv_compiled_ms"):
            assert math.isfinite(r[field]) and r[field] > 0, (field, r)
        for field in ("np_ms", "np_sample_ms", "np_observe_ms", "host_ms", "mem_ms"):
            assert math.isfinite(r[field]) and r[field] > 0, (field, r)
        assert r["speedup"] == r["host_ms"] / r["cx_ms"]
        assert r["drv_ratio"] == r["drv_ms"] / r["cx_ms"]
        assert r["np_ratio"] == r["np_ms"] / r["cx_ms"]
        assert math.isfinite(r["drv_overhead_ms"])  # median of paired differences: any sign
        assert r["mem_ratio"] == r["cx_ms"] / r["mem_ms"]
    printed = capsys.readouterr().out
    for n in curriculum_step.QUICK_SIZES:
        assert printed.count(f"| {n:,} |") == 3  # the step, the driver and the breakdown tables
    assert f"Driver targets at N = {max(curriculum_step.QUICK_SIZES):,}" in printed
    assert "Numpy is faster than the jitted step" in printed
    assert set(out["targets"]) >= {"speedup_met", "mem_ratio_met", "drv_ratio_met"}


def _results():
    """One group of 2 per task: hard all 0, medium one 0 and one 1, easy all 1, rest invalid."""
    rewards = np.zeros((N, 2), np.float32)
    rewards[20:40, 1] = 1.0
    rewards[40:50] = 1.0
    valid = np.ones((N, 2), bool)
    valid[50:] = False
    adv = rewards - rewards.mean(axis=1, keepdims=True)
    return {
        "task_ids": np.arange(N, dtype=np.int32),
        "rewards": rewards,
        "valid": valid,
        "advantages": adv[:, :, None],
        "token_mask": np.ones((N, 2, 1), bool),
    }


def _scored_pair():
    """Curriculax and host curricula, both warmed up and fed the same results."""
    cur = cx.curriculum(
        cx.samplers.difficulty_pools(N, [cx.samplers.Band(*b) for b in BANDS], unscored_weight=0.0),
        gates={"zero_advantage": cx.gates.advantage_range(0.0, 0.0)},
    )
    sample = jax.jit(cur.sample, static_argnums=2)
    state = cur.init(jax.random.key(0))
    for i in range(N // NUM):
        _, state = sample(state, jax.random.key(i), NUM)
    results = _results()
    admission, state = jax.jit(cur.observe)(state, curriculum_step.as_group_results(results))

    host = _host_baseline.zero_advantage_curriculum(N, bands=BANDS, unscored_weight=0.0)
    for _ in range(N // NUM):
        host.sample(NUM)
    host_admitted = host.observe(*(results[k].tolist() for k in curriculum_step.FIELDS))
    return sample, state, admission, host, host_admitted


def test_host_and_curriculax_observe_and_draw_with_the_same_semantics():
    sample, state, admission, host, host_admitted = _scored_pair()

    # Observe + gate: identical per-task state and identical admissions (only medium trains).
    np.testing.assert_array_equal(np.asarray(admission.admitted), host_admitted)
    assert set(np.flatnonzero(host_admitted).tolist()) == MEDIUM
    tasks = [host.sampler.tasks[t] for t in range(N)]
    np.testing.assert_array_equal(np.asarray(state.sampler.scores), [t["score"] for t in tasks])
    np.testing.assert_array_equal(np.asarray(state.sampler.scored), [t["scored"] for t in tasks])
    np.testing.assert_array_equal(np.asarray(state.sampler.seen), [t["seen"] for t in tasks])
    assert bool(state.sampler.seen.all()) and host.sampler.unseen == 0  # both past warm-up

    # Sample: distinct tasks, only from positive-weight bands (hard, easy), in both.
    cx_ids = np.asarray(sample(state, jax.random.key(7), NUM)[0]).tolist()
    host_ids = host.sample(NUM)
    for ids in (cx_ids, host_ids):
        assert len(set(ids)) == NUM
        assert set(ids) <= HARD | EASY

    # Band choice by weight (P_HARD = 5/6), not uniform over tasks (2/3) or bands (1/2).
    keys = jax.random.split(jax.random.key(8), 400)
    firsts = [int(sample(state, k, NUM)[0][0]) for k in keys]  # compiled once, above
    cx_hard = np.mean([t in HARD for t in firsts])
    host_hard = np.mean([host.sample(NUM, max_draws=1)[0] in HARD for _ in range(400)])
    assert LOW < cx_hard < HIGH and LOW < host_hard < HIGH, (cx_hard, host_hard, P_HARD)


def test_numpy_baseline_observes_and_draws_with_the_same_semantics():
    sample, state, admission, _, _ = _scored_pair()
    fast = _numpy_baseline.NumpyCurriculum(N, bands=BANDS, unscored_weight=0.0)
    for _ in range(N // NUM):
        fast.sample(NUM)
    results = _results()
    admitted = fast.observe(*(results[k] for k in curriculum_step.FIELDS))

    # Observe + gate: identical per-task state, admissions and counters.
    np.testing.assert_array_equal(np.asarray(admission.admitted), admitted)
    np.testing.assert_array_equal(np.asarray(state.sampler.scores), fast.scores)
    np.testing.assert_array_equal(np.asarray(state.sampler.scored), fast.scored)
    np.testing.assert_array_equal(np.asarray(state.sampler.seen), fast.seen)
    assert fast.seen.all()  # warm-up over
    assert fast.rejected == int(state.gates["zero_advantage"].rejected) == 30  # hard + easy
    assert fast.failed_groups == int(state.failed_groups) == 10
    # Band labels (hard, medium, easy, unscored): the library's metrics count the same.
    assert [int(np.count_nonzero(fast.labels() == b)) for b in range(4)] == [20, 20, 10, 10]

    # Sample: distinct tasks, only from positive-weight bands; a band retires when drawn out.
    for _ in range(50):
        ids = fast.sample(NUM).tolist()
        assert len(set(ids)) == NUM and set(ids) <= HARD | EASY
    ids = fast.sample(30).tolist()  # exactly the 30 drawable tasks
    assert sorted(ids) == sorted(HARD | EASY)
    ids = fast.sample(45).tolist()  # more than drawable: each appears once or twice
    counts = np.bincount(ids, minlength=N)
    assert set(ids) == HARD | EASY and counts.max() == 2 and len(ids) == 45

    # Band choice by weight (P_HARD = 5/6), not uniform over tasks (2/3) or bands (1/2).
    firsts = [fast.sample(NUM)[0] in HARD for _ in range(400)]
    assert LOW < np.mean(firsts) < HIGH, (np.mean(firsts), P_HARD)
    del sample


def _run_module(name: str, *args: str, env: dict[str, str] | None = None):
    """Runs ``python -m name args`` from the repository root (a fresh JAX: these benchmarks
    set the device count before JAX starts), ``env`` added to the environment; returns the
    finished process (its stdout and stderr as text)."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run(
        [sys.executable, "-m", name, *args],
        cwd=root,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out


def test_scaling_benchmark_quick_mode_prints_both_tables_and_times_no_compile():
    out = _run_module("benchmarks.scaling", "--quick", env={"JAX_LOG_COMPILES": "1"})
    stdout = out.stdout
    assert "## step time against pool size" in stdout
    assert "## step time against device count" in stdout
    rows = [x for x in stdout.splitlines() if x.startswith("| ") and x[2].isdigit()]
    assert len(rows) == 2 + 3  # two pool sizes, three device counts
    # One compile of the step per row, in its warm-up call: a timed call that compiled again
    # (the warm-up's key placed otherwise than the timed keys) would make it two.
    compiles = out.stderr.count("Finished XLA compilation of jit(step)")
    assert compiles == len(rows), out.stderr[-4000:]


def test_train_step_benchmark_runs():
    stdout = _run_module("benchmarks.train_step", "--quick").stdout
    assert "| curriculum alone (sample + observe, inside generate) |" in stdout


def test_the_numpy_crossover_reads_interleaved_sizes_without_crashing():
    rows = [{"n": 500, "np_ms": 2.0, "cx_ms": 1.0}, {"n": 1000, "np_ms": 1.0, "cx_ms": 2.0}]
    assert "interleave" in curriculum_step._crossover(rows, "cx_ms")
    rows = [{"n": 500, "np_ms": 1.0, "cx_ms": 2.0}, {"n": 1000, "np_ms": 3.0, "cx_ms": 2.0}]
    assert curriculum_step._crossover(rows, "cx_ms") == "at N <= 500 (slower from N = 1,000)"


def test_the_sampler_cost_benchmark_times_every_sampler(capsys):
    from benchmarks import sampler_cost

    out = sampler_cost.main(["--quick", "--steps", "2", "--num", "32"])
    assert [r["n"] for r in out["rows"]] == list(sampler_cost.QUICK_SIZES)
    for row in out["rows"]:
        for name in sampler_cost.samplers(row["n"]):
            assert np.isfinite(row[name]) and row[name] > 0, (name, row)
    printed = capsys.readouterr().out
    assert printed.count("| 1,000 |") == 1 and "category_learnability, one 93%" in printed


def _driver_calls(num: int, group_size: int, n: int = 60):
    """``(driver, call, compiled)``: :func:`curriculum_step.driver_calls` on a fresh driver of
    ``n`` tasks, for one batch of ``num`` groups of ``group_size`` rollouts."""
    driver = cx.HostCurriculum(curriculum_step.build_curriculum(n), seed=0)
    rng = np.random.default_rng(0)
    ids = rng.choice(n, num, replace=False)
    rates = curriculum_step.solve_rates(n, 0)
    results = curriculum_step.group_results(rng, ids, rates, group_size)
    return driver, *curriculum_step.driver_calls(driver, results, num)


def test_the_driver_and_its_compiled_programs_draw_the_same_for_a_num_not_a_power_of_two():
    """Host overhead = driver - compiled programs: both must draw ``num`` per call (by default
    the driver would draw ``bucket(num)`` and keep the rest)."""
    num = 12
    driver, call, compiled = _driver_calls(num, group_size=4)
    for i in range(2):
        drawn, _ = call(i)
        assert len(drawn) == num and driver.num_kept == 0
        assert compiled(i)[0].shape == (num,)
    assert driver.trace_counts["sample"] == 1  # one program of size num, for both


def test_numpy_baseline_scores_a_group_of_equal_rewards_exactly_and_keeps_the_clock():
    """A group whose valid rewards are all equal scores exactly that reward in the library (a
    float32 mean of seven 0.2s is not 0.2, and would sit past the band bound 0.2); the numpy
    baseline does the same work: that range check, and the ``scored_at`` and clock updates."""
    n, k = 4, 7
    bands = (("hard", 0.2, 1.0), ("medium", 0.75, 1.0), ("easy", 1.0, 1.0))
    rewards = np.full((n, k), 0.2, np.float32)
    rewards[1, 6] = rewards[3, 6] = 1.0  # task 3: not all equal, the plain mean
    valid = np.ones((n, k), bool)
    valid[1, 6] = False  # task 1: its odd reward is invalid, so all its valid ones are equal
    valid[2] = False  # task 2: no valid rollout, not scored
    results = {
        "task_ids": np.array([0, 1, 2, 3], np.int32),
        "rewards": rewards,
        "valid": valid,
        "advantages": np.zeros((n, k, 1), np.float32),
        "token_mask": np.ones((n, k, 1), bool),
    }
    cur = cx.curriculum(
        cx.samplers.difficulty_pools(n, [cx.samplers.Band(*b) for b in bands]),
        gates={"zero_advantage": cx.gates.advantage_range(0.0, 0.0)},
    )
    observe = jax.jit(cur.observe)
    state = cur.init(jax.random.key(0))
    fast = _numpy_baseline.NumpyCurriculum(n, bands=bands)
    for _ in range(2):
        _, state = observe(state, curriculum_step.as_group_results(results))
        fast.observe(*(results[key] for key in curriculum_step.FIELDS))
    s = state.sampler
    assert float(s.scores[0]) == float(s.scores[1]) == np.float32(0.2)
    np.testing.assert_array_equal(np.asarray(s.scores), fast.scores)
    np.testing.assert_array_equal(np.asarray(s.scored), fast.scored)
    np.testing.assert_array_equal(np.asarray(s.scored_at), fast.scored_at)
    assert int(s.clock) == fast.clock == 2 * n


def test_the_driver_and_its_compiled_programs_run_one_observe_for_a_group_size_not_a_power_of_two():
    """The driver pads a group of 6 rollouts to 8 with a valid mask; the compiled reference
    must run that same observe program (one trace), not another one of its own."""
    driver, call, compiled = _driver_calls(8, group_size=6)
    for i in range(2):
        jax.block_until_ready(call(i))
        jax.block_until_ready(compiled(i))
    assert driver.trace_counts["observe"] == 1


@pytest.mark.parametrize(
    "module, argv",
    [
        ("scaling", ["--sizes", "2.7"]),  # timed N = 2
        ("scaling", ["--sizes", "0.4"]),  # failed deep in the library
        ("scaling", ["--device-pool", "1e3.5"]),
        ("scaling", ["--repeats", "0"]),  # StatisticsError: no median for empty data
        ("scaling", ["--devices", "0"]),
        ("train_step", ["--repeats", "0"]),
        ("curriculum_step", ["--sizes", "inf"]),  # an OverflowError traceback
        ("curriculum_step", ["--sizes", "nan"]),
        ("varying_n", ["--num-tasks", "0"]),
    ],
)
def test_a_bad_count_is_an_argparse_error_naming_the_flag(module, argv, capsys):
    main = importlib.import_module(f"benchmarks.{module}").main
    if module == "curriculum_step":
        main = curriculum_step.parse_args
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert f"argument {argv[0]}" in capsys.readouterr().err


def test_the_varying_n_benchmark_compiles_one_program_per_bucket():
    """benchmarks/varying_n.py was run by no test: it reads the driver's trace counts and its
    kept-draws sampling, which could drift as the driver changes."""
    (row,) = varying_n.main(["--num-tasks", "2000", "--steps", "34"])
    assert (row["sample_programs"], row["observe_programs"]) == (2, 2), row
    assert row["distinct_n"] > 2
