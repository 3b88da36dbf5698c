"""Argument checks shared by the library (run on the host, at construction or trace time)."""

from __future__ import annotations

import operator


def int_at_least(value: object, name: str, minimum: int = 1) -> int:
    """``value`` as a Python int ``>= minimum``; a TypeError or ValueError naming ``name`` and
    the offending value otherwise (bools are not ints here)."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int >= {minimum}, got the bool {value!r}")
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int >= {minimum}, got {value!r}") from None
    if n < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {n}")
    return n


def check_num_tasks(num_tasks: object, name: str = "num_tasks") -> int:
    """Returns ``num_tasks`` as an int >= 1 below the int32 id range, or raises."""
    n = int_at_least(num_tasks, name)
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
