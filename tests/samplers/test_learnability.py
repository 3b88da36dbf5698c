"""cx.samplers.learnability: warm-up, forgetting, the uniform floor, scoring, config, errors."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curriculax as cx
from curriculax.samplers import LearnabilityState
from curriculax.testing import group_results


def _state(n, successes, failures, clock=0):
    """A post-warm-up state with the given evidence (written at ``clock``)."""
    return LearnabilityState(
        successes=jnp.asarray(successes, jnp.float32),
        failures=jnp.asarray(failures, jnp.float32),
        updated=jnp.full((n,), clock, jnp.int32),
        seen=jnp.ones((n,), bool),
        clock=jnp.int32(clock),
    )


def _first_draws(sampler, state, draws, num=1, seed=0):
    """``i32[draws, num]``: one call per key from the same state (one compile)."""
    keys = jax.random.split(jax.random.key(seed), draws)
    return np.asarray(jax.jit(jax.vmap(lambda k: sampler.sample(state, k, num)[0]))(keys))


def _within(count, total, p, sigmas=5.0):
    return abs(count - total * p) <= sigmas * math.sqrt(total * p * (1 - p)) + 1


# ---------------------------------------------------------------------------------- warm-up


def test_unseen_tasks_come_first_and_calls_are_distinct():
    n = 20
    s = cx.samplers.learnability(n)
    sample = jax.jit(s.sample, static_argnums=2)
    state = s.init(jax.random.key(0))
    stream = []
    for i in range(3):
        ids, state = sample(state, jax.random.key(i), 8)
        assert len(set(ids.tolist())) == 8
        stream += ids.tolist()
    assert sorted(stream[:n]) == list(range(n))
    m = {k: float(v) for k, v in s.metrics(state).items()}
    assert m["pool/unseen"] == 0


def test_unseen_tasks_outrank_known_good_ones_only_with_unseen_first():
    # Tasks 0-7 are known to pass half the time; tasks 8-19 were never seen.
    n = 20
    known = np.arange(n) < 8
    state = _state(n, np.where(known, 500.0, 0.0), np.where(known, 500.0, 0.0))
    state = state._replace(seen=jnp.asarray(known))
    first = cx.samplers.learnability(n, uniform_share=0.0)
    ids = _first_draws(first, state, 200, num=8)
    assert np.all(ids >= 8)
    scored = cx.samplers.learnability(n, uniform_share=0.0, unseen_first=False)
    ids = _first_draws(scored, state, 200, num=8)
    assert np.mean(ids < 8) > 0.75  # a prior draw rarely beats a task known to sit at 0.5


# ------------------------------------------------------------------------------- forgetting


def test_evidence_halves_every_half_life_of_observed_groups():
    n = 4
    s = cx.samplers.learnability(n, half_life=2.0)  # 2 passes = 8 groups
    state = s.observe(s.init(jax.random.key(0)), group_results([0], [[0.0] * 8]))
    assert float(state.failures[0]) == 8.0 and int(state.clock) == 1
    # 8 more groups on task 1: task 0's failures now count half when it is next observed.
    for _ in range(8):
        state = s.observe(state, group_results([1], [[1.0, 0.0]]))
    state = s.observe(state, group_results([0], [[1.0, 1.0]]))
    assert float(state.failures[0]) == pytest.approx(4.0)
    assert float(state.successes[0]) == pytest.approx(2.0)


def test_a_task_observed_in_every_batch_forgets_only_between_visits():
    """The documented (and measured) decay: a visit ages a task's older evidence by the groups
    since its last visit, not by its own batch, so four groups of successes per batch on a
    pool of four keep adding up; a task absent from a batch loses half (one pass)."""
    s = cx.samplers.learnability(4, half_life=1.0, draw="mean")
    state = s.init(jax.random.key(0))
    got = []
    for _ in range(4):
        state = s.observe(state, group_results([0, 1, 2, 3], [[1.0] * 4] * 4))
        got.append(float(state.successes[0]))
    assert got == pytest.approx([4.0, 8.0, 12.0, 16.0])
    state = s.observe(state, group_results([1, 2, 3, 1], [[1.0] * 4] * 4))
    state = s.observe(state, group_results([0], [[1.0] * 4]))
    assert float(state.successes[0]) == pytest.approx(16.0 / 2 + 4.0)


def test_forgetting_reopens_the_uncertainty_of_a_failed_task():
    # Task 1 passed 10 of 20 rollouts just now; task 0 failed 16 of 16 at clock 0.
    s = cx.samplers.learnability(2, half_life=1.0, unseen_first=False, uniform_share=0.0)

    def at(clock, failures0):
        return _state(2, [0.0, 10.0], [failures0, 10.0], clock)._replace(
            updated=jnp.array([0, clock], jnp.int32)
        )

    def share_of_task_0(state):
        return np.mean(_first_draws(s, state, 4000) == 0)

    fresh, never = share_of_task_0(at(0, 16.0)), share_of_task_0(at(0, 0.0))
    assert fresh < 0.02 and never > 0.1, (fresh, never)
    assert {k: float(v) for k, v in s.metrics(at(0, 16.0)).items()}["pool/unsolved"] == 1
    # Five passes later (10 observed groups on this pool of 2) task 0 was not refreshed: its
    # failures count 1/32 and it is drawn about as often as a task never seen.
    stale = share_of_task_0(at(10, 16.0))
    assert abs(stale - never) < 0.05, (stale, never)
    m = {k: float(v) for k, v in s.metrics(at(10, 16.0)).items()}
    assert m["pool/unsolved"] == 0 and m["pool/learnable"] == 2


def test_without_forgetting_a_failed_task_stays_closed():
    s = cx.samplers.learnability(2, half_life=None, unseen_first=False, uniform_share=0.0)
    stale = _state(2, [0.0, 8000.0], [16.0, 8000.0])._replace(clock=jnp.int32(10_000))
    assert np.mean(_first_draws(s, stale, 4000) == 0) < 0.01


# ---------------------------------------------------------------------------- uniform floor


@pytest.mark.parametrize("num", [1, 8])
def test_the_uniform_floor_is_respected(num):
    # 8 informative tasks and 56 hopeless ones, no forgetting: without a floor the sampler
    # never leaves the informative ones; with a floor of 25% a quarter of the draws are
    # uniform over the pool (so land on a hopeless task with probability 56/64).
    n, good = 64, 8
    succ = np.where(np.arange(n) < good, 500.0, 0.0)
    fail = np.where(np.arange(n) < good, 500.0, 1000.0)
    state = _state(n, succ, fail)
    draws = 3000
    for share in (0.0, 0.25):
        s = cx.samplers.learnability(n, half_life=None, uniform_share=share)
        ids = _first_draws(s, state, draws, num)
        hopeless = int(np.sum(ids >= good))
        if share == 0.0:
            assert hopeless == 0
        else:
            assert _within(hopeless, ids.size, share * (n - good) / n), hopeless / ids.size


# ------------------------------------------------------------------------------- scoring


def test_the_posterior_mean_draw_picks_the_task_nearest_the_target():
    n = 4
    # posterior means 0.1, 0.3, 0.5, 0.9 (prior 1, 1 plus evidence)
    succ = np.array([9, 29, 49, 89], np.float32)
    fail = np.array([89, 69, 49, 9], np.float32)
    state = _state(n, succ, fail)
    for target, best in ((0.5, 2), (0.3, 1), (0.9, 3), (0.15, 0)):
        s = cx.samplers.learnability(n, draw="mean", target=target, uniform_share=0.0)
        assert set(_first_draws(s, state, 50).ravel().tolist()) == {best}, target


def test_thompson_draws_follow_the_posterior_uncertainty():
    # Task 0 is sharply at 0.5, task 1 sharply at 0.2: Thompson picks task 0 nearly always.
    # Task 2 has little evidence around 0.2: it wins sometimes, unlike its sharp twin.
    n = 3
    state = _state(n, [500, 200, 1], [500, 800, 4])
    s = cx.samplers.learnability(n, uniform_share=0.0, half_life=None)
    ids = _first_draws(s, state, 4000).ravel()
    counts = np.bincount(ids, minlength=3)
    assert counts[1] == 0
    assert 0.01 < counts[2] / ids.size < 0.5
    assert counts[0] > counts[2]


def test_fractional_rewards_and_a_success_threshold():
    rewards = [[0.3, 0.3, 1.5, -1.0]]
    frac = cx.samplers.learnability(2)
    st = frac.observe(frac.init(jax.random.key(0)), group_results([1], rewards))
    assert float(st.successes[1]) == pytest.approx(1.6)  # 0.3 + 0.3 + 1 + 0 (clipped)
    assert float(st.failures[1]) == pytest.approx(2.4)
    thr = cx.samplers.learnability(2, success_threshold=0.5)
    st = thr.observe(thr.init(jax.random.key(0)), group_results([1], rewards))
    assert float(st.successes[1]) == 1.0 and float(st.failures[1]) == 3.0


def test_only_valid_rollouts_and_in_pool_ids_count_and_duplicates_add_up():
    s = cx.samplers.learnability(3)
    st = s.observe(
        s.init(jax.random.key(0)),
        group_results(
            [0, 0, 7, -1], [[1, 1], [1, 0], [1, 1], [1, 1]], [[1, 0], [1, 1], [1, 1], [1, 1]]
        ),
    )
    assert st.successes.tolist() == [2.0, 0.0, 0.0]
    assert st.failures.tolist() == [1.0, 0.0, 0.0]
    assert int(st.clock) == 2  # the two in-pool groups


def test_a_pool_smaller_than_num_cycles_through_the_best():
    s = cx.samplers.learnability(3, unseen_first=False, uniform_share=0.0)
    ids, _ = jax.jit(s.sample, static_argnums=2)(
        _state(3, [5, 5, 5], [5, 5, 5]), jax.random.key(0), 7
    )
    assert sorted(np.bincount(np.asarray(ids), minlength=3).tolist()) == [2, 2, 3]


# ------------------------------------------------------------------------- config, errors


def test_it_is_registered_and_its_defaults_build_from_a_config():
    cur = cx.curriculum_from_config({"sampler": {"type": "learnability"}}, 10)
    ids, state = jax.jit(cur.sample, static_argnums=2)(
        cur.init(jax.random.key(0)), jax.random.key(1), 10
    )
    assert sorted(ids.tolist()) == list(range(10))
    assert set(jax.jit(cur.metrics)(state)) >= {
        "sampler/pool/unseen",
        "sampler/pool/unsolved",
        "sampler/pool/learnable",
        "sampler/pool/solved",
        "sampler/mean_pass_rate",
        "sampler/clock",
    }
    toml = cx.sampler_from_config(
        {"type": "learnability", "half_life": math.inf, "prior": [0.5, 0.5], "draw": "mean"}, 10
    )
    assert isinstance(toml, cx.TaskSampler)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"target": 1.0}, ValueError, r"target must lie strictly between 0 and 1, got 1.0"),
        ({"draw": "ucb"}, ValueError, r"draw must be one of \['thompson', 'mean'\], got 'ucb'"),
        ({"half_life": 0}, ValueError, r"half_life must be > 0 pool passes"),
        ({"prior": [1.0]}, TypeError, r"prior must be a pair"),
        ({"prior": [0.0, 1.0]}, ValueError, r"prior pseudo-counts must be finite and > 0"),
        ({"uniform_share": 1.5}, ValueError, r"uniform_share must lie in \[0, 1\], got 1.5"),
        ({"unseen_first": 1}, TypeError, r"unseen_first must be a bool"),
        ({"success_threshold": "0.5"}, TypeError, r"success_threshold must be a number"),
        # NaN once made every rollout a failure (the run of success_threshold = inf).
        ({"success_threshold": math.nan}, ValueError, r"success_threshold must be finite .* nan"),
        ({"success_threshold": math.inf}, ValueError, r"success_threshold must be finite .* inf"),
    ],
)
def test_bad_arguments_name_the_argument_and_value(kwargs, error, match):
    with pytest.raises(error, match=match):
        cx.samplers.learnability(10, **kwargs)


def test_numpy_numbers_are_numbers():
    """A prior as a numpy array, a numpy float32 share and a numpy int count were refused
    ("prior must be a pair", "must be a number", "noise_visits must be an int")."""
    s = cx.samplers.learnability(
        10, prior=np.array([0.5, 2.0]), uniform_share=np.float32(0.25), target=np.float64(0.4)
    )
    assert isinstance(s, cx.TaskSampler)
    lp = cx.samplers.learning_progress(10, noise_visits=np.int64(3), patience=np.float32(4))
    assert isinstance(lp, cx.TaskSampler)
    with pytest.raises(TypeError, match=r"uniform_share must be a number, got np.True_"):
        cx.samplers.learnability(10, uniform_share=np.bool_(True))
    with pytest.raises(TypeError, match="prior must be a pair"):
        cx.samplers.learnability(10, prior=np.ones((2, 1)))


# ------------------------------------------------------------------------ repeated entries


def test_repeated_entries_share_one_posterior_and_calls_draw_distinct_tasks():
    # 12 entries holding 4 tasks (entry i holds task i % 4), as a study pool repeats a small
    # level's tasks to give the level its share.
    n, entry_task = 12, np.arange(12) % 4
    s = cx.samplers.learnability(n, entry_task=entry_task, uniform_share=0.0)
    sample = jax.jit(s.sample, static_argnums=2)
    state = s.init(jax.random.key(0))
    # The warm-up visits each distinct task once: 4 draws, then nothing is unseen.
    ids, state = sample(state, jax.random.key(1), 4)
    assert sorted(entry_task[np.asarray(ids)].tolist()) == [0, 1, 2, 3]
    assert float(s.metrics(state)["pool/unseen"]) == 0
    # Results of two copies of task 1 (entries 5 and 9) land on one posterior, at entry 1.
    state = s.observe(state, group_results([5, 9], [[1, 1, 0, 0], [1, 0, 0, 0]]))
    assert state.successes.tolist()[1] == 3.0 and state.failures.tolist()[1] == 5.0
    assert float(jnp.sum(state.successes)) == 3.0  # nothing written at the copies
    # Scored draws are distinct tasks: a call of 4 returns each task once (no copy twice).
    for k in range(5):
        ids, _ = sample(state, jax.random.key(10 + k), 4)
        assert sorted(entry_task[np.asarray(ids)].tolist()) == [0, 1, 2, 3]


def test_repeated_entries_pool_evidence_a_per_entry_sampler_splits():
    # Task 0 has 20 copies; 20 groups with 1 hit in 8 each, one per copy: with entry_task the
    # task has 160 rollouts of evidence, per entry each copy has 8.
    n, entry_task = 24, np.where(np.arange(24) < 20, 0, np.arange(24))
    results = group_results(list(range(20)), [[1, 0, 0, 0, 0, 0, 0, 0]] * 20)
    shared = cx.samplers.learnability(n, entry_task=entry_task, half_life=None)
    apart = cx.samplers.learnability(n, half_life=None)
    st = shared.observe(shared.init(jax.random.key(0)), results)
    sa = apart.observe(apart.init(jax.random.key(0)), results)
    assert float(st.successes[0] + st.failures[0]) == 160.0
    assert float(jnp.max(sa.successes + sa.failures)) == 8.0


def test_entry_task_must_give_one_integer_per_entry():
    with pytest.raises(
        ValueError,
        match=r"entry_task must be an integer array .*\(shape \(10,\)\), got .* shape \(9,\)",
    ):
        cx.samplers.learnability(10, entry_task=np.arange(9))
    cur = cx.curriculum_from_config(
        {"sampler": {"type": "learnability"}}, 6, entry_task=np.array([0, 0, 1, 1, 2, 2])
    )
    ids, _ = jax.jit(cur.sample, static_argnums=2)(
        cur.init(jax.random.key(0)), jax.random.key(1), 3
    )
    assert sorted((np.asarray(ids) // 2).tolist()) == [0, 1, 2]


@pytest.mark.parametrize(
    "kwargs", [{"unseen_first": False}, {"half_life": None, "observe": True}], ids=str
)
def test_the_posterior_mean_draws_tied_tasks_from_the_whole_pool(kwargs):
    # every task ties (fresh, or observed alike): the draws must not gather at low ids
    n, k = 16_384, 16
    kwargs = dict(kwargs)
    observe = kwargs.pop("observe", False)
    s = cx.samplers.learnability(n, draw="mean", uniform_share=0.0, **kwargs)
    state = s.init(jax.random.key(1))
    if observe:
        rewards = jnp.tile((jnp.arange(8) < 4).astype(jnp.float32), (n, 1))
        state = jax.jit(s.observe)(state, group_results(jnp.arange(n), rewards))
    sample = jax.jit(s.sample, static_argnums=2)
    keys = jax.random.split(jax.random.key(2), 200)
    got = np.concatenate([np.asarray(sample(state, key, k)[0]) for key in keys])
    assert 0.09 < np.mean(got < n // 8) < 0.16
