"""What the sampler wrappers (``floor``, ``skip_zero_variance``) share."""

from __future__ import annotations

import jax

from curriculax._types import TaskDraw, TaskSampler


def check_inner(inner: object, wrapper: str) -> TaskSampler:
    """``inner`` if it is a TaskSampler, else a TypeError naming the wrapper."""
    if not isinstance(inner, TaskSampler):
        raise TypeError(
            f"{wrapper}: inner must be a TaskSampler (or, in a config, a table with a 'type'), "
            f"got {type(inner).__name__}"
        )
    return inner


def ids_of(drawn: object, wrapper: str) -> jax.Array:
    """The ``i32[num]`` ids an inner sampler drew; a sampler that hands out payloads
    (:class:`~curriculax.TaskDraw`) cannot be wrapped (its payloads cannot be replaced by
    pool tasks)."""
    if isinstance(drawn, TaskDraw):
        raise TypeError(
            f"{wrapper} wraps samplers that return pool task ids; the inner sampler returned "
            "a TaskDraw with payloads"
        )
    return drawn


def inner_metrics(inner: TaskSampler, state: object) -> dict[str, jax.Array]:
    """The inner sampler's metrics under ``inner/``."""
    return {f"inner/{k}": v for k, v in inner.metrics(state).items()}
