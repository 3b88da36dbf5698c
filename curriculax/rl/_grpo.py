"""GRPO: group-relative advantages and the clipped token-level policy-gradient loss.

Model-agnostic: these functions see rewards, log-probabilities and masks, never the network.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from curriculax.credit import grpo_advantages

__all__ = ["REWARDS", "GRPOConfig", "grpo_advantages", "grpo_loss"]

Array = jax.Array

REWARDS = ("exact", "partial")


@dataclasses.dataclass(frozen=True)
class GRPOConfig:
    """Hyperparameters of the GRPO solver.

    Attributes:
      learning_rate: AdamW step size.
      b1: AdamW first-moment decay.
      b2: AdamW second-moment decay. 0.99 rather than 0.999: after many steps without
        reward (zero gradients), the first informative gradient moves each parameter by
        ``(1 - b1) / sqrt(1 - b2)`` learning rates: 1 with 0.99, 3.2 with 0.999.
      weight_decay: AdamW decoupled weight decay.
      max_grad_norm: gradients are clipped to this global norm before AdamW.
      clip_eps: PPO ratio clip: the ratio is clipped to ``[1 - clip_eps, 1 + clip_eps]``.
      kl_coef: weight of the KL penalty to a reference policy (a snapshot of the initial params,
        kept in the solver state only when this is > 0). 0 turns it off.
      entropy_coef: weight of the entropy bonus (subtracted from the loss). 0 turns it off.
        From a random policy with exact-match reward, a few lucky successes can collapse the
        policy onto one answer (every group then identical, no advantage left); a bonus of
        ~0.003 (token-mean entropy, in nats) keeps it exploring.
      temperature: sampling temperature; training log-probabilities use the same one.
      scale_by_std: divide centred group rewards by the group's standard deviation.
      std_eps: added to the standard deviation before dividing.
      reward: ``"exact"`` (1 for an exact match, EOS included, else 0) or ``"partial"`` (the
        fraction of answer positions right; see :func:`curriculax.tasks.verify`).

    Example:
      >>> cfg = GRPOConfig(learning_rate=2e-3, entropy_coef=1e-3)
    """

    learning_rate: float = 2e-3
    b1: float = 0.9
    b2: float = 0.99
    weight_decay: float = 1e-4
    max_grad_norm: float = 1.0
    clip_eps: float = 0.2
    kl_coef: float = 0.0
    entropy_coef: float = 0.0
    temperature: float = 1.0
    scale_by_std: bool = True
    std_eps: float = 1e-6
    reward: str = "exact"

    def __post_init__(self):
        # math.isfinite as well as the bound: inf passes "> 0", and an infinite learning rate
        # (or temperature, or coefficient) turns the params into inf/NaN on the first step.
        positive = ("learning_rate", "max_grad_norm", "clip_eps", "temperature", "std_eps")
        for name in positive:
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"GRPOConfig.{name} must be a finite number > 0, got {value!r}.")
        for name in ("weight_decay", "kl_coef", "entropy_coef"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(
                    f"GRPOConfig.{name} must be a finite number >= 0 (0 turns it off), got "
                    f"{value!r}."
                )
        for name in ("b1", "b2"):
            value = getattr(self, name)
            if not 0 <= value < 1:
                raise ValueError(f"GRPOConfig.{name} must be in [0, 1), got {value!r}.")
        if self.reward not in REWARDS:
            raise ValueError(f"GRPOConfig.reward must be one of {REWARDS}, got {self.reward!r}.")


def _masked_mean(x: Array, mask: Array, count: Array) -> Array:
    return jnp.sum(jnp.where(mask, x, 0.0)) / count


def grpo_loss(
    logprobs: Array,
    old_logprobs: Array,
    advantages: Array,
    mask: Array,
    *,
    clip_eps: float = 0.2,
    entropy: Array | None = None,
    entropy_coef: float = 0.0,
    ref_logprobs: Array | None = None,
    kl_coef: float = 0.0,
) -> tuple[Array, dict[str, Array]]:
    """Token-level clipped policy-gradient loss (PPO clip on the GRPO advantage).

    Per masked token: ``-min(r * A, clip(r, 1 - eps, 1 + eps) * A)`` with
    ``r = exp(logprobs - old_logprobs)``, averaged over every masked token of the batch (each
    token weighs the same, so a long completion counts more than a short one). Optional terms:
    ``+ kl_coef * KL`` with the non-negative ``k3`` estimator ``exp(q) - q - 1``,
    ``q = ref_logprobs - logprobs``, and ``- entropy_coef * entropy``, both masked means.

    Unmasked positions contribute nothing, and no gradient: log-ratios are zeroed before
    ``exp``, so padded rollouts with arbitrary contents never produce inf or NaN.

    Args:
      logprobs: ``f32[...]`` per-token log-probabilities under the current policy.
      old_logprobs: ``f32[...]`` the behaviour policy's, stored when sampling.
      advantages: ``f32[...]`` per-token advantages.
      mask: ``bool[...]`` tokens that train.
      clip_eps: ratio clip.
      entropy: ``f32[...]`` policy entropy per token (needed when ``entropy_coef > 0``).
      entropy_coef: entropy bonus weight.
      ref_logprobs: ``f32[...]`` reference policy log-probabilities (needed when
        ``kl_coef > 0``).
      kl_coef: KL penalty weight.

    Returns:
      ``(loss f32[], metrics)`` with metrics ``pg_loss``, ``entropy``, ``kl``, ``clip_frac``,
      ``ratio``, ``approx_kl_old`` and ``tokens``. ``approx_kl_old`` is the masked mean of the
      ``k3`` estimator ``exp(q) - 1 - q``, ``q = logprobs - old_logprobs``: on tokens drawn
      from the behaviour policy, an unbiased, non-negative estimate of the per-token
      ``KL(old || new)`` (behaviour policy first) of the next-token distributions.
    """
    mask = jnp.asarray(mask, bool)
    count = jnp.maximum(jnp.sum(mask), 1).astype(jnp.float32)
    log_ratio = jnp.where(mask, logprobs - old_logprobs, 0.0)
    ratio = jnp.exp(log_ratio)
    advantages = jnp.where(mask, advantages, 0.0)
    clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
    per_token = -jnp.minimum(ratio * advantages, clipped * advantages)
    pg_loss = _masked_mean(per_token, mask, count)
    loss = pg_loss
    metrics = {
        "pg_loss": pg_loss,
        "clip_frac": _masked_mean(
            (jnp.abs(ratio - 1.0) > clip_eps).astype(jnp.float32), mask, count
        ),
        "ratio": _masked_mean(ratio, mask, count),
        # k3 of KL(old || new) on tokens drawn from old: E_old[exp(q) - 1 - q], q = log(new/old).
        "approx_kl_old": _masked_mean(jnp.exp(log_ratio) - 1.0 - log_ratio, mask, count),
        "tokens": jnp.sum(mask).astype(jnp.float32),
    }
    if entropy is not None:
        metrics["entropy"] = _masked_mean(entropy, mask, count)
        loss = loss - entropy_coef * metrics["entropy"]
    elif entropy_coef > 0:
        raise ValueError("grpo_loss: entropy_coef > 0 needs the per-token entropy.")
    if ref_logprobs is not None:
        q = jnp.where(mask, ref_logprobs - logprobs, 0.0)
        metrics["kl"] = _masked_mean(jnp.exp(q) - q - 1.0, mask, count)
        loss = loss + kl_coef * metrics["kl"]
    elif kl_coef > 0:
        raise ValueError("grpo_loss: kl_coef > 0 needs the reference log-probabilities.")
    return loss, metrics
