"""cx.curriculum: composition order, AND of gates, failed groups, non-finite values, metrics."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curriculax as cx

NAN, INF = float("nan"), float("inf")


# --------------------------------------------------------------- recording components


class RecordingState(NamedTuple):
    groups: jax.Array  # i32[] groups observed
    rollouts: jax.Array  # i32[] valid rollouts observed
    reward_sum: jax.Array  # f32[] sum of valid rewards observed
    adv_sum: jax.Array  # f32[] sum of trainable advantages observed


def recording_sampler(calls=None):
    """A sampler whose state counts what it observed (and, eagerly, logs when it was called)."""

    def init(key):
        del key
        z = jnp.zeros((), jnp.int32)
        return RecordingState(z, z, jnp.zeros((), jnp.float32), jnp.zeros((), jnp.float32))

    def sample(state, key, num):
        del key
        return jnp.arange(num, dtype=jnp.int32), state

    def observe(state, results):
        if calls is not None:
            calls.append("sampler")
        trainable = results.token_mask & results.valid[:, :, None]
        return RecordingState(
            state.groups + results.task_ids.shape[0],
            state.rollouts + jnp.sum(results.valid, dtype=jnp.int32),
            state.reward_sum + jnp.sum(jnp.where(results.valid, results.rewards, 0.0)),
            state.adv_sum + jnp.sum(jnp.where(trainable, results.advantages, 0.0)),
        )

    def metrics(state):
        return {
            "groups": state.groups.astype(jnp.float32),
            "rollouts": state.rollouts.astype(jnp.float32),
        }

    return cx.TaskSampler(init, sample, observe, metrics)


def vote_gate(vote_fn, name, calls=None):
    """A gate voting ``vote_fn(results)``; its state counts the groups it was asked about."""

    def init(key):
        del key
        return jnp.zeros((), jnp.int32)

    def admit(state, results):
        if calls is not None:
            calls.append(name)
        return vote_fn(results), state + results.task_ids.shape[0]

    def metrics(state):
        return {"seen": state.astype(jnp.float32)}

    return cx.AdmissionGate(init, admit, metrics)


def reject_all(results):
    return jnp.zeros(results.task_ids.shape, bool)


def admit_all(results):
    return jnp.ones(results.task_ids.shape, bool)


def _results(task_ids, rewards=None, valid=None, advantages=None, token_mask=None, k=2, t=1):
    g = len(task_ids)
    rewards = jnp.ones((g, k)) if rewards is None else jnp.asarray(rewards, jnp.float32)
    k = rewards.shape[1]
    valid = jnp.ones((g, k), bool) if valid is None else jnp.asarray(valid, bool)
    if advantages is None:
        advantages = jnp.ones((g, k, t), jnp.float32)
    advantages = jnp.asarray(advantages, jnp.float32)
    if token_mask is None:
        token_mask = jnp.ones(advantages.shape, bool)
    return cx.GroupResults(
        jnp.asarray(task_ids, jnp.int32), rewards, valid, advantages, jnp.asarray(token_mask, bool)
    )


def _metrics(cur, state):
    return {k: float(v) for k, v in cur.metrics(state).items()}


FAILED = [False, False]
OK = [True, True]


# ----------------------------------------------------------------------- composition


def test_sampler_observes_every_result_first_and_every_gate_sees_every_group():
    calls = []
    cur = cx.curriculum(
        recording_sampler(calls),
        {
            "reject": vote_gate(reject_all, "reject", calls),
            "count": vote_gate(admit_all, "count", calls),
        },
    )
    state = cur.init(jax.random.key(0))
    results = _results([0, 1, 2, 3, 4], valid=[OK, OK, FAILED, OK, OK])
    admission, state = cur.observe(state, results)
    # The sampler first, then every gate (no short-circuit after the first rejects all).
    assert calls == ["sampler", "reject", "count"]
    assert admission.admitted.tolist() == [False] * 5
    assert admission.by_gate["reject"].tolist() == [False] * 5
    assert admission.by_gate["count"].tolist() == [True] * 5
    assert set(admission.by_gate) == {"reject", "count"}
    # The sampler observed all 5 groups although none was admitted (the failed one too).
    assert int(state.sampler.groups) == 5
    assert int(state.sampler.rollouts) == 8
    assert int(state.gates["reject"]) == int(state.gates["count"]) == 5
    assert _metrics(cur, state) == {
        "sampler/groups": 5.0,
        "sampler/rollouts": 8.0,
        "gate/reject/seen": 5.0,
        "gate/count/seen": 5.0,
        "admission_rate": 0.0,
        "failed_groups": 1.0,
        "nonfinite": 0.0,
        "out_of_range": 0.0,
        "groups": 5.0,
        "admitted": 0.0,
    }
    # A second batch: everything cumulative, except the admission rate.
    _, state = cur.observe(state, _results([5, 6, 7]))
    m = _metrics(cur, state)
    assert (m["sampler/groups"], m["gate/reject/seen"], m["gate/count/seen"]) == (8, 8, 8)
    assert (m["groups"], m["failed_groups"], m["admission_rate"]) == (8.0, 1.0, 0.0)


def test_admitted_is_the_and_of_all_gates_and_of_having_a_valid_rollout():
    cur = cx.curriculum(
        recording_sampler(),
        {
            "odd": vote_gate(lambda r: (r.task_ids & 1) == 1, "odd"),
            "two": vote_gate(lambda r: (r.task_ids & 2) == 2, "two"),
        },
    )
    results = _results([0, 1, 2, 3, 7, 5, 11], valid=[OK, OK, OK, OK, FAILED, OK, [False, True]])
    for observe in (cur.observe, jax.jit(cur.observe)):
        admission, state = observe(cur.init(jax.random.key(0)), results)
        assert admission.by_gate["odd"].tolist() == [False, True, False, True, True, True, True]
        assert admission.by_gate["two"].tolist() == [False, False, True, True, True, False, True]
        # 7 passes both gates but its group failed; 11 has one valid rollout and passes both.
        assert admission.admitted.tolist() == [False, False, False, True, False, False, True]
        assert admission.admitted.dtype == jnp.bool_
        m = _metrics(cur, state)
        assert m["admission_rate"] == pytest.approx(2 / 7)
        assert (m["admitted"], m["failed_groups"], m["groups"]) == (2.0, 1.0, 7.0)


def test_no_gates_admits_every_group_with_a_valid_rollout():
    cur = cx.curriculum(cx.samplers.sequential(10))
    state = cur.init(jax.random.key(0))
    admission, state = cur.observe(
        state, _results([0, 1, 2, 3], valid=[OK, FAILED, [True, False], [False, True]])
    )
    assert admission.admitted.tolist() == [True, False, True, True]
    assert admission.by_gate == {}
    m = _metrics(cur, state)
    assert (m["admission_rate"], m["failed_groups"], m["admitted"]) == (0.75, 1.0, 3.0)
    admission, state = cur.observe(state, _results([4, 5], valid=[FAILED, FAILED]))
    assert admission.admitted.tolist() == [False, False]
    m = _metrics(cur, state)
    assert (m["admission_rate"], m["failed_groups"], m["admitted"], m["groups"]) == (0, 3, 3, 6)
    admission, state = cur.observe(state, _results([6, 7]))
    m = _metrics(cur, state)
    assert (m["admission_rate"], m["failed_groups"], m["admitted"], m["groups"]) == (1, 3, 5, 8)


def test_a_group_with_no_valid_rollout_is_never_admitted_even_if_every_gate_admits_it():
    cur = cx.curriculum(
        recording_sampler(),
        {"all": vote_gate(admit_all, "all"), "zero": cx.gates.advantage_range(0.0, 0.0)},
    )
    # Non-zero advantages in the invalid rollouts: advantage_range must not see them either.
    results = _results([0, 1], valid=[FAILED, OK], advantages=jnp.full((2, 2, 1), 1.0))
    admission, state = cur.observe(cur.init(jax.random.key(0)), results)
    assert admission.by_gate["all"].tolist() == [True, True]
    assert admission.by_gate["zero"].tolist() == [True, True]  # no trainable token: passes
    assert admission.admitted.tolist() == [False, True]
    assert _metrics(cur, state)["failed_groups"] == 1.0


def test_metric_keys_are_exactly_namespaced():
    cur = cx.curriculum(
        cx.samplers.sequential(4),
        {"zero_advantage": cx.gates.advantage_range(), "other": cx.gates.advantage_range(-1, 1)},
    )
    state = cur.init(jax.random.key(0))
    expected = {
        "sampler/epoch",
        "sampler/cursor",
        "gate/zero_advantage/rejected",
        "gate/zero_advantage/admit_rate",
        "gate/other/rejected",
        "gate/other/admit_rate",
        "admission_rate",
        "failed_groups",
        "nonfinite",
        "out_of_range",
        "groups",
        "admitted",
    }
    assert set(cur.metrics(state)) == expected
    _, state = cur.observe(state, _results([0, 1]))
    metrics = cur.metrics(state)
    assert set(metrics) == expected
    for v in metrics.values():
        assert v.dtype == jnp.float32 and v.shape == ()
    # Every advantage is 1: inside [-1, 1] (both rejected), outside [0, 0] (both admitted).
    assert _metrics(cur, state)["gate/other/rejected"] == 2.0
    assert _metrics(cur, state)["gate/zero_advantage/rejected"] == 0.0


def test_sample_delegates_to_the_sampler():
    cur = cx.curriculum(cx.samplers.sequential(5, shuffle=False))
    ids, state = cur.sample(cur.init(jax.random.key(0)), jax.random.key(1), 7)
    assert ids.tolist() == [0, 1, 2, 3, 4, 0, 1]
    m = _metrics(cur, state)
    assert (m["sampler/epoch"], m["sampler/cursor"]) == (1.0, 2.0)


# ----------------------------------------------------------------------- non-finite values


def test_nonfinite_values_make_rollouts_invalid_and_are_counted():
    calls = []
    cur = cx.curriculum(
        recording_sampler(),
        {"zero": cx.gates.advantage_range(0.0, 0.0), "log": vote_gate(admit_all, "log", calls)},
    )
    k, t = 3, 2
    rewards = np.ones((6, k), np.float32)
    valid = np.ones((6, k), bool)
    adv = np.full((6, k, t), 0.5, np.float32)
    mask = np.ones((6, k, t), bool)
    rewards[0, 0] = NAN  # g0: one NaN reward -> that rollout invalid; group still admitted
    adv[1, 1, 1] = INF  # g1: inf advantage at a trainable position -> rollout invalid
    adv[2, 2, 0] = NAN  # g2: NaN advantage at a masked position -> ignored
    mask[2, 2, 0] = False
    rewards[3, :] = [NAN, INF, -INF]  # g3: every rollout non-finite -> failed group
    adv[4] = 0.0  # g4: the only non-zero advantage is NaN: once it goes, all are zero
    adv[4, 0, 0] = NAN
    rewards[5, 2] = NAN  # g5: NaN reward in a rollout that was invalid already: not counted
    valid[5, 2] = False
    admission, state = cur.observe(
        cur.init(jax.random.key(0)), cx.GroupResults(jnp.arange(6), rewards, valid, adv, mask)
    )
    assert admission.admitted.tolist() == [True, True, True, False, False, True]
    assert admission.by_gate["zero"].tolist() == [True, True, True, True, False, True]
    m = _metrics(cur, state)
    assert m["nonfinite"] == 1 + 1 + 0 + 3 + 1 + 0
    assert m["failed_groups"] == 1.0
    # The sampler saw only finite values, and only the rollouts left valid.
    assert int(state.sampler.rollouts) == 18 - 6 - 1
    assert np.isfinite(float(state.sampler.reward_sum))
    assert float(state.sampler.reward_sum) == 11.0
    assert np.isfinite(float(state.sampler.adv_sum))
    # Cumulative across batches.
    _, state = cur.observe(
        state, _results([0], rewards=[[NAN, 1.0]], advantages=jnp.zeros((1, 2, 1)))
    )
    assert _metrics(cur, state)["nonfinite"] == 7.0


def test_difficulty_pools_scores_stay_finite_after_nan_inputs():
    cur = cx.curriculum(
        cx.samplers.difficulty_pools(6), {"zero_advantage": cx.gates.advantage_range()}
    )
    state = cur.init(jax.random.key(0))
    results = _results(
        [0, 1, 2, 3],
        rewards=[
            [NAN, 1.0, 0.0, INF],
            [NAN, NAN, NAN, NAN],
            [-INF, 0.25, 0.25, 0.25],
            [1, 1, 1, 1],
        ],
        advantages=jnp.zeros((4, 4, 1)).at[3, 0, 0].set(NAN),
    )
    _, state = cur.observe(state, results)
    scores = np.asarray(state.sampler.scores)
    assert np.all(np.isfinite(scores))
    assert scores[0] == pytest.approx(0.5)  # mean of the two finite rollouts
    assert scores[2] == pytest.approx(0.25)
    assert scores[3] == pytest.approx(1.0)  # the NaN advantage only invalidated rollout 0
    assert np.asarray(state.sampler.scored).tolist() == [True, False, True, True, False, False]
    m = _metrics(cur, state)
    assert m["nonfinite"] == 2 + 4 + 1 + 1
    assert m["failed_groups"] == 1.0
    assert m["sampler/pool/unscored"] == 1.0
    assert all(np.isfinite(v) for v in m.values())


# ----------------------------------------------------------------------- out-of-range task ids

R = 6  # the id range of the ranged samplers below


def ranged_sampler(calls=None):
    """The recording sampler declaring the id range ``[0, R)``."""
    return recording_sampler(calls)._replace(num_tasks=R)


def test_num_tasks_and_entry_task_are_optional_fields_of_task_sampler():
    s = recording_sampler()
    assert s.num_tasks is None and s.entry_task is None and len(s) == 6
    init, sample, observe, metrics, _, _ = s
    assert cx.TaskSampler(init, sample, observe, metrics, 7).num_tasks == 7
    assert cx.TaskSampler(init, sample, observe, metrics).entry_task is None
    # No declared range: nothing is checked, any id reaches the sampler as it is.
    cur = cx.curriculum(s)
    admission, state = cur.observe(cur.init(jax.random.key(0)), _results([-1, 10**6]))
    assert admission.admitted.tolist() == [True, True]
    assert _metrics(cur, state)["out_of_range"] == 0.0


def test_every_builtin_sampler_declares_its_id_range():
    from curriculax.selfplay import frontier_sampler

    assert cx.samplers.uniform(7).num_tasks == 7
    assert cx.samplers.sequential(7).num_tasks == 7
    assert cx.samplers.sequential(None).num_tasks is None  # an unbounded stream
    assert cx.samplers.difficulty_pools(7).num_tasks == 7
    assert cx.samplers.learnability(7).num_tasks == 7
    assert cx.samplers.category_bandit(7, [0, 0, 1, 1, 2, 2, 2]).num_tasks == 7
    assert cx.samplers.floor(7, cx.samplers.uniform(7)).num_tasks == 7
    assert cx.samplers.skip_zero_variance(7, cx.samplers.uniform(7)).num_tasks == 7
    layout = {"level": jax.ShapeDtypeStruct((), jnp.float32)}
    fr = frontier_sampler(cx.samplers.sequential(7), 7, layout, capacity=3)
    assert fr.sampler.num_tasks == 7 + 3  # seed ids, then one id per frontier slot
    with pytest.raises(ValueError, match=r"seed_sampler draws from 5 tasks but num_seed is 7"):
        frontier_sampler(cx.samplers.sequential(5), 7, layout)


@pytest.mark.parametrize("bad", [-1, R, 10 * R, 2**31 - 1])
def test_eager_observe_raises_on_an_out_of_range_id(bad):
    cur = cx.curriculum(ranged_sampler(), {"all": vote_gate(admit_all, "all")})
    state = cur.init(jax.random.key(0))
    with pytest.raises(
        ValueError, match=rf"task_ids outside the sampler's range \[0, {R}\): {bad} \(row 1\)\."
    ):
        cur.observe(state, _results([0, bad, 2]))
    with pytest.raises(ValueError, match=r"outside"):  # plain numpy ids too
        cur.observe(state, _results([0, bad, 2])._replace(task_ids=np.array([0, bad, 2])))


def test_the_eager_error_names_the_first_few_bad_ids_and_counts_the_rest():
    cur = cx.curriculum(ranged_sampler())
    ids = [0, -1, 6, 60, 3, -5, 7, 8, 9]
    with pytest.raises(ValueError) as info:
        cur.observe(cur.init(jax.random.key(0)), _results(ids))
    message = str(info.value)
    assert "-1 (row 1), 6 (row 2), 60 (row 3), -5 (row 5), 7 (row 6) and 2 more" in message
    assert f"[0, {R})" in message and "pool of 6 tasks" in message


def test_inside_jit_an_out_of_range_group_is_invalid_counted_and_never_admitted():
    def past_end_and_invalid(r):
        # What a gate sees of an out-of-range row: the id past the end, no valid rollout.
        return jnp.where(r.task_ids >= R, (r.task_ids == R) & ~jnp.any(r.valid, axis=1), True)

    cur = cx.curriculum(
        ranged_sampler(),
        {"all": vote_gate(admit_all, "all"), "sees": vote_gate(past_end_and_invalid, "sees")},
    )
    observe = jax.jit(cur.observe)
    results = _results([0, -1, R, 5, 10 * R], rewards=jnp.full((5, 2), 0.5))
    admission, state = observe(cur.init(jax.random.key(0)), results)
    assert admission.admitted.tolist() == [True, False, False, True, False]
    assert admission.by_gate["sees"].tolist() == [True] * 5
    # The sampler saw every row, but only the in-range rollouts as valid.
    assert int(state.sampler.groups) == 5
    assert int(state.sampler.rollouts) == 4
    assert float(state.sampler.reward_sum) == 2.0
    assert float(state.sampler.adv_sum) == 4.0
    m = _metrics(cur, state)
    assert (m["out_of_range"], m["admitted"], m["groups"]) == (3.0, 2.0, 5.0)
    assert m["failed_groups"] == 3.0  # no valid rollout left, like a failed group
    _, state = observe(state, _results([R + 1, 1]))
    assert _metrics(cur, state)["out_of_range"] == 4.0  # cumulative


def test_a_bad_declared_range_raises_at_construction():
    with pytest.raises(ValueError, match=r"TaskSampler.num_tasks must be >= 1, got 0"):
        cx.curriculum(recording_sampler()._replace(num_tasks=0))
    with pytest.raises(TypeError, match=r"TaskSampler.num_tasks must be an int >= 1, got '7'"):
        cx.curriculum(recording_sampler()._replace(num_tasks="7"))


def test_a_declared_entry_task_is_checked_and_wrappers_pass_it_on():
    entry_task = np.array([0, 0, 2, 2, 4, 4, 4])
    inner = cx.samplers.learnability(7, entry_task=entry_task)
    assert inner.entry_task.tolist() == entry_task.tolist()
    assert cx.samplers.learnability(7).entry_task is None  # every entry its own task
    relabelled = cx.samplers.learning_progress(7, entry_task=[5, 5, 1, 1, 9, 9, 9])
    assert relabelled.entry_task.tolist() == entry_task.tolist()  # as first entries
    for wrapped in (
        cx.samplers.floor(7, inner),
        cx.samplers.reward_consistency(7, inner),
        cx.samplers.skip_zero_variance(7, inner),
    ):
        assert wrapped.entry_task.tolist() == entry_task.tolist()
    cx.curriculum(inner)
    s = recording_sampler()._replace(num_tasks=7)
    for bad in ([0, 0, 2], [1, 1, 2, 2, 4, 4, 4], [0.0] * 7):
        with pytest.raises(ValueError, match=r"TaskSampler.entry_task must be an int array"):
            cx.curriculum(s._replace(entry_task=np.array(bad)))
    with pytest.raises(ValueError, match=r"num_tasks=None"):
        cx.curriculum(recording_sampler()._replace(entry_task=entry_task))


# ----------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        (
            "task_ids",
            jnp.zeros((3, 1), jnp.int32),
            r"task_ids must be i32\[G\], got shape \(3, 1\)",
        ),
        ("rewards", jnp.zeros((2, 2)), r"rewards must be f32\[G=3, K\], got shape \(2, 2\)"),
        ("rewards", jnp.zeros((3,)), r"rewards must be f32\[G=3, K\], got shape \(3,\)"),
        ("valid", jnp.ones((3, 4), bool), r"valid must be bool\[G=3, K=2\], got shape \(3, 4\)"),
        (
            "advantages",
            jnp.zeros((3, 2)),
            r"advantages must be f32\[G=3, K=2, T\], got shape \(3, 2\)",
        ),
        (
            "token_mask",
            jnp.ones((3, 2, 2), bool),
            r"token_mask must match advantages \(3, 2, 1\), got shape \(3, 2, 2\)",
        ),
    ],
)
def test_bad_shapes_raise_value_error_at_trace_time(field, value, match):
    cur = cx.curriculum(cx.samplers.sequential(4), {"z": cx.gates.advantage_range()})
    state = cur.init(jax.random.key(0))
    bad = _results([0, 1, 2])._replace(**{field: value})
    with pytest.raises(ValueError, match=match):
        cur.observe(state, bad)
    # Shapes are checked while tracing: nothing has to run for the error to surface.
    with pytest.raises(ValueError, match=match):
        jax.eval_shape(cur.observe, state, bad)


def test_bad_results_types_raise():
    cur = cx.curriculum(cx.samplers.sequential(4))
    state = cur.init(jax.random.key(0))
    with pytest.raises(TypeError, match=r"observe takes a curriculax.GroupResults, got tuple"):
        cur.observe(state, tuple(_results([0])))
    with pytest.raises(TypeError, match=r"task_ids must be integers, got float32"):
        cur.observe(state, _results([0])._replace(task_ids=jnp.zeros((1,), jnp.float32)))


@pytest.mark.parametrize("bad", [2**31 + 5, 2**32 + 3, 2**40])
def test_int64_ids_past_int32_are_named_as_given_not_wrapped(bad):
    """Without x64 a cast to int32 first turned ``2**32 + 3`` into task 3 (accepted) and
    ``2**31 + 5`` into a negative id (the error named the wrong id)."""
    ids = np.array([0, bad, 2], np.int64)
    cur = cx.curriculum(ranged_sampler())
    state = cur.init(jax.random.key(0))
    named = rf"task_ids outside the sampler's range \[0, {R}\): {bad} \(row 1\)\."
    with pytest.raises(ValueError, match=named):
        cur.observe(state, _results([0, 1, 2])._replace(task_ids=ids))
    with pytest.raises(ValueError, match=named):  # a real row among padding rows
        cur.observe(state, _results([0, 1, 2])._replace(task_ids=ids), jnp.array([1, 1, 0], bool))
    with pytest.raises(ValueError, match=named):  # a list of Python ints
        cur.observe(state, _results([0, 1, 2])._replace(task_ids=ids.tolist()))
    # With no declared range, an id that int32 cannot hold is refused too.
    free = cx.curriculum(recording_sampler())
    with pytest.raises(ValueError, match=rf"task_ids outside int32.*: {bad} \(row 1\)"):
        free.observe(free.init(jax.random.key(0)), _results([0, 1, 2])._replace(task_ids=ids))
    # A padding row may carry any id; in-range int64 ids are accepted.
    admission, _ = cur.observe(
        state, _results([0, 1, 2])._replace(task_ids=ids), jnp.array([1, 0, 1], bool)
    )
    assert admission.admitted.tolist() == [True, False, True]


@pytest.mark.parametrize("field", ["valid", "token_mask"])
def test_a_float_valid_or_token_mask_raises_type_error_eagerly_and_traced(field):
    """A cast to bool read 0.2 as valid (or trainable)."""
    cur = cx.curriculum(cx.samplers.difficulty_pools(4), {"z": cx.gates.advantage_range()})
    state = cur.init(jax.random.key(0))
    results = _results([0, 1], rewards=[[1.0, 0.0], [1.0, 0.0]])
    bad = results._replace(**{field: getattr(results, field).astype(jnp.float32) * 0.2})
    match = rf"{field} must hold booleans or integers, got float32"
    with pytest.raises(TypeError, match=match):
        cur.observe(state, bad)
    with pytest.raises(TypeError, match=match):
        jax.jit(cur.observe)(state, bad)
    with pytest.raises(TypeError, match=match[:-2] + "64"):  # NumPy float64, named as given
        cur.observe(state, results._replace(**{field: np.asarray(getattr(bad, field), float)}))
    # Integer 0/1 masks stay accepted, eagerly and under jit, and mean what bool ones do.
    ints = results._replace(**{field: getattr(results, field).astype(jnp.int32)})
    for observe in (cur.observe, jax.jit(cur.observe)):
        got, _ = observe(state, ints)
        want, _ = observe(state, results)
        assert got.admitted.tolist() == want.admitted.tolist()


@pytest.mark.parametrize("length", [1, 3])
def test_rows_of_the_wrong_length_raise_a_clear_error(length):
    """A ``rows`` of length 3 for two groups gave a bare broadcasting error."""
    cur = cx.curriculum(ranged_sampler())
    state = cur.init(jax.random.key(0))
    rows = jnp.ones((length,), bool)
    with pytest.raises(ValueError, match=rf"rows must be bool\[G=2\], got shape \({length},\)"):
        cur.observe(state, _results([0, 1]), rows)
    with pytest.raises(ValueError, match=rf"rows must be bool\[G=2\], got shape \({length},\)"):
        jax.eval_shape(cur.observe, state, _results([0, 1]), rows)


def test_a_gate_vote_of_the_wrong_shape_raises():
    cur = cx.curriculum(
        cx.samplers.sequential(4), {"bad": vote_gate(lambda r: jnp.ones((2, 3), bool), "bad")}
    )
    with pytest.raises(
        ValueError, match=r"gate 'bad' returned a vote of shape \(2, 3\).*bool\[G=3\]"
    ):
        cur.observe(cur.init(jax.random.key(0)), _results([0, 1, 2]))


@pytest.mark.parametrize(
    ("gates", "error", "match"),
    [
        ({"a/b": cx.gates.advantage_range()}, ValueError, r"without '/', got 'a/b'"),
        ({"": cx.gates.advantage_range()}, ValueError, r"non-empty strings.*got ''"),
        ({3: cx.gates.advantage_range()}, ValueError, r"got 3"),
        (
            {"g": cx.samplers.sequential(3)},
            TypeError,
            r"gate 'g' must be an AdmissionGate.*got TaskSampler",
        ),
        ({"g": lambda s, r: r}, TypeError, r"gate 'g' must be an AdmissionGate.*got function"),
        ({"g": None}, TypeError, r"gate 'g' must be an AdmissionGate.*got NoneType"),
        (
            [cx.gates.advantage_range()],
            TypeError,
            r"gates must be a mapping name -> AdmissionGate.*got list",
        ),
    ],
)
def test_bad_gates_raise(gates, error, match):
    with pytest.raises(error, match=match):
        cx.curriculum(cx.samplers.sequential(3), gates)


def test_a_sampler_that_is_not_a_task_sampler_raises():
    with pytest.raises(TypeError, match=r"sampler must be a TaskSampler.*got AdmissionGate"):
        cx.curriculum(cx.gates.advantage_range())
    with pytest.raises(TypeError, match=r"sampler must be a TaskSampler.*got tuple"):
        cx.curriculum(tuple(cx.samplers.sequential(3)))


def test_padding_rows_are_checked_and_counted_nowhere():
    """``observe(state, results, rows)``: rows marked False are padding (the host driver's):
    their ids are not range-checked, they count as no group, failed or out-of-range one, and
    no component state changes for them."""
    cur = cx.curriculum(
        cx.samplers.difficulty_pools(8), {"zero_advantage": cx.gates.advantage_range(0.0, 0.0)}
    )
    state = cur.init(jax.random.key(0))
    results = _results(
        [1, 2, 999, -3],
        rewards=[[1, 0], [0, 0], [1, 0], [1, 0]],
        valid=[OK, FAILED, OK, OK],
        advantages=[[[0.5], [-0.5]], [[0.0], [0.0]], [[0.5], [-0.5]], [[0.5], [-0.5]]],
    )
    rows = jnp.array([True, True, False, False])
    admission, padded = cur.observe(state, results, rows)
    assert admission.admitted.tolist() == [True, False, False, False]
    m = _metrics(cur, padded)
    assert (m["groups"], m["failed_groups"], m["out_of_range"], m["admitted"]) == (2, 1, 0, 1)
    assert m["admission_rate"] == 0.5 and m["gate/zero_advantage/admit_rate"] == 1.0
    alone = cur.observe(state, jax.tree.map(lambda x: x[:2], results))[1]
    for a, b in zip(jax.tree.leaves(padded), jax.tree.leaves(alone)):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="outside the sampler's range"):
        cur.observe(state, results, jnp.array([True, True, True, False]))
    as_lists = results._replace(task_ids=[1, 2, 999, -3])  # accepted without rows too
    listed = cur.observe(state, as_lists, rows)[0]
    assert listed.admitted.tolist() == admission.admitted.tolist()


def test_group_results_gives_an_all_equal_group_exactly_zero_advantage():
    """The float32 mean of eight 0.7s is not 0.7: subtracting it once gave 6e-08 advantages,
    which the zero-advantage gate admitted."""
    from curriculax.testing import group_results

    results = group_results([0, 1], [[0.7] * 8, [0.7] * 7 + [0.2]])
    assert np.all(np.asarray(results.advantages[0]) == 0.0)
    assert np.all(np.asarray(results.advantages[1]) != 0.0)
    gate = cx.gates.advantage_range(0.0, 0.0)
    vote, _ = gate.admit(gate.init(jax.random.key(0)), results)
    assert vote.tolist() == [False, True]
