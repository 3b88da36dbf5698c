"""curriculax.credit.grpo_advantages: exact zeros for equal rewards, non-finite rewards ignored."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import curriculax as cx
from curriculax.credit import grpo_advantages, per_token

# Values whose float32 group mean is off by a rounding step from the value itself.
AWKWARD = [0.1, 1 / 3, 0.7, 2 / 3, 5 / 6, 5 / 7, 0.3, 0.9, 1 / 7]

advantages = jax.jit(grpo_advantages, static_argnames="scale_by_std")


@pytest.mark.parametrize("scale_by_std", [True, False])
@pytest.mark.parametrize("k", [8, 16])
def test_equal_rewards_get_exactly_zero_and_the_zero_advantage_gate_rejects_them(k, scale_by_std):
    rewards = jnp.asarray(np.repeat(np.float32(AWKWARD)[:, None], k, axis=1))
    valid = jnp.ones(rewards.shape, bool)
    adv = np.asarray(advantages(rewards, valid, scale_by_std=scale_by_std))
    assert (adv == 0.0).all(), adv[np.any(adv != 0.0, axis=1)]

    g = len(AWKWARD)
    cur = cx.curriculum(
        cx.samplers.uniform(g), gates={"zero_advantage": cx.gates.advantage_range(0.0, 0.0)}
    )
    results = cx.GroupResults(
        jnp.arange(g, dtype=jnp.int32),
        rewards,
        valid,
        per_token(jnp.asarray(adv), jnp.ones((g, k, 1), bool), valid),
        jnp.ones((g, k, 1), bool),
    )
    admission, state = jax.jit(cur.observe)(cur.init(jax.random.key(0)), results)
    assert not np.asarray(admission.admitted).any()
    assert float(cur.metrics(state)["admitted"]) == 0.0


def test_equal_valid_rewards_with_invalid_rollouts_of_other_values_are_zero():
    valid = jnp.array([[True, False, True, True, False, True, True, True]] * 2)
    rewards = jnp.array([[v, 5.0, v, v, -3.0, v, v, v] for v in (0.9, 5 / 7)], jnp.float32)
    for scale in (True, False):
        np.testing.assert_array_equal(advantages(rewards, valid, scale_by_std=scale), 0.0)


@settings(max_examples=60, deadline=None)
@given(
    value=st.floats(-1e6, 1e6, allow_nan=False, width=32),
    k=st.sampled_from([2, 8, 16]),
    invalid=st.lists(st.booleans(), min_size=16, max_size=16),
    scale_by_std=st.booleans(),
)
def test_property_equal_valid_rewards_give_exactly_zero(value, k, invalid, scale_by_std):
    rewards = np.full((1, k), value, np.float32)
    valid = ~np.array(invalid[:k])[None, :]
    rewards[~valid] = value + 1.0  # invalid rollouts may hold anything
    adv = advantages(jnp.asarray(rewards), jnp.asarray(valid), scale_by_std=scale_by_std)
    adv = np.asarray(adv)
    assert (adv == 0.0).all(), (value, adv)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_valid_reward_is_treated_as_invalid(bad):
    rewards = jnp.array([[1.0, 0.0, bad, 0.0], [0.5, 0.5, 0.5, 0.5]], jnp.float32)
    valid = jnp.ones((2, 4), bool)
    adv = np.asarray(advantages(rewards, valid, scale_by_std=True))
    assert np.isfinite(adv).all(), adv
    # The bad rollout gets 0; the rest are the advantages of [1, 0, 0] over three rollouts.
    s2 = np.sqrt(2.0)
    np.testing.assert_allclose(adv[0], [s2, -1 / s2, 0.0, -1 / s2], rtol=1e-5)
    np.testing.assert_array_equal(adv[1], 0.0)  # other groups untouched
    mean_only = np.asarray(advantages(rewards, valid, scale_by_std=False))
    np.testing.assert_allclose(mean_only[0], [2 / 3, -1 / 3, 0.0, -1 / 3], rtol=1e-6)


def test_a_group_of_only_non_finite_rewards_gets_zero():
    rewards = jnp.array([[np.nan, np.inf, -np.inf, np.nan]], jnp.float32)
    adv = np.asarray(advantages(rewards, jnp.ones((1, 4), bool), scale_by_std=True))
    np.testing.assert_array_equal(adv, 0.0)


@pytest.mark.parametrize("scale_by_std", [True, False])
@pytest.mark.parametrize("power", [0, 20, 66, 100, 126, 127])
def test_credit_of_huge_finite_rewards_is_the_scaled_credit(power, scale_by_std):
    """Rewards times 2**power (up to float32's largest binade) give the credit of the
    unscaled rewards (times 2**power without std scaling): no overflow in the sum or the
    squares, and groups of equal rewards still get exactly 0."""
    base = np.array([[0.0, 1.0, 0.0, 1.0], [0.25, 1.5, -1.0, 0.5], [1.5] * 4], np.float32)
    valid = jnp.ones(base.shape, bool)
    big = base * np.float32(2.0**power)
    assert np.isfinite(big).all()
    got = np.asarray(advantages(jnp.asarray(big), valid, scale_by_std=scale_by_std))
    want = np.asarray(advantages(jnp.asarray(base), valid, scale_by_std=scale_by_std))
    if not scale_by_std:
        want = want * np.float32(2.0**power)
    assert np.isfinite(got).all(), got
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_array_equal(got[2], 0.0)


def test_group_signal_averages_over_the_valid_rollouts_trainable_positions():
    """A rollout made invalid after its tokens (a NaN reward) keeps its token mask: counting
    its positions once diluted the group's signal (0.71 for 0.94)."""
    from curriculax.credit import finite_rewards, group_signal

    rewards, valid = finite_rewards(jnp.array([[1.0, 0.0, 1.0, jnp.nan]]), jnp.ones((1, 4), bool))
    adv = per_token(grpo_advantages(rewards, valid), jnp.ones((1, 4, 1), bool), valid)
    signal = group_signal(adv, jnp.ones((1, 4, 1), bool), valid)
    expected = float(jnp.mean(jnp.abs(adv[0, :3, 0])))
    assert float(signal[0]) == pytest.approx(expected) and expected > 0.9
