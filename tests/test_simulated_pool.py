"""The simulated pool: the learnability sampler's defaults against difficulty pools.

Several seeds run as one compiled program per sampler. The margins leave room: with exactly
this set-up (2026-12-06, 4 seeds) learnability put 0.38-0.39 of its draws on informative
tasks against 0.20-0.22 for difficulty pools, 0.20-0.24 of its late draws on emerging tasks
against 0.11-0.18, and found half of the emerging tasks in a median of 54 steps against 71.

Then the edge cases of the summary and of ``experiments.simulated_pool``: a number that does
not exist is nan (printed "-"), not a made-up 0, and what the simulation cannot score or the
table cannot measure is refused.
"""

import doctest
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curriculax as cx
from curriculax import simulated_pool as sp
from experiments import simulated_pool as script

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

N, NUM, STEPS, SWITCH = 1024, 16, 320, 120


@pytest.fixture(scope="module")
def outcomes():
    pool = sp.make_pool(N, switch_step=SWITCH, seed=3)
    keys = jax.random.split(jax.random.key(7), 4)
    out = {}
    for name, sampler in {
        "learnability": cx.samplers.learnability(N),
        "difficulty_pools": cx.samplers.difficulty_pools(N),
    }.items():
        out[name] = sp.summarize(pool, sp.run(sampler, pool, steps=STEPS, num=NUM, keys=keys))
    return out


def test_learnability_concentrates_on_informative_tasks(outcomes):
    lb, dp = outcomes["learnability"], outcomes["difficulty_pools"]
    assert np.mean(lb["informative_share"]) > 1.4 * np.mean(dp["informative_share"])
    # every seed, not just on average
    assert np.min(lb["informative_share"]) > np.max(dp["informative_share"])


def test_learnability_finds_and_follows_up_newly_learnable_tasks(outcomes):
    lb, dp = outcomes["learnability"], outcomes["difficulty_pools"]
    assert np.median(lb["steps_to_find_half"]) < np.median(dp["steps_to_find_half"])
    assert np.all(np.isfinite(lb["steps_to_find_half"]))
    assert np.mean(lb["emerging_share_late"]) > 1.3 * np.mean(dp["emerging_share_late"])


def test_the_pool_has_the_requested_composition():
    pool = sp.make_pool(1000, trivial=0.2, informative=0.1, emerging=0.05, switch_step=5)
    counts = np.bincount(np.asarray(pool.kind), minlength=4)
    assert counts.tolist() == [650, 200, 100, 50]
    before, after = np.asarray(pool.before), np.asarray(pool.after)
    kind = np.asarray(pool.kind)
    assert np.all(before[kind == sp.EMERGING] == 0)
    assert np.all((after[kind == sp.EMERGING] >= 0.2) & (after[kind == sp.EMERGING] <= 0.8))
    assert np.array_equal(before[kind != sp.EMERGING], after[kind != sp.EMERGING])
    with pytest.raises(ValueError, match="add up to more than 1"):
        sp.make_pool(10, trivial=0.9, informative=0.2)


def test_noisy_pools_hold_coin_flips_and_tasks_learned_by_training():
    pool = sp.make_pool(
        1000,
        trivial=0.2,
        informative=0.0,
        emerging=0.0,
        coin_flip=0.3,
        learning=0.1,
        learn_draws=10,
        coin_p=0.4,
    )
    kind = np.asarray(pool.kind)
    assert np.bincount(kind, minlength=6).tolist() == [400, 200, 0, 0, 300, 100]
    assert np.all(np.asarray(pool.before)[kind == sp.COIN_FLIP] == np.float32(0.4))
    start = np.asarray(pool.before)[kind == sp.LEARNING]
    assert np.all((start >= 0.1) & (start <= 0.3))
    # pools without the new kinds are the ones they were
    old = sp.make_pool(1000, switch_step=5, seed=2)
    assert np.all(np.asarray(old.gain) == 0)
    # a learning task's rate rises with its own draws only: a sampler that always draws
    # task ids 0..15 learns those of them that are learning tasks (8 and 12) and no other
    fixed = cx.TaskSampler(
        lambda key: jnp.zeros((), jnp.int32),
        lambda state, key, num: (jnp.arange(num, dtype=jnp.int32), state),
        lambda state, results: state,
        lambda state: {},
    )
    trace = sp.run(fixed, pool, steps=20, num=16, keys=jax.random.split(jax.random.key(0), 1))
    m = sp.summarize(pool, trace)
    learning_ids = np.flatnonzero(kind == sp.LEARNING)
    assert m["learned_share"][0] == pytest.approx(np.mean(learning_ids < 16))
    assert m["coin_flip_share"][0] == pytest.approx(np.mean(kind[:16] == sp.COIN_FLIP))
    assert 0 < m["learned_share"][0] < 0.05


@pytest.mark.parametrize("n, shares", [(6, [0.25] * 4), (3, [0.5, 0.5])])
def test_shares_that_round_up_past_the_pool_still_make_one(n, shares):
    """Each share rounded on its own (0.25 of 6 is 2) once overfilled the pool and crashed."""
    names = ["trivial", "informative", "emerging", "coin_flip"][: len(shares)]
    given = {"trivial": 0.0, "informative": 0.0, "emerging": 0.0, **dict(zip(names, shares))}
    kinds = np.asarray(sp.make_pool(n, **given).kind)
    assert kinds.shape == (n,)
    for name, share in zip(names, shares):
        assert abs(int((kinds == getattr(sp, name.upper())).sum()) - n * share) <= 1


def test_shares_adding_up_to_one_in_decimal_are_accepted():
    """0.05 + 0.55 + 0.3 + 0.1 is 1.0000000000000002 in floats: the shares were refused as
    adding up to more than 1."""
    pool = sp.make_pool(100, trivial=0.05, informative=0.55, emerging=0.3, coin_flip=0.1)
    assert np.bincount(np.asarray(pool.kind), minlength=6).tolist() == [0, 5, 55, 30, 10, 0]
    with pytest.raises(ValueError, match=r"add up to more than 1: 1\.01"):
        sp.make_pool(100, trivial=0.05, informative=0.56, emerging=0.3, coin_flip=0.1)


@pytest.mark.parametrize(
    "n, shares, counts",
    [
        (10, [0.25] * 4, [3, 3, 2, 2]),
        (20, [0.5, 0.025, 0.475], [10, 1, 9]),
        (6, [0.25] * 4, [2, 2, 1, 1]),
        (7, [0.0, 0.5, 0.5], [0, 4, 3]),
    ],
)
def test_shares_adding_up_to_one_leave_no_impossible_task(n, shares, counts):
    """Rounding each share on its own left tasks nobody asked for impossible (four shares of
    0.25 of 10 tasks: 2 each and 2 impossible); the counts are now largest remainders."""
    names = ["trivial", "informative", "emerging", "coin_flip"][: len(shares)]
    given = {"trivial": 0.0, "informative": 0.0, "emerging": 0.0, **dict(zip(names, shares))}
    got = np.bincount(np.asarray(sp.make_pool(n, **given).kind), minlength=6)
    assert got[sp.IMPOSSIBLE] == 0
    assert got[[getattr(sp, name.upper()) for name in names]].tolist() == counts


def _fixed(ids):
    """A sampler that draws ``ids(num)`` every step (plain ids or a TaskDraw)."""
    return cx.TaskSampler(
        lambda key: jnp.zeros((), jnp.int32),
        lambda state, key, num: (ids(num), state),
        lambda state, results: state,
        lambda state: {},
    )


def _keys(n=1):
    return jax.random.split(jax.random.key(0), n)


def test_the_module_example_runs():
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner()
    (test,) = [t for t in finder.find(sp, "sp", globs={}) if t.name == "sp"]
    assert test.examples
    assert runner.run(test).failed == 0


def test_a_number_that_does_not_exist_is_nan_not_zero():
    # no emerging tasks: no steps to find half of them (was 0, as if found at the switch)
    pool = sp.make_pool(64, emerging=0.0, switch_step=2)
    m = sp.summarize(pool, sp.run(cx.samplers.uniform(64), pool, steps=6, num=4, keys=_keys(2)))
    assert np.all(np.isnan(m["steps_to_find_half"]))
    assert np.all(np.isfinite(m["informative_share_before"]))
    # a switch at step 0 leaves no draws before it (was 0)
    pool = sp.make_pool(64, switch_step=0)
    m = sp.summarize(pool, sp.run(cx.samplers.uniform(64), pool, steps=6, num=4, keys=_keys(2)))
    assert np.all(np.isnan(m["informative_share_before"]))
    assert np.all(np.isfinite(m["informative_share"]))


def test_the_late_share_of_a_run_under_four_steps_is_its_last_step():
    """steps // 4 is 0 below 4 steps: the last quarter was empty and its share nan."""
    pool = sp.make_pool(16, trivial=0.0, informative=0.0, emerging=0.5, switch_step=0)
    kind = np.asarray(pool.kind)
    emerging, other = np.flatnonzero(kind == sp.EMERGING), np.flatnonzero(kind != sp.EMERGING)
    ids = jnp.asarray([emerging[0], emerging[1], other[0], other[1]], jnp.int32)
    sampler = _fixed(lambda num: ids)  # half the draws on emerging tasks, every step
    for steps in (1, 3):
        m = sp.summarize(pool, sp.run(sampler, pool, steps=steps, num=4, keys=_keys()))
        assert m["emerging_share_late"][0] == pytest.approx(0.5), steps


@pytest.mark.parametrize(
    "draw",
    [
        # a payload row (the frontier sampler's generated tasks) was scored as pool task N-1
        lambda num: cx.TaskDraw(
            jnp.full((num,), 100, jnp.int32),
            jnp.zeros((num,), bool),
            None,
            jnp.zeros((num,), jnp.uint32),
        ),
        # from_pool False with an id inside the pool is still not that pool task
        lambda num: cx.TaskDraw(
            jnp.arange(num, dtype=jnp.int32),
            jnp.arange(num) != 1,
            None,
            jnp.zeros((num,), jnp.uint32),
        ),
        lambda num: jnp.arange(num, dtype=jnp.int32) + 5,  # plain ids past the pool
        lambda num: jnp.full((num,), -1, jnp.int32),
    ],
    ids=["payload ids", "payload row in range", "ids past N", "negative ids"],
)
def test_a_draw_the_pool_does_not_hold_is_refused(draw):
    pool = sp.make_pool(8)
    with pytest.raises(ValueError, match=r"drew \d+ task\(s\) the simulated pool does not hold"):
        sp.run(_fixed(draw), pool, steps=3, num=4, keys=_keys(2))


def test_a_task_draw_of_pool_rows_runs_as_its_ids():
    pool = sp.make_pool(8)
    draw = _fixed(
        lambda num: cx.TaskDraw(
            jnp.arange(num, dtype=jnp.int32),
            jnp.ones((num,), bool),
            None,
            jnp.zeros((num,), jnp.uint32),
        )
    )
    trace = sp.run(draw, pool, steps=3, num=4, keys=_keys())
    plain = sp.run(
        _fixed(lambda num: jnp.arange(num, dtype=jnp.int32)), pool, steps=3, num=4, keys=_keys()
    )
    assert np.array_equal(np.asarray(trace.task_draws), np.asarray(plain.task_draws))
    assert np.asarray(trace.task_draws)[0].tolist() == [3, 3, 3, 3, 0, 0, 0, 0]


def _never(*_, **__):
    raise AssertionError("the script started its work despite a bad flag")


@pytest.mark.parametrize("switch", ["10", "-5", "150"])
def test_the_script_refuses_switch_beside_noisy(monkeypatch, switch):
    """--switch was accepted and ignored with --noisy, invalid values included."""
    monkeypatch.setattr(script, "noisy", _never)
    with pytest.raises(ValueError, match=r"^--switch is not used with --noisy"):
        script.main(["--noisy", "0.3", "--switch", switch, "--quick"])


def test_the_script_refuses_a_pool_without_emerging_tasks(monkeypatch):
    monkeypatch.setattr(script, "arms", _never)
    with pytest.raises(ValueError, match=r"^--tasks 10 makes a pool without informative or "):
        script.main(["--tasks", "10", "--steps", "4", "--switch", "1", "--seeds", "1"])
    # the smallest pool the message suggests has both
    kinds = np.asarray(sp.make_pool(script.MIN_TASKS).kind)
    assert np.any(kinds == sp.INFORMATIVE) and np.any(kinds == sp.EMERGING)
    kinds = np.asarray(sp.make_pool(script.MIN_TASKS - 1).kind)
    assert not np.any(kinds == sp.INFORMATIVE) and not np.any(kinds == sp.EMERGING)


def test_the_command_ends_a_pool_too_small_in_one_error_line(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "experiments.simulated_pool", "--tasks", "10", "--quick"],
        cwd=tmp_path,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": ROOT},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr and out.stdout == "", (out.stdout, out.stderr)
    first = out.stderr.splitlines()[0]
    assert re.match(r"^error: --tasks 10 makes a pool without informative or emerging", first)


def _row(text: str, name: str) -> list[str]:
    (line,) = [x for x in text.splitlines() if x.startswith(f"| {name} |")]
    return [c.strip() for c in line.strip("|").split("|")]


def test_the_table_prints_what_the_runs_say(monkeypatch, capsys):
    """A run that never found half needs at least steps - switch steps: more than
    steps - switch - 1 (it printed "> steps - switch"); no draws before a switch at step 0
    print "-" (they printed 0.000); a 3-step run has a late share (it printed nan)."""
    monkeypatch.setattr(script, "arms", lambda n: {"uniform": cx.samplers.uniform(n)})
    script.main(["--tasks", "512", "--num", "1", "--steps", "3", "--switch", "0", "--seeds", "2"])
    cells = _row(capsys.readouterr().out, "uniform")
    assert cells[2] == "-", cells
    assert cells[3] == "> 2 [> 2, > 2]", cells
    assert re.fullmatch(r"\d\.\d{3} ± \d\.\d{3}", cells[4]), cells


def test_the_noisy_table_without_coin_flips_prints_no_coin_flip_flags(capsys):
    script.main(["--noisy", "0", "--tasks", "64", "--num", "4", "--steps", "5", "--seeds", "1"])
    cells = _row(capsys.readouterr().out, "learning_progress")
    assert cells[5] == "-", cells  # was nan: the mean over no coin flips
    assert re.fullmatch(r"\d\.\d{3}", cells[6]), cells


def test_quick_beside_noisy_sizes_a_pool_whose_learning_tasks_get_visits():
    """At --quick's 512 tasks the noisy pool's learning tasks got about 2 draws each in the
    run, and every sampler learned none of them."""
    assert script._parse(["--noisy", "0.5", "--quick"]).tasks == script.QUICK_NOISY["tasks"]
    assert script._parse(["--quick"]).tasks == script.QUICK["tasks"]
    assert script._parse(["--noisy", "0.5", "--quick", "--tasks", "300"]).tasks == 300


@pytest.mark.parametrize(
    "argv",
    [
        ["--tasks", "20", "--num", "1", "--steps", "3", "--switch", "1", "--seeds", "1"],
        ["--noisy", "0.3", "--tasks", "64", "--num", "4", "--steps", "3", "--seeds", "1"],
    ],
)
def test_the_header_counts_the_pools_tasks_by_kind(monkeypatch, capsys, argv):
    # The shares are rounded to whole tasks: the header counts what the pool holds (it printed
    # the nominal shares: "10% learning" for 6 of 64 tasks).
    monkeypatch.setattr(script, "arms", lambda n: {"uniform": cx.samplers.uniform(n)})
    script.main(argv)
    header = capsys.readouterr().out.splitlines()[1]
    n = int(re.search(r"N=(\d+)", header).group(1))
    counts = [int(c) for c in re.findall(r"(\d+) [a-z ]+ \(\d+%\)", header)]
    assert counts and sum(counts) == n, header


def test_a_sampler_of_another_pool_size_is_refused():
    """A sampler built for fewer tasks ran and never drew the rest of the pool."""
    pool = sp.make_pool(20)
    for n in (10, 30):
        with pytest.raises(ValueError, match=rf"built for {n} tasks, the simulated pool has 20"):
            sp.run(cx.samplers.uniform(n), pool, steps=2, num=4, keys=_keys())


@pytest.mark.parametrize("keys", [jax.random.key(0), jax.random.PRNGKey(0)], ids=["typed", "raw"])
def test_one_key_is_refused_naming_keys(keys):
    with pytest.raises(ValueError, match=r"^keys must hold one key per seed"):
        sp.run(cx.samplers.uniform(8), sp.make_pool(8), steps=2, num=4, keys=keys)
    # a raw key array with a seeds axis runs
    sp.run(
        cx.samplers.uniform(8),
        sp.make_pool(8),
        steps=2,
        num=4,
        keys=jax.random.split(jax.random.PRNGKey(0), 2),
    )


def test_make_pool_names_its_bad_arguments():
    """np.float32(0.3) was refused as out of range; seed=-1 and coin_p="0.5" failed unnamed;
    seed=None drew another pool each call."""
    assert np.asarray(sp.make_pool(10, trivial=np.float32(0.3)).kind).size == 10
    with pytest.raises(ValueError, match=r"^seed must be >= 0, got -1"):
        sp.make_pool(10, seed=-1)
    with pytest.raises(TypeError, match=r"^seed must be an int"):
        sp.make_pool(10, seed=None)
    with pytest.raises(TypeError, match=r"^coin_p must be a number"):
        sp.make_pool(10, coin_p="0.5")
    with pytest.raises(TypeError, match=r"^trivial must be a number"):
        sp.make_pool(10, trivial="0.5")


def test_numbers_of_kinds_the_pool_lacks_are_nan():
    """learned_share and learning_rate were 0 without learning tasks (a measured-looking 0);
    coin_flip_rate 0 without coin flips."""
    pool = sp.make_pool(16, trivial=0.5, informative=0.5, emerging=0.0)
    m = sp.summarize(pool, sp.run(cx.samplers.uniform(16), pool, steps=3, num=4, keys=_keys(2)))
    for name in ("learned_share", "learning_rate", "coin_flip_rate"):
        assert np.all(np.isnan(m[name])), name
    assert np.all(m["coin_flip_share"] == 0.0)
    pool = sp.make_pool(
        16, trivial=0.0, informative=0.0, emerging=0.0, coin_flip=0.5, learning=0.5, learn_draws=2
    )
    m = sp.summarize(pool, sp.run(cx.samplers.uniform(16), pool, steps=3, num=4, keys=_keys(2)))
    for name in ("learned_share", "learning_rate", "coin_flip_rate"):
        assert np.all(np.isfinite(m[name])), name


def test_the_noisy_table_of_a_pool_without_learning_tasks_prints_dashes(capsys):
    script.main(["--noisy", "0.5", "--tasks", "2", "--num", "2", "--steps", "5", "--seeds", "1"])
    out = capsys.readouterr().out
    assert "learning" not in out.splitlines()[1], out  # the header counts no learning task
    cells = _row(out, "uniform")
    assert cells[2] == "-" and cells[4] == "-", cells  # were 0.000 ± 0.000


@pytest.mark.parametrize(
    "argv, default", [(["--steps", "100"], 150), (["--quick", "--steps", "30"], 40)]
)
def test_a_default_switch_past_the_steps_is_called_the_default(monkeypatch, argv, default):
    """--steps alone was refused as "--switch must lie in [0, --steps 100), got 150", a flag
    the user never gave."""
    monkeypatch.setattr(script, "arms", _never)
    with pytest.raises(ValueError, match=rf"got {default}, its default.*give a --switch below"):
        script.main(argv)
    with pytest.raises(ValueError, match=r"got 150 \(the step"):  # given: no such words
        script.main(["--steps", "100", "--switch", "150"])
