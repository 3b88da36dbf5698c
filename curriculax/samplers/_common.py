"""Argument checks shared by the built-in samplers (run on the host, at trace time)."""

from __future__ import annotations

import operator


def check_num_tasks(num_tasks: object, name: str = "num_tasks") -> int:
    """Returns ``num_tasks`` as an int >= 1, or raises a ValueError that says what was wrong."""
    if isinstance(num_tasks, bool):
        raise TypeError(f"{name} must be an int >= 1, got the bool {num_tasks!r}")
    try:
        n = operator.index(num_tasks)
    except TypeError:
        raise TypeError(f"{name} must be an int >= 1, got {num_tasks!r}") from None
    if n < 1:
        raise ValueError(f"{name} must be >= 1, got {n}")
    if n >= 2**31 - 2**24:
        raise ValueError(f"{name} must be below 2**31 - 2**24 (int32 task ids), got {n}")
    return n


def check_num(num: object) -> int:
    """``sample``'s ``num`` must be a static Python int >= 0 (it fixes an output shape)."""
    if isinstance(num, bool):
        raise TypeError(f"num must be a static int >= 0, got the bool {num!r}")
    try:
        n = operator.index(num)
    except TypeError:
        raise TypeError(
            f"num must be a static Python int >= 0 (it fixes the output shape), got {num!r}; "
            "mark it static when you jit, e.g. jax.jit(sampler.sample, static_argnums=2)"
        ) from None
    if n < 0:
        raise ValueError(f"num must be >= 0, got {n}")
    return n
