"""Agreement between the processes of a multi-host run; each call is a no-op in one process.

Every process must make the same calls in the same order: each is a collective.
"""

from __future__ import annotations

import jax
import numpy as np


def sync(name: str) -> None:
    """Waits until every process reaches the barrier ``name``."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def agree(flag: bool) -> bool:
    """Process 0's verdict, shared with every process (one small broadcast on several hosts)."""
    if jax.process_count() == 1:
        return flag
    from jax.experimental import multihost_utils

    verdict = multihost_utils.broadcast_one_to_all(np.int32(flag))
    return bool(np.asarray(verdict))


def largest(code: int) -> int:
    """The largest of every process's ``code`` (``any`` for flags 0/1)."""
    if jax.process_count() == 1:
        return code
    from jax.experimental import multihost_utils

    return int(np.max(multihost_utils.process_allgather(np.int32(code))))
