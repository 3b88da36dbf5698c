"""A gate that rejects groups whose trainable advantages all sit inside a range."""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import _counters
from curriculax._checks import number
from curriculax._types import AdmissionGate, GroupResults
from curriculax.gates._rate import admit_rate


class AdvantageRangeState(NamedTuple):
    """State of :func:`advantage_range`.

    Attributes:
      rejected: ``i32[]`` groups rejected so far (cumulative).
      admit_rate: ``f32[]`` share of the last batch's groups with a trainable token that
        this gate admitted (unchanged by a batch with none).
    """

    rejected: jax.Array
    admit_rate: jax.Array


def advantage_range(low: float = 0.0, high: float = 0.0) -> AdmissionGate:
    """Rejects a group iff every trainable-token advantage lies in ``[low, high]``.

    Trainable tokens are those with ``token_mask`` set in a valid rollout; bounds are
    inclusive. A group with no trainable token passes this gate (other checks decide).
    ``advantage_range(0.0, 0.0)`` is zero-advantage rejection: under group-relative credit a
    group whose rollouts all scored the same teaches nothing.

    Args:
      low: lower bound (inclusive).
      high: upper bound (inclusive), ``>= low``.

    Returns:
      An :class:`~curriculax.AdmissionGate`. Metrics: ``rejected`` (cumulative count) and
      ``admit_rate`` (last batch, over the groups that have a trainable token: a group with
      none passes without being judged).

    Example:
      >>> gate = advantage_range(0.0, 0.0)
      >>> state = gate.init(jax.random.key(0))
    """
    for name, value in (("low", low), ("high", high)):
        if math.isnan(number(value, name)):
            raise ValueError(f"{name} must not be NaN")
    # numpy scalars as Python numbers (an int stays an int: its float32 bound stays exact).
    low, high = (v.item() if isinstance(v, np.generic) else v for v in (low, high))
    if low > high:
        raise ValueError(f"advantage_range needs low <= high, got low={low} > high={high}")
    # Advantages are float32: the float32 bounds that decide `low <= adv <= high` exactly as
    # the given numbers would (rounding low up and high down, never widening the range).
    low32, high32 = _f32_bound(low, up=True), _f32_bound(high, up=False)

    def init(key: jax.Array) -> AdvantageRangeState:
        del key
        return AdvantageRangeState(_counters.zero(), jnp.ones((), jnp.float32))

    def admit(state: AdvantageRangeState, results: GroupResults):
        trainable = results.token_mask.astype(bool) & results.valid.astype(bool)[:, :, None]
        adv = results.advantages
        inside = (adv >= low32) & (adv <= high32)
        all_inside = jnp.all(inside | ~trainable, axis=(1, 2))
        has_tokens = jnp.any(trainable, axis=(1, 2))
        admitted = ~(all_inside & has_tokens)
        rejected = jnp.sum(~admitted, dtype=jnp.int32)
        # A group with no trainable token (failed, or padding) passes without a judgement.
        rate = admit_rate(admitted, has_tokens, state.admit_rate)
        return admitted, AdvantageRangeState(_counters.add(state.rejected, rejected), rate)

    def metrics(state: AdvantageRangeState) -> dict[str, jax.Array]:
        return {
            "rejected": state.rejected.astype(jnp.float32),
            "admit_rate": state.admit_rate,
        }

    return AdmissionGate(init, admit, metrics)


def _f32_bound(x: float, *, up: bool) -> np.float32:
    """The float32 nearest ``x`` on the side ``up`` (the least float32 >= ``x``) or down. A
    bound that would be subnormal on the side away from zero becomes the smallest normal:
    XLA on CPU reads subnormals as zero, which would put 0 inside ``[1e-40, ...]``."""
    with np.errstate(over="ignore"):
        v = np.float32(x)
    if (float(v) < x) if up else (float(v) > x):
        v = np.nextafter(v, np.float32(np.inf if up else -np.inf))
    tiny = np.finfo(np.float32).tiny
    if (0 < v < tiny) if up else (-tiny < v < 0):
        v = np.float32(tiny if up else -tiny)
    return v
