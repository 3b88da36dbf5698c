"""cx.gates.advantage_range: reject a group iff every trainable advantage lies in [low, high]."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curriculax as cx

K, T = 2, 3  # rollouts per group, credit positions per rollout


def _group(adv=None, mask=None, valid=None):
    """One group: ``adv`` and ``mask`` are ``[K][T]``, ``valid`` is ``[K]``."""
    adv = np.zeros((K, T), np.float32) if adv is None else np.asarray(adv, np.float32)
    mask = np.ones((K, T), bool) if mask is None else np.asarray(mask, bool)
    valid = np.ones((K,), bool) if valid is None else np.asarray(valid, bool)
    return adv, mask, valid


def _results(*groups):
    adv, mask, valid = (np.stack(x) for x in zip(*groups))
    g = len(groups)
    return cx.GroupResults(
        jnp.arange(g, dtype=jnp.int32),
        jnp.zeros((g, K), jnp.float32),
        jnp.asarray(valid),
        jnp.asarray(adv),
        jnp.asarray(mask),
    )


def _admit(gate, results, state=None):
    state = gate.init(jax.random.key(0)) if state is None else state
    votes, state = jax.jit(gate.admit)(state, results)
    assert votes.dtype == jnp.bool_ and votes.shape == results.task_ids.shape
    return votes.tolist(), state


def _metrics(gate, state):
    return {k: float(v) for k, v in gate.metrics(state).items()}


def _one_hot(k, t, value):
    adv = np.zeros((K, T), np.float32)
    adv[k, t] = value
    return adv


def test_zero_advantage_gate_on_hand_made_groups():
    gate = cx.gates.advantage_range(0.0, 0.0)
    only_masked = np.ones((K, T), bool)
    only_masked[1, 2] = False
    results = _results(
        _group(),  # 0: all advantages zero -> rejected
        _group(_one_hot(1, 2, 0.5)),  # 1: one non-zero trainable advantage -> admitted
        _group(_one_hot(0, 0, -1e-6)),  # 2: tiny negative is still outside [0, 0] -> admitted
        _group(_one_hot(1, 2, 3.0), mask=only_masked),  # 3: non-zero only where masked
        _group(_one_hot(1, 0, 3.0), valid=[True, False]),  # 4: non-zero only in an invalid rollout
        _group(_one_hot(1, 0, 3.0), mask=np.zeros((K, T), bool)),  # 5: no trainable token
        _group(_one_hot(0, 1, 3.0), valid=[False, False]),  # 6: no valid rollout: no token
        _group(np.full((K, T), 0.25)),  # 7: every trainable advantage non-zero -> admitted
    )
    votes, state = _admit(gate, results)
    assert votes == [False, True, True, False, False, True, True, True]
    # admit_rate: 3 of the 6 groups with a trainable token (5 and 6 pass unjudged)
    assert _metrics(gate, state) == {"rejected": 3.0, "admit_rate": 0.5}


def test_bounds_are_inclusive():
    low, high = -0.5, 0.5
    gate = cx.gates.advantage_range(low, high)
    above = float(np.nextafter(np.float32(high), np.float32(np.inf)))
    below = float(np.nextafter(np.float32(low), np.float32(-np.inf)))
    results = _results(
        _group(_one_hot(0, 0, high)),  # == high: inside -> rejected
        _group(_one_hot(0, 0, above)),  # just above high -> admitted
        _group(_one_hot(1, 1, low)),  # == low: inside -> rejected
        _group(_one_hot(1, 1, below)),  # just below low -> admitted
        _group(np.full((K, T), 0.3)),  # all inside -> rejected
        _group(np.where(np.eye(K, T, dtype=bool), 0.7, 0.1)),  # two outside -> admitted
    )
    votes, state = _admit(gate, results)
    assert votes == [False, True, False, True, False, True]
    assert _metrics(gate, state) == {"rejected": 3.0, "admit_rate": 0.5}


def test_a_range_away_from_zero_rejects_only_groups_inside_it():
    gate = cx.gates.advantage_range(1.0, 2.0)
    results = _results(
        _group(np.full((K, T), 1.5)),  # inside -> rejected
        _group(),  # zeros are outside [1, 2] -> admitted
    )
    assert _admit(gate, results)[0] == [False, True]


def test_rejected_is_cumulative_and_admit_rate_is_the_last_batch():
    gate = cx.gates.advantage_range()
    assert _metrics(gate, gate.init(jax.random.key(0)))["rejected"] == 0.0
    nonzero = _group(_one_hot(0, 0, 1.0))
    votes, state = _admit(gate, _results(_group(), nonzero, nonzero, nonzero))
    assert votes == [False, True, True, True]
    assert _metrics(gate, state) == {"rejected": 1.0, "admit_rate": 0.75}
    votes, state = _admit(gate, _results(_group(), _group()), state)
    assert votes == [False, False]
    assert _metrics(gate, state) == {"rejected": 3.0, "admit_rate": 0.0}
    votes, state = _admit(gate, _results(nonzero, nonzero), state)
    assert _metrics(gate, state) == {"rejected": 3.0, "admit_rate": 1.0}
    # A batch with no trainable token (failed groups, padding) judges nothing: rate unchanged.
    votes, state = _admit(gate, _results(_group(valid=[False, False])), state)
    assert votes == [True]
    assert _metrics(gate, state) == {"rejected": 3.0, "admit_rate": 1.0}
    for v in gate.metrics(state).values():
        assert v.dtype == jnp.float32 and v.shape == ()


def test_bounds_decide_as_the_given_numbers_not_their_float32_roundings():
    """``1e-50`` rounds to 0.0 in float32, yet an advantage of exactly 0 lies below the range
    (the group is admitted). ``float32(0.1)`` is 0.100000001, above 0.1: a group of it is
    admitted by ``[-1, 0.1]``; the float32 just below, 0.099999994, is inside (rejected)."""
    zero = _results(_group())
    assert _admit(cx.gates.advantage_range(1e-50, 1.0), zero)[0] == [True]
    below = np.float32(0.1) - np.float32(np.spacing(np.float32(0.1)))  # 0.099999994 <= 0.1
    group = _results(_group(np.full((K, T), below, np.float32)))
    assert _admit(cx.gates.advantage_range(-1.0, 0.1), group)[0] == [False]
    above = _results(_group(np.full((K, T), np.float32(0.1), np.float32)))  # 0.100000001 > 0.1
    assert _admit(cx.gates.advantage_range(-1.0, 0.1), above)[0] == [True]


def test_default_is_zero_advantage_rejection():
    gate = cx.gates.advantage_range()
    votes, _ = _admit(gate, _results(_group(), _group(_one_hot(0, 0, 1.0))))
    assert votes == [False, True]


def test_in_a_curriculum_the_gate_vote_is_by_gate_and_the_metrics_are_namespaced():
    cur = cx.curriculum(
        cx.samplers.sequential(8), {"zero_advantage": cx.gates.advantage_range(0.0, 0.0)}
    )
    state = cur.init(jax.random.key(0))
    results = _results(_group(), _group(_one_hot(0, 0, 1.0)), _group(valid=[False, False]))
    admission, state = cur.observe(state, results)
    assert admission.by_gate["zero_advantage"].tolist() == [False, True, True]
    assert admission.admitted.tolist() == [False, True, False]  # no valid rollout: never
    m = {k: float(v) for k, v in cur.metrics(state).items()}
    assert m["gate/zero_advantage/rejected"] == 1.0
    assert m["gate/zero_advantage/admit_rate"] == pytest.approx(1 / 2)  # the failed group:
    # not judged
    assert m["admission_rate"] == pytest.approx(1 / 3)


def test_low_above_high_raises_naming_both_values():
    with pytest.raises(ValueError, match=r"low <= high.*low=0\.5.*high=0\.1"):
        cx.gates.advantage_range(0.5, 0.1)
    with pytest.raises(ValueError, match=r"low=1.*high=-1"):
        cx.gates.advantage_range(low=1, high=-1)


def test_bad_bound_values_raise():
    with pytest.raises(ValueError, match=r"low must not be NaN"):
        cx.gates.advantage_range(float("nan"), 0.0)
    with pytest.raises(TypeError, match=r"high must be a number, got '1'"):
        cx.gates.advantage_range(0.0, "1")
    with pytest.raises(TypeError, match=r"low must be a number, got True"):
        cx.gates.advantage_range(True, 1.0)
    with pytest.raises(ValueError, match=r"low must be a number a float holds, got 1000"):
        cx.gates.advantage_range(10**400, 10**401)  # was a bare OverflowError naming nothing


def test_numpy_numbers_are_numbers():
    """numpy bounds were refused ("low must be a number"); they decide as the Python numbers
    of the same value: ``float32(0.1)`` is a bound of 0.100000001, which holds an advantage
    of ``float32(0.1)``."""
    groups = _results(
        _group(),
        _group(np.full((K, T), np.float32(0.1), np.float32)),
        _group(_one_hot(0, 0, 2.0)),
    )
    votes = _admit(cx.gates.advantage_range(np.int64(0), np.float32(0.1)), groups)[0]
    assert votes == _admit(cx.gates.advantage_range(0, float(np.float32(0.1))), groups)[0]
    assert votes == [False, False, True]
    assert _admit(cx.gates.advantage_range(np.float64(-1), np.int32(1)), groups)[0] == [
        False,
        False,
        True,
    ]
    with pytest.raises(TypeError, match=r"low must be a number, got np.True_"):
        cx.gates.advantage_range(np.bool_(True), 1.0)
    with pytest.raises(ValueError, match=r"high must not be NaN"):
        cx.gates.advantage_range(0.0, np.float32("nan"))


def test_equal_bounds_and_infinite_bounds_are_allowed():
    cx.gates.advantage_range(0.3, 0.3)
    gate = cx.gates.advantage_range(-np.inf, np.inf)  # rejects every group with a token
    no_tokens = _group(mask=np.zeros((K, T), bool))
    votes, _ = _admit(gate, _results(_group(np.full((K, T), 1e30)), no_tokens))
    assert votes == [False, True]
