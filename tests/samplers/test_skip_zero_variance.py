"""cx.samplers.skip_zero_variance: skips predicted zero-variance draws, never forever."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curriculax as cx
from curriculax import simulated_pool as sp
from curriculax.testing import group_results

N = 16


def _pool(rates):
    rates = jnp.asarray(rates, jnp.float32)
    kind = jnp.where(rates == 0, sp.IMPOSSIBLE, jnp.where(rates == 1, sp.TRIVIAL, sp.INFORMATIVE))
    return sp.SimulatedPool(rates, rates, kind.astype(jnp.int32), jnp.int32(0))


def _late_share(trace, kind, late=slice(300, 600)):
    """The share of the draws of steps ``late`` that went to tasks of ``kind``."""
    draws = np.asarray(trace.draws)[:, late]
    return draws[:, :, kind].sum() / draws.sum()


def test_skipping_steers_zero_variance_rollouts_to_the_target_and_never_starves_a_task():
    # Half the tasks never pass (every group zero-variance); the others pass half the time.
    # Uniform sampling spends half its groups on the hopeless tasks. Measured (2026-12-01, 4
    # seeds): with a target of 25% the late share was 0.24-0.25; with 5%, p falls to 0 and
    # only the 5% floor lets them through (0.026-0.032), yet each hopeless task was still
    # rolled out 6-9 times.
    pool = _pool([0.0] * 8 + [0.5] * 8)
    keys = jax.random.split(jax.random.key(0), 2)

    def hopeless_share(trace):
        return _late_share(trace, sp.IMPOSSIBLE)

    assert hopeless_share(sp.run(cx.samplers.uniform(N), pool, steps=600, num=4, keys=keys)) > 0.4
    for target, low, high in ((0.25, 0.18, 0.32), (0.05, 0.0, 0.08)):
        skip = cx.samplers.skip_zero_variance(
            N, cx.samplers.uniform(N), floor=0.05, target_share=target
        )
        trace = sp.run(skip, pool, steps=600, num=4, keys=keys)
        assert low <= hopeless_share(trace) <= high, (target, hopeless_share(trace))
        assert np.asarray(trace.task_draws)[:, :8].min() >= 3


def test_p_falls_while_zero_variance_groups_dominate_and_rises_when_they_do_not():
    s = cx.samplers.skip_zero_variance(N, cx.samplers.uniform(N), p_step=0.4)
    observe = jax.jit(s.observe)
    state = s.init(jax.random.key(0))
    flat = group_results(jnp.arange(4), jnp.zeros((4, 8)))
    state = observe(state, flat)  # share 1: p moves by 0.4 * (0.25 - 1)
    assert float(state.p) == pytest.approx(0.2) and float(state.zero_variance_share) == 1.0
    state = observe(state, flat)
    assert float(state.p) == 0.0
    mixed = group_results(jnp.arange(4), jnp.tile(jnp.array([0.0, 1.0]), (4, 4)))
    state = observe(state, mixed)  # share 0: p moves by 0.4 * 0.25
    assert float(state.p) == pytest.approx(0.1)
    for _ in range(10):
        state = observe(state, mixed)
    assert float(state.p) == 1.0


def test_streaks_count_consecutive_zero_variance_groups_and_reset():
    s = cx.samplers.skip_zero_variance(N, cx.samplers.uniform(N))
    observe = jax.jit(s.observe)
    state = s.init(jax.random.key(0))
    state = observe(state, group_results([3, 3, 5], [[1, 1], [1, 1], [0, 0]]))
    assert state.streak[3] == 2 and state.streak[5] == 1
    state = observe(state, group_results([3, 5], [[1, 0], [0, 0]]))
    assert state.streak[3] == 0 and state.streak[5] == 2
    assert int(state.group_size) == 2


def test_skipped_rollouts_count_the_valid_rollouts_of_a_group_not_its_padding():
    """The host driver pads groups of 5 rollouts to 8 with invalid ones (and the engine pads
    to its largest env's group): ``skipped_rollouts`` once counted 8 per skipped draw."""
    s = cx.samplers.skip_zero_variance(N, cx.samplers.uniform(N))
    state = s.init(jax.random.key(0))
    valid = [[True] * 5 + [False] * 3, [True] * 4 + [False] * 4]
    state = jax.jit(s.observe)(state, group_results([3, 5], [[1.0] * 8, [0.0] * 8], valid))
    assert int(state.group_size) == 5
    state = state._replace(skipped=jnp.int32(3))
    assert float(s.metrics(state)["skipped_rollouts"]) == 15.0
    # A batch without a valid rollout keeps the size it had.
    state = jax.jit(s.observe)(state, group_results([3], [[1.0] * 8], [[False] * 8]))
    assert int(state.group_size) == 5


def test_a_skipped_draw_is_replaced_by_a_task_not_predicted_zero_variance():
    s = cx.samplers.skip_zero_variance(N, cx.samplers.sequential(N, shuffle=False), floor=1e-6)
    state = s.init(jax.random.key(0))
    state = state._replace(streak=state.streak.at[:4].set(50), p=jnp.float32(0.0))
    ids, state = jax.jit(s.sample, static_argnums=2)(state, jax.random.key(1), 8)
    ids = ids.tolist()
    assert ids[4:] == [4, 5, 6, 7] and len(set(ids)) == 8
    assert all(i >= 8 for i in ids[:4])  # the 4 skipped ones went to fresh tasks
    m = {k: float(v) for k, v in s.metrics(state).items()}
    assert m["skipped"] == 4 and m["predicted_zero_variance"] == 4


def test_config_and_errors():
    cur = cx.curriculum_from_config(
        {"sampler": {"type": "skip_zero_variance", "inner": {"type": "uniform"}, "floor": 0.05}},
        N,
    )
    assert "sampler/skipped_rollouts" in jax.jit(cur.metrics)(cur.init(jax.random.key(0)))
    with pytest.raises(ValueError, match=r"floor must lie in \(0, 1\], got 0"):
        cx.samplers.skip_zero_variance(N, cx.samplers.uniform(N), floor=0)
    with pytest.raises(ValueError, match=r"target_share must lie in \[0, 1\]"):
        cx.samplers.skip_zero_variance(N, cx.samplers.uniform(N), target_share=2)


def test_solved_mode_counts_only_solved_groups_and_copies_share_a_streak():
    # entries 0-3 hold task A (first entry 0), 4 holds B, 5 holds C
    entry_task = np.array([0, 0, 0, 0, 4, 5, *range(6, N)])
    s = cx.samplers.skip_zero_variance(
        N, cx.samplers.uniform(N), skip="solved", entry_task=entry_task
    )
    np.testing.assert_array_equal(s.entry_task, entry_task)
    observe = jax.jit(s.observe)
    state = s.init(jax.random.key(0))
    # A solved under two copies, B failed on every rollout (zero variance, not solved)
    state = observe(state, group_results([1, 3, 4], [[1, 1], [1, 1], [0, 0]]))
    assert state.streak.tolist()[:6] == [2, 0, 0, 0, 0, 0]
    state = observe(state, group_results([2, 5], [[1, 0], [1, 1]]))  # A failed once: reset
    assert state.streak.tolist()[:6] == [0, 0, 0, 0, 0, 1]
    # GRESO's default counts B's all-zero groups as well, per entry without entry_task
    greso = cx.samplers.skip_zero_variance(N, cx.samplers.uniform(N))
    g = greso.observe(
        greso.init(jax.random.key(0)), group_results([1, 3, 4], [[1, 1]] * 2 + [[0, 0]])
    )
    assert g.streak.tolist()[:6] == [0, 1, 0, 1, 1, 0]


def test_a_solved_task_is_skipped_under_every_copy_and_the_copies_weight_stays_elsewhere():
    # 8 entries are copies of task 0, 8 are distinct tasks; task 0 is solved
    entry_task = np.array([0] * 8 + [*range(8, N)])
    s = cx.samplers.skip_zero_variance(
        N, cx.samplers.uniform(N), skip="solved", floor=1e-6, entry_task=entry_task
    )
    state = s.init(jax.random.key(0))
    state = state._replace(streak=state.streak.at[0].set(20), p=jnp.float32(0.0))
    sample = jax.jit(s.sample, static_argnums=2)
    drawn = np.concatenate([np.asarray(sample(state, jax.random.key(k), 4)[0]) for k in range(200)])
    assert np.isin(drawn, np.arange(8)).sum() == 0  # no copy of the solved task
    assert set(drawn.tolist()) == set(range(8, N))


def test_skip_mode_errors_name_the_argument():
    with pytest.raises(ValueError, match="skip must be 'zero_variance' or 'solved', got 'both'"):
        cx.samplers.skip_zero_variance(N, cx.samplers.uniform(N), skip="both")
    with pytest.raises(TypeError, match="solved_reward must be a number"):
        cx.samplers.skip_zero_variance(N, cx.samplers.uniform(N), solved_reward="1")


def test_forgetting_replay_counts_retests_of_solved_tasks_and_steers_toward_their_failures():
    s = cx.samplers.skip_zero_variance(
        N, cx.samplers.uniform(N), skip="solved", target_share=0.5, replay="forgetting"
    )
    observe = jax.jit(s.observe)
    state = s.init(jax.random.key(0))
    # No evidence yet: one forgotten re-test in one, so the target starts at the cap.
    assert float(s.metrics(state)["target_share"]) == 0.5
    assert float(s.metrics(state)["forgotten_share"]) == 1.0
    state = observe(state, group_results([0, 1, 2], [[1, 1], [1, 1], [0, 1]]))
    # Nothing had a streak before this batch: no re-test, the counts only decay.
    assert float(state.retests) == pytest.approx(0.95)
    assert float(state.forgotten) == pytest.approx(0.95)
    # Tasks 0 and 1 are re-tested: 0 solved again, 1 not (forgotten); 2 had no streak.
    state = observe(state, group_results([0, 1, 2], [[1, 1], [1, 0], [1, 1]]))
    assert float(state.retests) == pytest.approx(0.95**2 + 2)
    assert float(state.forgotten) == pytest.approx(0.95**2 + 1)
    m = s.metrics(state)
    share = (0.95**2 + 1) / (0.95**2 + 2)
    assert float(m["forgotten_share"]) == pytest.approx(share)
    assert float(m["target_share"]) == pytest.approx(0.5 * share)
    # Re-tests that stay solved pull the target toward 0; ones that fail, back to the cap.
    for _ in range(100):
        state = observe(state, group_results([0, 1], [[1, 1], [1, 1]]))
    assert float(s.metrics(state)["target_share"]) < 0.01
    for _ in range(100):  # per two batches: 3 re-tests (task 0 twice, task 1 once), 1 failed
        state = observe(state, group_results([0, 1], [[1, 1], [1, 1]]))
        state = observe(state, group_results([0, 1], [[1, 1], [0, 1]]))
    assert float(s.metrics(state)["forgotten_share"]) == pytest.approx(1 / 3, abs=0.02)
    assert float(s.metrics(state)["target_share"]) == pytest.approx(0.5 / 3, abs=0.01)
    # "fixed" keeps the target where it is told, whatever the re-tests say.
    fixed = cx.samplers.skip_zero_variance(N, cx.samplers.uniform(N), skip="solved")
    state = fixed.observe(fixed.init(jax.random.key(0)), group_results([0], [[1, 1]]))
    state = fixed.observe(state, group_results([0], [[1, 1]]))
    assert float(fixed.metrics(state)["target_share"]) == 0.25
    assert float(fixed.metrics(state)["forgotten_share"]) < 1.0


def test_forgotten_misses_counts_a_retest_forgotten_only_at_that_many_misses():
    def forgotten_after(misses_needed, retest_rewards):
        s = cx.samplers.skip_zero_variance(
            N,
            cx.samplers.uniform(N),
            skip="solved",
            target_share=0.5,
            replay="forgetting",
            forgotten_misses=misses_needed,
        )
        state = s.observe(s.init(jax.random.key(0)), group_results([0], [[1, 1, 1, 1]]))
        state = s.observe(state, group_results([0], [retest_rewards]))
        assert int(state.streak[0]) == (2 if min(retest_rewards) >= 1 else 0)
        return float(state.forgotten) - 0.95**2  # the re-test's own count, 0 or 1

    assert forgotten_after(1, [1, 1, 1, 0]) == pytest.approx(1.0)
    # one miss breaks the streak but, at two misses needed, is not forgetting
    assert forgotten_after(2, [1, 1, 1, 0]) == pytest.approx(0.0, abs=1e-6)
    assert forgotten_after(2, [1, 0, 1, 0]) == pytest.approx(1.0)
    assert forgotten_after(2, [1, 1, 1, 1]) == pytest.approx(0.0, abs=1e-6)


def test_forgotten_misses_errors_name_the_argument():
    uni = cx.samplers.uniform(N)
    with pytest.raises(TypeError, match=r"forgotten_misses must be an integer, got 1\.5"):
        cx.samplers.skip_zero_variance(N, uni, forgotten_misses=1.5)
    with pytest.raises(ValueError, match="forgotten_misses must be at least 1, got 0"):
        cx.samplers.skip_zero_variance(N, uni, forgotten_misses=0)
    with pytest.raises(ValueError, match="forgotten_misses above 1 needs skip='solved'"):
        cx.samplers.skip_zero_variance(N, uni, skip="solved", forgotten_misses=2)


def test_forgetting_replay_leaves_solved_tasks_that_stay_solved_and_replays_forgotten_ones():
    # Half the tasks are solved (pass rate 1), half at 0.5; a frozen pool: nothing is forgotten,
    # so the target falls and the solved tasks are skipped but for the floor. Measured
    # (2026-12-04, 2 seeds): late solved share 0.023-0.029 against 0.247-0.248 with "fixed" 0.25.
    pool = _pool([1.0] * 8 + [0.5] * 8)
    keys = jax.random.split(jax.random.key(0), 2)

    def run(**kwargs):
        s = cx.samplers.skip_zero_variance(
            N, cx.samplers.uniform(N), skip="solved", floor=0.05, **kwargs
        )
        return _late_share(sp.run(s, pool, steps=600, num=4, keys=keys), sp.TRIVIAL)

    fixed = run(target_share=0.25)
    following = run(target_share=0.25, replay="forgetting")
    assert 0.18 <= fixed <= 0.32, fixed
    assert following < 0.1, following


def test_replay_errors_name_the_argument():
    with pytest.raises(ValueError, match="replay must be 'fixed' or 'forgetting', got 'always'"):
        cx.samplers.skip_zero_variance(N, cx.samplers.uniform(N), replay="always")


def test_inner_replacements_come_from_the_inner_samplers_draws():
    # Learnability scores tasks 0-7 of 16 (pass rate 0.5) and barely draws 8-15 (never
    # passed); tasks 0-3 are solved and skipped. Uniform replacements land on 8-15 as often as
    # on 4-7; the inner's land where learnability draws: on 4-7 but for its own exploration
    # (about 2% of its draws go to 8-15, so about 4% of draws outside 0-3; measured 5%).
    inner = cx.samplers.learnability(N)
    rates = jnp.where(jnp.arange(N) < 8, 0.5, 0.0)  # learnability's p(1-p): 0 beyond task 7

    def draws(replace):
        s = cx.samplers.skip_zero_variance(
            N, inner, skip="solved", floor=1e-6, initial_p=0.0, replace=replace
        )
        state = s.init(jax.random.key(0))
        state = state._replace(
            inner=inner.observe(
                state.inner,
                group_results(
                    jnp.arange(N),
                    (jax.random.uniform(jax.random.key(2), (N, 64)) < rates[:, None]).astype(
                        jnp.float32
                    ),
                ),
            ),
            streak=state.streak.at[:4].set(50),
            p=jnp.float32(0.0),
        )
        sample = jax.jit(s.sample, static_argnums=2)
        out = []
        for i in range(50):
            ids, state = sample(state, jax.random.key(10 + i), 2)
            out.append(np.asarray(ids))
        m = {k: float(v) for k, v in s.metrics(state).items()}
        return np.concatenate(out), m

    uniform_ids, _ = draws("uniform")
    inner_ids, m = draws("inner")
    assert (uniform_ids >= 8).mean() > 0.2
    assert (inner_ids >= 4).all() and (inner_ids >= 8).mean() < 0.1, np.bincount(inner_ids)
    assert m["skipped"] > 0
    for ids in inner_ids.reshape(50, 2):
        assert len(set(ids.tolist())) == 2  # no task twice in one call


def test_replace_errors_name_the_argument():
    with pytest.raises(ValueError, match="replace must be 'uniform' or 'inner', got 'best'"):
        cx.samplers.skip_zero_variance(N, cx.samplers.uniform(N), replace="best")


def test_without_its_own_entry_task_copies_share_the_inner_samplers_streak_layout():
    """Entries 0 and 1 hold one task; only the inner sampler was given ``entry_task``. Before,
    the skip kept ``streak`` per entry while advertising the inner sampler's ``entry_task``
    (its state declares ``AT_FIRST_ENTRY``), so a restore onto a pool with the copies swapped
    moved the streaks by first entries: entry 1's streak stayed at row 1, now the key of the
    other copy, and the task's new first entry read none. Now it adopts the inner sampler's
    map: copies share one streak at the first entry, and a restore keeps it with its task."""
    from curriculax.engine._restore import _per_task_fields, first_entries_follow

    et = np.array([0, 0, 1, 2])
    s = cx.samplers.skip_zero_variance(4, cx.samplers.learnability(4, entry_task=et))
    np.testing.assert_array_equal(s.entry_task, [0, 0, 2, 3])
    state = s.observe(s.init(jax.random.key(0)), group_results([1], [[1.0, 1.0]]))
    assert np.asarray(state.streak).tolist() == [1, 0, 0, 0]  # at the task's first entry
    # What the engine's restore does onto a pool whose entries 0 and 1 swapped keys.
    perm = np.array([1, 0, 2, 3])  # each new entry's saved row
    [(_, at_first)] = [f for f in _per_task_fields(state, "s") if f[0] == "s/streak"]
    rows = first_entries_follow(perm, s.entry_task) if at_first else perm
    restored = np.asarray(state.streak)[rows]
    assert restored.tolist() == [1, 0, 0, 0]  # the task's streak at its new first entry
    # The copies still share it: a draw of either copy is skipped alike.
    state = state._replace(streak=jnp.asarray(restored), p=jnp.float32(0.0))
    ids = np.concatenate([np.asarray(s.sample(state, jax.random.key(k), 1)[0]) for k in range(40)])
    assert np.isin(ids, [0, 1]).mean() < 0.1  # floor 0.01: each draw of a copy kept 1%


def test_its_own_entry_task_must_group_entries_as_the_inner_samplers_does():
    """Both given: the same grouping under other labels is fine; another is refused. A pool
    without copies (or an inner sampler without a map) is unchanged: each entry its own."""
    inner = cx.samplers.learnability(4, entry_task=[0, 0, 1, 2])
    s = cx.samplers.skip_zero_variance(4, inner, entry_task=[9, 9, 3, 5])
    np.testing.assert_array_equal(s.entry_task, [0, 0, 2, 3])
    with pytest.raises(ValueError, match="skip_zero_variance: entry_task groups"):
        cx.samplers.skip_zero_variance(4, inner, entry_task=[0, 1, 2, 3])
    for inner in (cx.samplers.uniform(4), cx.samplers.learnability(4, entry_task=[0, 1, 2, 3])):
        plain = cx.samplers.skip_zero_variance(4, inner)
        assert plain.entry_task is inner.entry_task
        g = plain.observe(plain.init(jax.random.key(0)), group_results([1], [[1.0, 1.0]]))
        assert np.asarray(g.streak).tolist() == [0, 1, 0, 0]


def test_numpy_numbers_are_numbers():
    """A numpy solved_reward was refused ("solved_reward must be a number"); it counts solved
    groups as the Python number of the same value."""
    results = group_results([1, 2, 3], [[1, 1], [0.5, 0.5], [0, 0]])
    streaks = []
    for solved_reward in (np.float32(0.5), 0.5):
        s = cx.samplers.skip_zero_variance(
            N, cx.samplers.uniform(N), skip="solved", solved_reward=solved_reward
        )
        streaks.append(s.observe(s.init(jax.random.key(0)), results).streak.tolist())
    assert streaks[0] == streaks[1] and streaks[0][:4] == [0, 1, 1, 0]
    with pytest.raises(TypeError, match=r"skip_zero_variance: solved_reward must be a number"):
        cx.samplers.skip_zero_variance(N, cx.samplers.uniform(N), solved_reward=np.bool_(True))
