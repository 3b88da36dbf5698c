"""Pools whose entries repeat tasks: one state slot per distinct task, shared by its entries.

A pool may hold a task several times (a level with 4 distinct tasks filling 100 entries, so
uniform draws over entries sample the levels by their share). A sampler that learns per task
should pool the evidence of all the copies: it keeps its per-task state at each task's
*representative* (its first entry), writes every copy's results there, and ranks
representatives only, so the tasks of one call are distinct. The state keeps its ``[N]``
shape (a checkpoint's per-task fields still follow the task keys); non-representative slots
stay at their initial values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class Entries(NamedTuple):
    """Host-side map from pool entries to their tasks' representatives.

    Attributes:
      rep: ``i32[N]`` the first entry holding the same task as each entry.
      is_rep: ``bool[N]`` the entry is its task's representative.
      num_distinct: number of distinct tasks.
    """

    rep: np.ndarray
    is_rep: np.ndarray
    num_distinct: int


def entries(entry_task: Sequence[int] | np.ndarray | None, n: int, where: str) -> Entries:
    """Checks ``entry_task`` (``int[N]``: entries with equal values hold the same task; None:
    every entry its own task) and returns its :class:`Entries`.

    Raises:
      ValueError: ``entry_task`` is not a 1-D integer array of length ``n``.
    """
    if entry_task is None:
        ids = np.arange(n, dtype=np.int32)
        return Entries(ids, np.ones(n, bool), n)
    labels = np.asarray(entry_task)
    if labels.shape != (n,) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(
            f"{where}: entry_task must be an integer array with one value per pool entry "
            f"(shape ({n},)), got dtype {labels.dtype} and shape {labels.shape}; entries with "
            "equal values hold the same task (e.g. curriculax.tasks.distinct_tasks(pool))"
        )
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rep = first[inverse.reshape(-1)].astype(np.int32)
    return Entries(rep, rep == np.arange(n), int(first.size))


def local_reps(ent: Entries, start: jax.Array, n_local: int) -> jax.Array:
    """``bool[n_local]`` which of this device's entries (``start`` on) are representatives
    (all of them when no task repeats)."""
    if ent.is_rep.all():
        return jnp.ones((n_local,), bool)
    return jax.lax.dynamic_slice_in_dim(jnp.asarray(ent.is_rep), start, n_local)
