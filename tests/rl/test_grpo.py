"""GRPO advantages and the clipped loss on hand-computed cases."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curriculax import rl


def test_advantages_hand_computed():
    rewards = jnp.array(
        [
            [1.0, 0.0, 0.0, 0.0],  # one success in four
            [1.0, 0.0, jnp.nan, 1.0],  # an invalid rollout (its NaN reward is ignored)
            [1.0, 1.0, 1.0, 1.0],  # zero variance: nothing to prefer
            [5.0, 2.0, 0.0, 0.0],  # no valid rollout
        ]
    )
    valid = jnp.array(
        [[True] * 4, [True, True, False, True], [True] * 4, [False] * 4],
    )
    adv = jax.jit(rl.grpo_advantages)(rewards, valid)
    s3 = np.sqrt(3.0)
    np.testing.assert_allclose(adv[0], [s3, -1 / s3, -1 / s3, -1 / s3], rtol=1e-5)
    # mean 2/3, centred (1/3, -2/3, 1/3), population std sqrt(2)/3
    np.testing.assert_allclose(
        adv[1], [1 / np.sqrt(2), -np.sqrt(2), 0.0, 1 / np.sqrt(2)], rtol=1e-5
    )
    np.testing.assert_array_equal(adv[2:], 0.0)
    mean_only = rl.grpo_advantages(rewards, valid, scale_by_std=False)
    np.testing.assert_allclose(mean_only[1], [1 / 3, -2 / 3, 0.0, 1 / 3], rtol=1e-6)
    np.testing.assert_allclose(mean_only[0], [0.75, -0.25, -0.25, -0.25])


def test_loss_hand_computed_with_clipping():
    r_hi, r_lo = np.exp(0.5), np.exp(-0.5)  # 1.6487, 0.6065: both outside [0.8, 1.2]
    logprobs = jnp.array([-1.0, -1.0, -1.0, -1.0, -7.0])
    old = jnp.array([-1.5, -0.5, -1.5, -0.5, 0.0])
    adv = jnp.array([1.0, 1.0, -1.0, -1.0, 100.0])
    mask = jnp.array([True, True, True, True, False])
    loss, metrics = rl.grpo_loss(logprobs, old, adv, mask, clip_eps=0.2)
    # -min(r A, clip(r) A): 1.2 (clipped) | r_lo | -r_hi | -0.8 (clipped), sign flipped
    expected = (-1.2 - r_lo + r_hi + 0.8) / 4
    np.testing.assert_allclose(loss, expected, rtol=1e-6)
    assert float(metrics["clip_frac"]) == 1.0 and float(metrics["tokens"]) == 4.0
    grad = jax.grad(lambda lp: rl.grpo_loss(lp, old, adv, mask, clip_eps=0.2)[0])(logprobs)
    # Clipped tokens pass no gradient; unclipped ones pass -A r / num_tokens.
    np.testing.assert_allclose(grad, [0.0, -r_lo / 4, r_hi / 4, 0.0, 0.0], rtol=1e-5)


def test_on_policy_loss_is_minus_mean_advantage_with_ratio_one():
    lp = jnp.array([[-0.3, -2.0], [-1.0, -0.1]])
    adv = jnp.array([[2.0, 2.0], [-1.0, 0.0]])
    mask = jnp.array([[True, True], [True, False]])
    loss, metrics = rl.grpo_loss(lp, lp, adv, mask)
    np.testing.assert_allclose(loss, -(2.0 + 2.0 - 1.0) / 3)
    assert float(metrics["ratio"]) == 1.0 and float(metrics["approx_kl_old"]) == 0.0


def test_masked_tokens_pass_no_gradient_even_with_garbage():
    lp = jnp.array([-1.0, -2.0, -3.0])
    old = jnp.array([-1.2, jnp.inf, -jnp.inf])
    adv = jnp.array([1.0, jnp.nan, 1e30])
    mask = jnp.array([True, False, False])
    grad = jax.grad(
        lambda x: rl.grpo_loss(
            x, old, adv, mask, entropy=-x, entropy_coef=0.1, ref_logprobs=x + 50, kl_coef=0.1
        )[0]
    )(lp)
    assert np.all(np.isfinite(grad))
    np.testing.assert_array_equal(grad[1:], 0.0)
    empty = jnp.zeros(3, bool)
    loss, g = jax.value_and_grad(lambda x: rl.grpo_loss(x, old, adv, empty)[0])(lp)
    assert float(loss) == 0.0 and np.all(np.asarray(g) == 0.0)


def test_kl_and_entropy_terms():
    lp = jnp.array([-1.0, -2.0])
    mask = jnp.array([True, True])
    zero_adv = jnp.zeros(2)
    loss, metrics = rl.grpo_loss(lp, lp, zero_adv, mask, ref_logprobs=lp, kl_coef=1.0)
    assert float(loss) == 0.0 and float(metrics["kl"]) == 0.0
    ref = lp + jnp.array([0.5, -0.5])  # k3 = exp(q) - q - 1 per token
    loss, metrics = rl.grpo_loss(lp, lp, zero_adv, mask, ref_logprobs=ref, kl_coef=2.0)
    k3 = (np.exp(0.5) - 1.5 + np.exp(-0.5) - 0.5) / 2
    np.testing.assert_allclose(metrics["kl"], k3, rtol=1e-6)
    np.testing.assert_allclose(loss, 2.0 * k3, rtol=1e-6)
    loss, metrics = rl.grpo_loss(
        lp, lp, zero_adv, mask, entropy=jnp.array([1.0, 3.0]), entropy_coef=0.5
    )
    np.testing.assert_allclose(loss, -0.5 * 2.0)
    with pytest.raises(ValueError, match="entropy"):
        rl.grpo_loss(lp, lp, zero_adv, mask, entropy_coef=0.5)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"clip_eps": -0.1}, "clip_eps"),
        ({"kl_coef": -1.0}, "kl_coef"),
        ({"reward": "dense"}, "reward"),
        ({"b2": 1.0}, "b2"),
    ],
)
def test_config_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        rl.GRPOConfig(**kwargs)


@pytest.mark.parametrize(
    "name",
    [
        "learning_rate",
        "max_grad_norm",
        "clip_eps",
        "temperature",
        "std_eps",
        "weight_decay",
        "kl_coef",
        "entropy_coef",
    ],
)
def test_config_refuses_infinity(name):
    """``inf > 0`` holds, so the bounds alone let inf through: an infinite learning rate made
    every param +-inf on the first step."""
    with pytest.raises(ValueError, match=rf"GRPOConfig\.{name} must be a finite number.*inf"):
        rl.GRPOConfig(**{name: float("inf")})


def test_approx_kl_old_estimates_kl_from_the_behaviour_policy():
    """``approx_kl_old`` was ``exp(-q) + q - 1`` with ``q = logprobs - old_logprobs`` on tokens
    drawn from the behaviour policy: 0.418 here, neither KL(old||new) = 0.373 nor
    KL(new||old) = 0.422. The k3 estimator ``exp(q) - 1 - q`` has expectation KL(old||new)."""
    old = np.array([0.7, 0.2, 0.1])
    new = np.array([0.3, 0.3, 0.4])
    # Tokens drawn from ``old`` in exact proportion: 7 of token 0, 2 of token 1, 1 of token 2,
    # so the masked mean over them is the expectation under ``old``.
    tokens = np.repeat(np.arange(3), [7, 2, 1])
    _, metrics = rl.grpo_loss(
        jnp.log(new[tokens]), jnp.log(old[tokens]), jnp.zeros(10), jnp.ones(10, bool)
    )
    kl_old_new = float(np.sum(old * np.log(old / new)))
    np.testing.assert_allclose(float(metrics["approx_kl_old"]), kl_old_new, rtol=1e-5)
