"""Helpers for per-task state that may be split along a device axis (inside ``shard_map``).

A sampler built with ``axis_name`` runs under ``shard_map`` with its per-task arrays split
along that axis: each device holds ``n_local`` consecutive tasks starting at ``offset``.
Built without one, or traced where that axis is not bound (a plain ``jit`` on one device),
the same code runs unsplit: offset 0, no collectives. So one sampler serves 1 and N devices.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def bound(axis_name: str | None) -> str | None:
    """``axis_name`` if it is bound where this is traced (under ``shard_map``), else None."""
    if axis_name is None:
        return None
    try:
        jax.lax.axis_index(axis_name)
    except NameError:
        return None
    return axis_name


def check_split(n_local: int, n: int, axis_name: str | None, who: str) -> None:
    """Refuses per-task state split over devices (``n_local < n`` tasks here) where ``who``
    runs unsplit: built without ``axis_name``, or with one not bound here (not the axis the
    state is split along). Unchecked, each device would take its slice for the whole pool:
    draws only from the first ``n_local`` ids, results of other tasks dropped."""
    if n_local == n or bound(axis_name) is not None:
        return
    how = (
        "without axis_name"
        if axis_name is None
        else f"with axis_name={axis_name!r}, which is not the axis it is split along"
    )
    raise ValueError(
        f"{who}: its per-task state holds {n_local} of the pool's {n} tasks here (split over "
        f"devices), but it was built {how}; build it (and any inner sampler or per-task gate) "
        "with the engine's mesh axis, e.g. axis_name='data', or use Env(..., shard_tasks=False)"
    )


def offset(axis_name: str | None, n_local: int) -> jax.Array:
    """First global task id held by this device (``i32[]``)."""
    if axis_name is None:
        return jnp.zeros((), jnp.int32)
    return (jax.lax.axis_index(axis_name) * n_local).astype(jnp.int32)


def index(axis_name: str | None) -> jax.Array:
    """This device's position along the axis (0 when unsplit)."""
    if axis_name is None:
        return jnp.zeros((), jnp.int32)
    return jax.lax.axis_index(axis_name).astype(jnp.int32)


def gather(x: jax.Array, axis_name: str | None) -> jax.Array:
    """``[D, ...]``: every device's ``x`` (``x[None]`` when unsplit)."""
    if axis_name is None:
        return x[None]
    return jax.lax.all_gather(x, axis_name)


def psum(x: jax.Array, axis_name: str | None) -> jax.Array:
    """Sum over devices (identity when unsplit)."""
    if axis_name is None:
        return x
    return jax.lax.psum(x, axis_name)


def to_local(ids: jax.Array, start: jax.Array, n_local: int) -> jax.Array:
    """Local slot of global ``ids``; ``n_local`` (out of range, for ``mode="drop"``) for ids
    held elsewhere or negative."""
    local = ids - start
    return jnp.where((ids >= 0) & (local >= 0) & (local < n_local), local, n_local).astype(
        jnp.int32
    )
