"""cx.samplers.difficulty_pools: warm-up, latest valid scores, bands, draws, fallback, errors."""

import collections
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import curriculax as cx
from curriculax.samplers import Band, DifficultyPoolsState
from curriculax.samplers.difficulty_pools import band_of
from curriculax.testing import group_results

# One sampler per role, built once; each (sampler, num) compiles once for the whole file.
#
# B: bands given out of order on purpose (they are sorted by max_reward), one zero-weight band
# (easy) and one band that the tests keep empty (vacant, the heaviest weight of all).
N = 20
B_BANDS = [
    Band("easy", 1.0, 0.0),
    Band("hard", 0.25, 1.0),
    Band("vacant", 0.75, 5.0),
    Band("medium", 0.5, 2.0),
]
B = cx.samplers.difficulty_pools(N, B_BANDS, unscored_weight=3.0)
B_WEIGHT = {"hard": 1.0, "medium": 2.0, "vacant": 5.0, "easy": 0.0, "unscored": 3.0}
B_SCORE = {"hard": 0.1, "medium": 0.4, "vacant": 0.6, "easy": 0.9}
b_sample = jax.jit(B.sample, static_argnums=2)
# num = 1 over many keys at once, with the state shared: one compile for every statistical test.
b_first_over_keys = jax.jit(
    jax.vmap(lambda state, key: B.sample(state, key, 1)[0][0], in_axes=(None, 0))
)

# C: no weight for unscored tasks, so a failed task is never drawable.
C = cx.samplers.difficulty_pools(4, unscored_weight=0.0)
c_sample = jax.jit(C.sample, static_argnums=2)

KEYS = jax.random.split(jax.random.key(2024), 12_000)


def _state(categories: dict[str, list[int]], n: int = N) -> DifficultyPoolsState:
    """A post-warm-up state of B: every task seen, scores by category (``unscored`` unscored).

    Tasks not listed are put in ``easy`` (zero weight).
    """
    cat = ["easy"] * n
    for name, ids in categories.items():
        for i in ids:
            cat[i] = name
    scored = np.array([c != "unscored" for c in cat])
    scores = np.array([B_SCORE.get(c, 0.0) for c in cat], np.float32)
    return DifficultyPoolsState(
        scores=jnp.asarray(scores),
        scored=jnp.asarray(scored),
        seen=jnp.ones((n,), bool),
        scored_at=jnp.zeros((n,), jnp.int32),
        fallback=jnp.int32(0),
        clock=jnp.int32(0),
    )


def _metrics(sampler, state):
    return {k: float(v) for k, v in sampler.metrics(state).items()}


def _binomial_ok(count, total, p, sigmas=5.0):
    """|count - total p| within ``sigmas`` binomial standard deviations."""
    std = math.sqrt(total * p * (1 - p))
    return abs(count - total * p) <= sigmas * std


def _chi2(counts):
    counts = np.asarray(counts, np.float64)
    expected = counts.sum() / len(counts)
    return float(((counts - expected) ** 2 / expected).sum())


def _chi2_limit(df):
    # Far in the tail of chi-square(df) (mean df, std sqrt(2 df)): p < 1e-4 for every df used
    # here, so a failure is a biased draw, not bad luck (the keys are fixed anyway).
    return df + 8 * math.sqrt(2 * df) + 4


# --------------------------------------------------------------------------------- defaults


def test_default_bands_and_unscored_weight_match_the_spec():
    expected = (Band("hard", 0.25, 0.2), Band("medium", 0.75, 1.0), Band("easy", 1.0, 0.2))
    assert tuple(cx.samplers.DEFAULT_BANDS) == expected
    s = cx.samplers.difficulty_pools(3)
    assert set(_metrics(s, s.init(jax.random.key(0)))) == {
        "pool/unseen",
        "pool/unscored",
        "pool/hard",
        "pool/medium",
        "pool/easy",
        "fallback",
        "warmup_remaining",
        "mean_score",
    }
    import inspect

    default = inspect.signature(cx.samplers.difficulty_pools).parameters["unscored_weight"].default
    assert default == 0.2


# ---------------------------------------------------------------------------------- warm-up


def test_warm_up_dispatches_every_task_once_before_any_twice():
    state = B.init(jax.random.key(0))
    stream = []
    for i in range(3):
        ids, state = b_sample(state, jax.random.key(i), 8)
        ids = ids.tolist()
        assert len(set(ids)) == 8, ids  # every call distinct: enough is drawable
        stream += ids
    assert sorted(stream[:N]) == list(range(N))
    assert _metrics(B, state)["warmup_remaining"] == 0.0
    assert _metrics(B, state)["pool/unseen"] == 0.0
    assert _metrics(B, state)["pool/unscored"] == N


@settings(max_examples=25, deadline=None)
@given(
    chunks=st.lists(st.sampled_from([1, 3, 8]), min_size=1, max_size=8),
    seed=st.integers(0, 2**16),
)
def test_warm_up_property_across_calls_of_varying_sizes(chunks, seed):
    state = B.init(jax.random.key(seed))
    stream = []
    for i, num in enumerate(chunks):
        ids, state = b_sample(state, jax.random.fold_in(jax.random.key(seed), i), num)
        ids = ids.tolist()
        assert len(ids) == num and all(0 <= t < N for t in ids)
        assert len(set(ids)) == num  # never fewer than num distinct tasks are available here
        stream += ids
        m = _metrics(B, state)
        assert m["warmup_remaining"] == max(0, N - len(stream))
        assert m["pool/unseen"] == N - len(set(stream))
        assert m["pool/unscored"] == len(set(stream))
    first = stream[:N]
    assert len(set(first)) == len(first)  # no task twice before every task once
    if len(stream) >= N:
        assert sorted(first) == list(range(N))


def _reorder(state: DifficultyPoolsState, perm) -> DifficultyPoolsState:
    """The state a restore onto a pool reordered by ``perm`` (new row i = old row perm[i])
    builds: every ``PER_TASK`` field permuted, the rest as saved."""
    return state._replace(
        **{f: getattr(state, f)[np.asarray(perm)] for f in DifficultyPoolsState.PER_TASK}
    )


@pytest.mark.parametrize(("num", "calls"), [(8, 1), (8, 2), (3, 1), (3, 5)])
def test_restore_mid_warm_up_onto_a_reordered_pool_draws_every_task(num, calls):
    # The reproduction is (8, 1): N = 20, 8 warm-up draws, the restore permutation,
    # then more calls. A warm-up counter into a fixed order lost tasks here, forever unseen.
    state = B.init(jax.random.key(0))
    before = []
    for i in range(calls):
        ids, state = b_sample(state, jax.random.key(i), num)
        before += ids.tolist()
    perm = np.random.default_rng(num * calls).permutation(N)
    state = _reorder(state, perm)
    inverse = np.argsort(perm)
    dispatched = set(inverse[before].tolist())  # the same tasks, at their new rows
    assert _metrics(B, state)["warmup_remaining"] == N - len(dispatched)

    stream = []
    for i in range(10):
        ids, state = b_sample(state, jax.random.key(100 + i), 8)
        stream += ids.tolist()
    # The rest of warm-up dispatches exactly the tasks not dispatched before, each once.
    rest = stream[: N - len(dispatched)]
    assert sorted(rest) == sorted(set(range(N)) - dispatched), (rest, dispatched)
    assert _metrics(B, state)["warmup_remaining"] == 0.0
    assert _metrics(B, state)["pool/unseen"] == 0.0


def test_a_task_observed_without_dispatch_is_not_owed_a_warm_up_dispatch():
    state = B.observe(B.init(jax.random.key(0)), group_results([3, 11], [[0.1], [0.4]]))
    stream = []
    for i in range(3):
        ids, state = b_sample(state, jax.random.key(i), 6)
        stream += ids.tolist()
    # Warm-up: the 18 other tasks once each, before any task twice.
    assert sorted(stream[:18]) == sorted(set(range(N)) - {3, 11})
    assert _metrics(B, state)["warmup_remaining"] == 0.0


def test_split_along_a_device_axis_mid_warm_up_draws_what_the_unsplit_sampler_draws():
    # An axis bound by vmap stands in for shard_map's: the same collectives, one process.
    d = 4
    split = cx.samplers.difficulty_pools(N, B_BANDS, unscored_weight=3.0, axis_name="data")

    def shards(state):
        return jax.tree.map(lambda x: x.reshape(d, -1) if x.ndim else jnp.stack([x] * d), state)

    def split_sample(state, key, num):
        return jax.vmap(lambda s: split.sample(s, key, num), axis_name="data")(state)

    split_sample = jax.jit(split_sample, static_argnums=2)
    state = B.observe(B.init(jax.random.key(0)), group_results([3, 11, 12], [[0.1], [0.4], [0.9]]))
    sharded = shards(state)
    for i in range(5):  # warm-up ends inside the third call; then banded draws
        ids, state = b_sample(state, jax.random.key(i), 7)
        split_ids, sharded = split_sample(sharded, jax.random.key(i), 7)
        assert split_ids.tolist() == [ids.tolist()] * d, i  # every device holds every id
        np.testing.assert_array_equal(np.asarray(sharded.seen).reshape(-1), state.seen)


def test_failed_groups_count_as_dispatched_and_cannot_hold_warm_up():
    state = C.init(jax.random.key(0))
    ids, state = c_sample(state, jax.random.key(1), 4)
    assert sorted(ids.tolist()) == [0, 1, 2, 3]
    # Tasks 0, 1, 2 fail (no valid rollout); task 3 scores 0.5 (medium).
    state = C.observe(
        state,
        group_results(
            [0, 1, 2, 3],
            [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [0.5, 0.5]],
            [[False, False], [False, False], [False, False], [True, True]],
        ),
    )
    m = _metrics(C, state)
    assert m["warmup_remaining"] == 0.0
    assert (m["pool/unscored"], m["pool/medium"], m["pool/unseen"]) == (3.0, 1.0, 0.0)
    # Warm-up is over: the failed tasks are unscored (weight 0 here) and never come back;
    # the only drawable task is repeated.
    for k in range(5):
        ids, _ = c_sample(state, jax.random.key(10 + k), 4)
        assert ids.tolist() == [3, 3, 3, 3]
    assert _metrics(C, state)["fallback"] == 0.0


def test_all_groups_failed_and_unscored_weight_zero_falls_back_to_uniform():
    state = C.init(jax.random.key(0))
    ids, state = c_sample(state, jax.random.key(1), 4)
    state = C.observe(state, group_results(ids, jnp.ones((4, 2)), jnp.zeros((4, 2), bool)))
    assert _metrics(C, state)["pool/unscored"] == 4.0
    ids, state = c_sample(state, jax.random.key(2), 4)
    assert sorted(ids.tolist()) == [0, 1, 2, 3]
    assert _metrics(C, state)["fallback"] == 1.0
    _, state = c_sample(state, jax.random.key(3), 4)
    assert _metrics(C, state)["fallback"] == 2.0


# ---------------------------------------------------------------------------------- scores


def test_score_is_the_mean_over_valid_rollouts():
    state = B.observe(
        B.init(jax.random.key(0)),
        group_results(
            [3, 7, 9],
            [[1.0, 0.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5], [0.2, 0.4, 0.6, 0.8]],
            [[True, True, False, True], [False] * 4, [True] * 4],
        ),
    )
    scores, scored, seen = (np.asarray(x) for x in (state.scores, state.scored, state.seen))
    assert scores[3] == pytest.approx(2 / 3)
    assert scores[9] == pytest.approx(0.5)
    assert scored.tolist() == [i in (3, 9) for i in range(N)]
    # A result counts as "seen" even when it scored nothing.
    assert seen.tolist() == [i in (3, 7, 9) for i in range(N)]
    m = _metrics(B, state)
    assert m["pool/unseen"] == N - 3
    assert m["pool/unscored"] == 1.0  # task 7
    assert (m["pool/vacant"], m["pool/medium"]) == (1.0, 1.0)  # 2/3 > 0.5; 0.5 <= 0.5

    # The latest valid group wins; a group with no valid rollout leaves the score unchanged.
    state = B.observe(
        state,
        group_results(
            [3, 9, 7],
            [[0.0, 0.0, 0.0, 0.0], [0.1, 0.1, 0.1, 0.1], [1.0, 1.0, 1.0, 1.0]],
            [[False] * 4, [True] * 4, [False] * 4],
        ),
    )
    scores, scored = np.asarray(state.scores), np.asarray(state.scored)
    assert scores[3] == pytest.approx(2 / 3)
    assert scores[9] == pytest.approx(0.1)
    assert not scored[7]


def test_nan_reward_in_an_invalid_rollout_does_not_reach_the_score():
    state = B.observe(
        B.init(jax.random.key(0)),
        group_results([2], [[np.nan, 0.25, np.inf, 0.75]], [[False, True, False, True]]),
    )
    assert float(state.scores[2]) == pytest.approx(0.5)
    assert np.all(np.isfinite(np.asarray(state.scores)))


def test_two_groups_of_one_task_in_a_batch_the_later_valid_one_wins():
    valid, failed = [True, True], [False, False]
    state = B.observe(
        B.init(jax.random.key(0)),
        group_results(
            [4, 5, 4, 6, 6, 8, 8, 8, 8, 5],
            [
                [0.0, 0.0],  # task 4, first
                [1.0, 1.0],  # task 5, first
                [1.0, 1.0],  # task 4, later: wins
                [0.3, 0.3],  # task 6, valid
                [0.9, 0.9],  # task 6, later but failed: the valid one stays
                [0.2, 0.2],  # task 8
                [0.9, 0.9],  # task 8, failed
                [0.8, 0.6],  # task 8, wins (latest valid)
                [0.0, 0.0],  # task 8, failed
                [0.0, 0.0],  # task 5, later: wins
            ],
            [valid, valid, valid, valid, failed, valid, failed, valid, failed, valid],
        ),
    )
    scores = np.asarray(state.scores)
    assert scores[4] == pytest.approx(1.0)
    assert scores[5] == pytest.approx(0.0)
    assert scores[6] == pytest.approx(0.3)
    assert scores[8] == pytest.approx(0.7)
    assert np.asarray(state.scored).tolist() == [i in (4, 5, 6, 8) for i in range(N)]


b_observe = jax.jit(B.observe)


@settings(max_examples=25, deadline=None)
@given(
    batches=st.lists(
        st.lists(
            st.tuples(
                st.integers(-1, N),  # task id; -1 and N lie outside the pool
                st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=3, max_size=3),
                st.lists(st.booleans(), min_size=3, max_size=3),
            ),
            min_size=8,
            max_size=8,
        ),
        min_size=1,
        max_size=3,
    )
)
def test_scores_match_a_reference_of_latest_valid_group_means(batches):
    state = B.init(jax.random.key(0))
    score, seen = {}, set()
    for batch in batches:
        ids = [t for t, _, _ in batch]
        state = b_observe(
            state, group_results(ids, [r for _, r, _ in batch], [v for _, _, v in batch])
        )
        for t, rewards, valid in batch:  # in order: the later group overwrites
            if 0 <= t < N:
                seen.add(t)
                if any(valid):
                    score[t] = np.mean([r for r, v in zip(rewards, valid) if v])
    scores, scored = np.asarray(state.scores), np.asarray(state.scored)
    assert scored.tolist() == [t in score for t in range(N)]
    assert np.asarray(state.seen).tolist() == [t in seen for t in range(N)]
    for t, want in score.items():
        assert scores[t] == pytest.approx(want, abs=1e-6), t
    # Observing makes a task seen: warm-up no longer owes it a dispatch.
    assert _metrics(B, state)["warmup_remaining"] == N - len(seen)


def test_out_of_pool_task_ids_are_ignored():
    state = B.observe(B.init(jax.random.key(0)), group_results([-1, N, 2], [[1.0], [1.0], [0.5]]))
    assert np.asarray(state.scored).tolist() == [i == 2 for i in range(N)]
    assert _metrics(B, state)["pool/unseen"] == N - 1


# ---------------------------------------------------------------------------------- bands

_F32 = np.float32


def _up(x):
    return float(np.nextafter(_F32(x), _F32(np.inf)))


def _down(x):
    return float(np.nextafter(_F32(x), _F32(-np.inf)))


def test_band_classification_at_the_exact_thresholds():
    s = cx.samplers.difficulty_pools(11)  # default bands: hard <= 0.25 < medium <= 0.75 < easy
    rewards = [0.25, _up(0.25), 0.75, _up(0.75), 1.0, _up(1.0), 7.0, -1.0, 0.0, 0.5, _down(0.25)]
    expected = [
        "hard",
        "medium",
        "medium",
        "easy",
        "easy",
        "easy",  # above every threshold: the last band
        "easy",
        "hard",  # below every threshold: the first band
        "hard",
        "medium",
        "hard",
    ]
    state = s.observe(
        s.init(jax.random.key(0)), group_results(list(range(11)), [[r] for r in rewards])
    )
    np.testing.assert_array_equal(np.asarray(state.scores), np.array(rewards, _F32))
    names = ["hard", "medium", "easy"]
    labels = band_of(state.scores, jnp.array([0.25, 0.75, 1.0], jnp.float32))
    assert [names[i] for i in np.asarray(labels)] == expected
    m = _metrics(s, state)
    counts = collections.Counter(expected)
    assert (m["pool/hard"], m["pool/medium"], m["pool/easy"]) == (
        counts["hard"],
        counts["medium"],
        counts["easy"],
    )
    assert (m["pool/unseen"], m["pool/unscored"]) == (0.0, 0.0)


def test_a_group_of_equal_rewards_scores_that_reward_exactly():
    # The float32 mean of eight 0.2s is 0.20000002, which put the task past a band bound of
    # 0.2 it meets ("all equal" is decided exactly, not by the mean).
    s = cx.samplers.difficulty_pools(2, [Band("low", 0.2, 1.0), Band("high", 1.0, 1.0)])
    rewards = [[0.2] * 8, [0.2, 0.2, 0.2, 0.7, 0.2, 0.2, 0.2, 0.2]]
    valid = [[True] * 8, [True, True, True, False, True, True, True, True]]
    state = s.observe(s.init(jax.random.key(0)), group_results([0, 1], rewards, valid=valid))
    np.testing.assert_array_equal(np.asarray(state.scores), np.float32([0.2, 0.2]))
    m = _metrics(s, state)
    assert (m["pool/low"], m["pool/high"]) == (2.0, 0.0)


def test_pool_metrics_count_exactly():
    state = B.init(jax.random.key(0))
    m = _metrics(B, state)
    assert m == {
        "pool/unseen": 20.0,
        "pool/unscored": 0.0,
        "pool/hard": 0.0,
        "pool/medium": 0.0,
        "pool/vacant": 0.0,
        "pool/easy": 0.0,
        "fallback": 0.0,
        "warmup_remaining": 20.0,
        "mean_score": 0.0,
    }
    ids, state = b_sample(state, jax.random.key(1), 3)
    ids = ids.tolist()
    # Score two of the dispatched tasks, fail the third; observe one undispatched task.
    other = next(t for t in range(N) if t not in ids)
    state = B.observe(
        state,
        group_results(
            [ids[0], ids[1], ids[2], other],
            [[0.25, 0.25], [0.9, 1.0], [1.0, 1.0], [0.5, 0.6]],
            [[True, True], [True, True], [False, False], [True, True]],
        ),
    )
    m = _metrics(B, state)
    assert m["pool/unseen"] == 16.0
    assert m["pool/unscored"] == 1.0
    assert (m["pool/hard"], m["pool/medium"], m["pool/vacant"], m["pool/easy"]) == (1, 0, 1, 1)
    assert m["warmup_remaining"] == 16.0  # the observed task is not owed a warm-up dispatch
    assert m["mean_score"] == pytest.approx((0.25 + 0.95 + 0.55) / 3)
    for v in B.metrics(state).values():
        assert v.dtype == jnp.float32 and v.shape == ()


def test_bands_given_as_a_mapping_equal_bands_given_as_values():
    as_map = cx.samplers.difficulty_pools(
        N,
        {
            "medium": {"max_reward": 0.5, "weight": 2.0},
            "hard": {"max_reward": 0.25, "weight": 1.0},
            "easy": {"max_reward": 1.0, "weight": 0.0},
            "vacant": Band("ignored-name", 0.75, 5.0),  # a Band value takes the mapping's name
        },
        unscored_weight=3.0,
    )
    results = group_results(list(range(10)), [[x / 9] for x in range(10)])
    a = as_map.observe(as_map.init(jax.random.key(0)), results)
    b = B.observe(B.init(jax.random.key(0)), results)
    assert _metrics(as_map, a) == _metrics(B, b)
    assert _metrics(as_map, a)["pool/vacant"] == 2.0  # 5/9 and 6/9
    # Same draws too (same bands, weights and seed).
    state = _state({"hard": [0, 1], "medium": [2, 3, 4], "unscored": [5, 6]})
    map_sample = jax.jit(as_map.sample, static_argnums=2)
    for k in range(3):
        key = jax.random.key(k)
        assert map_sample(state, key, 8)[0].tolist() == b_sample(state, key, 8)[0].tolist()


# ---------------------------------------------------------------------------------- draws


def test_band_probability_is_proportional_to_weight_among_non_empty_bands():
    cats = {"hard": [0, 1, 2], "medium": [3, 4, 5, 6, 7], "unscored": [16, 17, 18, 19]}
    state = _state(cats)  # tasks 8..15: easy (weight 0); vacant (weight 5): empty
    ids = np.asarray(b_first_over_keys(state, KEYS))
    total = len(ids)
    cat_of = {i: c for c, members in cats.items() for i in members}
    per_band = collections.Counter(cat_of.get(int(i), "easy") for i in ids)
    # Non-empty positive bands: hard 1, medium 2, unscored 3. The empty vacant band (weight 5)
    # must not take any probability mass, and easy (weight 0) is never drawn.
    live = {"hard": 1.0, "medium": 2.0, "unscored": 3.0}
    for band, w in live.items():
        p = w / sum(live.values())
        # Binomial(total, p): 5 standard deviations (~1.7% of 12000 draws at p = 1/2).
        assert _binomial_ok(per_band[band], total, p), (band, per_band, total * p)
    assert per_band["easy"] == 0
    assert per_band["vacant"] == 0

    # Uniform inside each band: chi-square over the band's members.
    per_task = collections.Counter(int(i) for i in ids)
    for band, members in cats.items():
        counts = [per_task[i] for i in members]
        assert _chi2(counts) < _chi2_limit(len(members) - 1), (band, counts)


def test_a_zero_weight_band_is_never_drawn_even_when_it_holds_most_tasks():
    state = _state({"medium": [19], "easy": list(range(19))})
    ids = np.asarray(b_first_over_keys(state, KEYS))
    assert set(ids.tolist()) == {19}


def test_distinct_tasks_when_enough_are_drawable():
    drawable = set(range(10))
    state = _state({"hard": [0, 1, 2], "medium": [3, 4, 5, 6, 7], "unscored": [8, 9]})
    union = set()
    for k in range(30):
        ids = b_sample(state, jax.random.key(k), 8)[0].tolist()
        assert len(set(ids)) == 8, ids
        assert set(ids) <= drawable, ids
        union |= set(ids)
    assert union == drawable
    # Exactly as many drawable as requested: the call returns each of them once.
    state = _state({"hard": [0, 1], "medium": [2, 3, 4, 5], "unscored": [6, 7]})
    for k in range(10):
        assert sorted(b_sample(state, jax.random.key(k), 8)[0].tolist()) == list(range(8))


@pytest.mark.parametrize(
    ("cats", "drawable"),
    [
        ({"hard": [4], "medium": [9, 13]}, [4, 9, 13]),
        ({"unscored": [11]}, [11]),
        ({"hard": [0, 1], "vacant": [2], "unscored": [3, 19]}, [0, 1, 2, 3, 19]),
    ],
)
def test_repeats_are_balanced_when_fewer_than_num_are_drawable(cats, drawable):
    state = _state(cats)
    num = 8
    low, high = num // len(drawable), -(-num // len(drawable))
    for k in range(10):
        ids, new = b_sample(state, jax.random.key(k), num)
        counts = collections.Counter(ids.tolist())
        assert sorted(counts) == drawable, counts
        assert all(low <= c <= high for c in counts.values()), counts
        assert sum(counts.values()) == num
        assert int(new.fallback) == 0


def test_nothing_drawable_falls_back_to_uniform_over_the_pool():
    # Every task is scored into the zero-weight band (easy); none is unscored (B gives
    # unscored tasks a positive weight, so one of them would be drawable).
    state = _state({})
    ids, new = b_sample(state, jax.random.key(0), 8)
    assert len(set(ids.tolist())) == 8 and all(0 <= t < N for t in ids.tolist())
    assert _metrics(B, new)["fallback"] == 1.0
    _, new = b_sample(new, jax.random.key(1), 8)
    assert _metrics(B, new)["fallback"] == 2.0
    # Uniform over the whole pool.
    first = np.asarray(b_first_over_keys(state, KEYS))
    counts = np.bincount(first, minlength=N)
    assert counts.min() > 0
    assert _chi2(counts) < _chi2_limit(N - 1), counts


def _band_name(score: float) -> str:
    # B's bands by threshold: hard <= 0.25 < medium <= 0.5 < vacant <= 0.75 < easy (catch-all).
    for name, top in (("hard", 0.25), ("medium", 0.5), ("vacant", 0.75)):
        if score <= _F32(top):
            return name
    return "easy"


SCORES = [-0.5, 0.0, 0.25, _up(0.25), 0.4, 0.5, _up(0.5), 0.6, 0.75, _up(0.75), 0.9, 1.0, 1.5]


@settings(max_examples=25, deadline=None)
@given(
    tasks=st.lists(st.tuples(st.booleans(), st.sampled_from(SCORES)), min_size=N, max_size=N),
    seed=st.integers(0, 2**31 - 1),
)
def test_draw_properties_hold_for_any_scores(tasks, seed):
    scored = np.array([s for s, _ in tasks])
    scores = np.array([x if s else 0.0 for s, x in tasks], _F32)
    state = DifficultyPoolsState(
        jnp.asarray(scores),
        jnp.asarray(scored),
        jnp.ones((N,), bool),
        jnp.zeros((N,), jnp.int32),
        jnp.int32(0),
        jnp.int32(0),
    )
    weight = [
        B_WEIGHT[_band_name(float(x))] if s else B_WEIGHT["unscored"]
        for s, x in zip(scored, scores)
    ]
    drawable = {i for i, w in enumerate(weight) if w > 0}
    num = 8
    ids, new = b_sample(state, jax.random.key(seed), num)
    assert ids.dtype == jnp.int32 and ids.shape == (num,)
    ids = ids.tolist()
    assert all(0 <= t < N for t in ids)
    if len(drawable) >= num:
        assert len(set(ids)) == num
    if drawable:
        assert set(ids) <= drawable  # never a zero-weight band's task
        assert int(new.fallback) == 0
        if len(drawable) < num:
            assert set(ids) == drawable
            counts = collections.Counter(ids).values()
            assert max(counts) - min(counts) <= 1
    else:
        assert int(new.fallback) == 1
        assert len(set(ids)) == num


# ---------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("bands", "kwargs", "error", "match"),
    [
        (
            [Band("hard", 0.25, -0.1), Band("easy", 1.0, 1.0)],
            {},
            ValueError,
            r"'hard'.*negative weight -0\.1",
        ),
        (
            [Band("a", 0.5, 1.0), Band("b", 0.5, 1.0)],
            {},
            ValueError,
            r"band thresholds \(max_reward\) must be unique, duplicated: \[0\.5\]",
        ),
        (
            [Band("a", 0.25, 1.0), Band("a", 0.75, 1.0)],
            {},
            ValueError,
            r"band names must be unique, duplicated: \['a'\]",
        ),
        (
            [Band("a", 0.25, 0.0), Band("b", 0.75, 0.0)],
            {"unscored_weight": 1.0},
            ValueError,
            r"no band has a positive weight",
        ),
        ([Band("unseen", 0.5, 1.0)], {}, ValueError, r"'unseen' is reserved"),
        ([Band("unscored", 0.5, 1.0)], {}, ValueError, r"'unscored' is reserved"),
        ([Band("fallback", 0.5, 1.0)], {}, ValueError, r"'fallback' is reserved"),
        ([Band("a/b", 0.5, 1.0)], {}, ValueError, r"without '/'.*'a/b'"),
        ([Band("", 0.5, 1.0)], {}, ValueError, r"non-empty"),
        ([Band("a", float("nan"), 1.0)], {}, ValueError, r"'a': max_reward must be finite"),
        ([Band("a", 0.5, float("inf"))], {}, ValueError, r"'a': weight must be finite"),
        ([Band("a", 0.5, "1")], {}, TypeError, r"'a': weight must be a number, got '1'"),
        ([], {}, ValueError, r"at least one band"),
        # drawn as float32: 1e39 was inf (every probability NaN), 1e-46 was 0 (band disabled)
        (
            [Band("a", 0.5, 1e39), Band("b", 1.0, 1.0)],
            {},
            ValueError,
            r"band 'a': weight = 1e\+39 is outside float32's range",
        ),
        ([Band("a", 0.5, 1e-46)], {}, ValueError, r"band 'a': weight = 1e-46 is outside float32"),
        (None, {"unscored_weight": 1e39}, ValueError, r"unscored_weight = 1e\+39 is outside"),
        (
            [Band("a", 0.5, 3e38), Band("b", 1.0, 3e38)],
            {},
            ValueError,
            r"the weights sum past float32's range",
        ),
        (
            None,
            {"unscored_weight": -1.0},
            ValueError,
            r"unscored_weight must be finite and >= 0, got -1\.0",
        ),
        (
            {"hard": {"max_reward": 0.5, "wieght": 1.0}},
            {},
            ValueError,
            r"'hard': unknown key\(s\) \['wieght'\]; accepted keys are \['max_reward', 'weight'\]",
        ),
        ({"hard": {"max_reward": 0.5}}, {}, ValueError, r"'hard': missing key\(s\) \['weight'\]"),
        ({"hard": 0.5}, {}, TypeError, r"band 'hard' must be a mapping"),
        ("hard", {}, TypeError, r"bands must be a sequence of Band or a mapping"),
    ],
)
def test_bad_bands_raise(bands, kwargs, error, match):
    with pytest.raises(error, match=match):
        cx.samplers.difficulty_pools(10, bands, **kwargs)


def test_numpy_numbers_are_numbers():
    """numpy band values, unscored_weight and score_half_life were refused ("must be a
    number"); they draw as the Python numbers of the same value."""
    as_numpy = [Band(b.name, np.float32(b.max_reward), np.int64(b.weight)) for b in B_BANDS]
    state = _state({"hard": [0, 1], "medium": [2, 3], "unscored": [4]})._replace(
        clock=jnp.int32(3 * N)
    )

    def first(sampler):
        return jax.jit(jax.vmap(lambda key: sampler.sample(state, key, 1)[0][0]))(KEYS[:500])

    ours = cx.samplers.difficulty_pools(
        N, as_numpy, unscored_weight=np.float32(3), score_half_life=np.float32(1.5)
    )
    theirs = cx.samplers.difficulty_pools(N, B_BANDS, unscored_weight=3.0, score_half_life=1.5)
    np.testing.assert_array_equal(first(ours), first(theirs))
    with pytest.raises(TypeError, match=r"unscored_weight must be a number, got np.True_"):
        cx.samplers.difficulty_pools(N, unscored_weight=np.bool_(True))
    with pytest.raises(TypeError, match=r"score_half_life must be a number or None, got '1'"):
        cx.samplers.difficulty_pools(N, score_half_life="1")


@pytest.mark.parametrize(
    "seed, error, match",
    [
        (2**32 + 2, ValueError, r"seed must be below 2\*\*32 .* seed 2\), got 4294967298"),
        (-1, ValueError, r"seed must be >= 0, got -1"),
        (2.5, TypeError, r"seed must be an int >= 0, got 2\.5"),
        (True, TypeError, r"seed must be an int >= 0, got the bool True"),
    ],
)
def test_a_seed_that_is_not_an_int_in_32_bits_is_refused(seed, error, match):
    """The warm-up's seed word keeps 32 bits: 2**32 + 2 and 2.5 once drew seed 2's choice."""
    with pytest.raises(error, match=match):
        cx.samplers.difficulty_pools(8, seed=seed)


def test_bad_num_tasks_and_num_raise():
    with pytest.raises(ValueError, match=r"num_tasks must be >= 1, got 0"):
        cx.samplers.difficulty_pools(0)
    with pytest.raises(TypeError, match=r"num_tasks must be an int >= 1, got None"):
        cx.samplers.difficulty_pools(None)
    state = B.init(jax.random.key(0))
    with pytest.raises(ValueError, match=r"num must be >= 0, got -2"):
        B.sample(state, jax.random.key(0), -2)
    with pytest.raises(TypeError, match=r"static_argnums"):
        jax.jit(B.sample)(state, jax.random.key(0), 4)


def test_sample_zero_is_a_no_op():
    state = B.init(jax.random.key(0))
    ids, new = B.sample(state, jax.random.key(0), 0)
    assert ids.shape == (0,) and ids.dtype == jnp.int32
    assert not bool(jnp.any(new.seen)) and int(new.fallback) == 0


# ---------------------------------------------------------------------------- score decay


def test_a_stale_score_counts_as_unscored_only_with_a_half_life():
    # Tasks 0-3 scored 0 (hard band, weight 0: never drawn while the score holds); tasks 4-7
    # scored 1 just now (easy, weight 1). Unscored tasks weigh 1.
    bands = [Band("hard", 0.25, 0.0), Band("easy", 1.0, 1.0)]
    n = 8

    def state_at(clock):
        return DifficultyPoolsState(
            scores=jnp.array([0.0] * 4 + [1.0] * 4),
            scored=jnp.ones((n,), bool),
            seen=jnp.ones((n,), bool),
            scored_at=jnp.array([0] * 4 + [clock] * 4, jnp.int32),
            fallback=jnp.int32(0),
            clock=jnp.int32(clock),
        )

    keys = jax.random.split(jax.random.key(5), 2000)
    for half_life, clock, low, high in (
        (None, 10 * n, 0.0, 0.0),  # the seed's semantics: scores never go stale
        (1.0, 0, 0.0, 0.0),  # fresh scores
        (1.0, 10 * n, 0.4, 0.6),  # ten passes later: hard tasks are unscored (weight 1 = easy)
    ):
        s = cx.samplers.difficulty_pools(n, bands, unscored_weight=1.0, score_half_life=half_life)
        first = jax.jit(jax.vmap(lambda k, s=s, c=clock: s.sample(state_at(c), k, 1)[0][0]))
        share = float(np.mean(np.asarray(first(keys)) < 4))
        assert low <= share <= high, (half_life, clock, share)
        if half_life is not None:
            stale = float(s.metrics(state_at(clock))["stale_scores"])
            assert stale == pytest.approx(4 * (1 - 2.0 ** (-clock / n)), abs=1e-4)


def test_observe_stamps_the_score_with_the_clock():
    s = cx.samplers.difficulty_pools(4, score_half_life=2.0)
    state = s.observe(s.init(jax.random.key(0)), group_results([1, 2], [[1.0, 0.0], [0.0, 0.0]]))
    state = s.observe(state, group_results([2], [[1.0, 1.0]]))
    assert state.clock == 3 and state.scored_at.tolist() == [0, 2, 3, 0]
    with pytest.raises(ValueError, match=r"score_half_life must be > 0 pool passes"):
        cx.samplers.difficulty_pools(4, score_half_life=0)
