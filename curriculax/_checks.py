"""Argument checks shared by the library (run on the host, at construction or trace time)."""

from __future__ import annotations

import operator

import numpy as np


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


def number(value: object, name: str) -> float:
    """``value`` as a float; a TypeError naming ``name`` unless it is an int or a float, numpy's
    included (bools are not numbers here)."""
    if isinstance(value, bool | np.bool_) or not isinstance(
        value, int | float | np.integer | np.floating
    ):
        raise TypeError(f"{name} must be a number, got {value!r}")
    try:
        return float(value)
    except OverflowError:  # an int past the float range
        raise ValueError(f"{name} must be a number a float holds, got {value!r}") from None


def unit_interval(value: object, name: str, *, open_low: bool = False) -> float:
    """``value`` as a float in [0, 1] (``open_low``: in (0, 1]); a TypeError or ValueError
    naming ``name`` and the value otherwise (NaN is refused)."""
    x = number(value, name)
    if not ((0.0 < x <= 1.0) if open_low else (0.0 <= x <= 1.0)):
        raise ValueError(f"{name} must lie in {'(0, 1]' if open_low else '[0, 1]'}, got {x}")
    return x


def check_seed(seed: object, name: str = "seed", *, bits: int = 64) -> int:
    """``seed`` as a Python int that ``jax.random.key`` takes (a signed 64-bit int); with
    ``bits=32``, one that a 32-bit seed word holds whole (an int in ``[0, 2**32)``: a sampler
    that keeps 32 bits of its seed would draw for a larger or negative seed what it draws for
    another one). A TypeError or ValueError naming ``name`` otherwise (bools are not ints
    here)."""
    if bits == 32:
        n = int_at_least(seed, name, 0)
        if n >= 2**32:
            raise ValueError(
                f"{name} must be below 2**32 (a 32-bit seed word; a larger seed would repeat "
                f"the draws of seed {n % 2**32}), got {n}"
            )
        return n
    n = int_at_least(seed, name, -(2**63))
    if n >= 2**63:
        raise ValueError(f"{name} must fit in a signed 64-bit int, got {n}")
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


def repeated(values) -> list:
    """The values that occur more than once in ``values``, sorted (each listed once)."""
    seen: set = set()
    twice: set = set()
    for v in values:
        (twice if v in seen else seen).add(v)
    return sorted(twice)


def check_unique(values, what: str) -> None:
    """Raises ``ValueError("<what> must be unique, duplicated: [...]")`` naming each repeat."""
    dups = repeated(values)
    if dups:
        raise ValueError(f"{what} must be unique, duplicated: {dups}")


def check_unique_keys(
    keys, where: str, fix: str = "Remove duplicate tasks or pass distinct keys."
) -> None:
    """Raises a ValueError naming duplicated task keys and the rows that hold them.

    Args:
      keys: ``u32[N]`` task keys (host array).
      where: what holds them, for the message (``"env 'math'"``, ``"the pool"``).
      fix: what to do about it, appended to the message.
    """
    keys = np.asarray(keys)
    uniq, counts = np.unique(keys, return_counts=True)
    if np.all(counts == 1):
        return
    dups = uniq[counts > 1]
    shown = [f"key {int(k)} at rows {np.flatnonzero(keys == k)[:4].tolist()}" for k in dups[:5]]
    more = f" (and {len(dups) - 5} more)" if len(dups) > 5 else ""
    raise ValueError(
        f"{where}: task keys must be unique within a pool, {len(dups)} of {keys.size} appear "
        f"more than once; duplicated: {'; '.join(shown)}{more}. {fix}"
    )
