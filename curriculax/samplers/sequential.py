"""The default sampler: every task once per epoch, in an epoch-shuffled or source order."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from curriculax import _counters, _permute
from curriculax._checks import check_num, check_num_tasks, check_seed
from curriculax._types import GroupResults, TaskSampler

_STREAM = 2**31 - 1  # ids of the infinite stream: 0 .. 2^31 - 2, then 0 again


class SequentialState(NamedTuple):
    """The source position: the whole checkpoint of a sequential sampler.

    Attributes:
      epoch: ``i32[]`` completed passes over the pool (for an infinite stream: times its ids
        started again from 0, after ``2^31 - 2``).
      cursor: ``i32[]`` tasks handed out in the current epoch (the stream position when
        infinite).
    """

    epoch: jax.Array
    cursor: jax.Array


def sequential(num_tasks: int | None, *, shuffle: bool = True, seed: int = 0) -> TaskSampler:
    """Hands out every task exactly once per epoch.

    The order of epoch ``e`` is a pure function of ``(seed, e)``: a keyed permutation
    evaluated per position in O(1), so ``sample(num)`` costs O(num) whatever the pool size,
    and a state rebuilt from just ``(epoch, cursor)`` continues with exactly the same tasks.

    Args:
      num_tasks: pool size ``N``; ``None`` for an infinite stream of ids 0, 1, 2, ... (for a
        procedural generator; int32 ids, so after ``2^31 - 2`` the stream starts again from 0
        and ``epoch`` counts it).
      shuffle: shuffle each epoch (``False``: source order 0..N-1 every epoch).
      seed: seed of the epoch orders, an int in ``[0, 2**32)``.

    Returns:
      A :class:`~curriculax.TaskSampler`. It ignores the keys it is given and observes nothing.
      Metrics: ``epoch``, ``cursor``.

    Example:
      >>> s = sequential(3, shuffle=False)
      >>> ids, state = s.sample(s.init(jax.random.key(0)), jax.random.key(1), 4)
      >>> ids.tolist(), int(state.epoch), int(state.cursor)
      ([0, 1, 2, 0], 1, 1)
    """
    n = None if num_tasks is None else check_num_tasks(num_tasks)
    seed = check_seed(seed, bits=32)
    if not isinstance(shuffle, bool):  # the string "False" would shuffle
        raise TypeError(f"shuffle must be a bool (true or false in TOML), got {shuffle!r}")
    seed_word = _permute.seed_bits(seed)
    # Positions are computed in uint32: cursor < period <= 2^31 - 1 and num < 2^31 never wrap.
    period = _STREAM if n is None else n

    def init(key: jax.Array) -> SequentialState:
        del key
        return SequentialState(_counters.zero(), _counters.zero())

    def sample(state: SequentialState, key: jax.Array, num: int):
        del key
        num = check_num(num)
        offsets = jnp.arange(num, dtype=jnp.int32)
        # A position rebuilt from plain ints (a log, JSON metadata) is as good as the state.
        state = SequentialState(
            jnp.asarray(state.epoch, jnp.int32), jnp.asarray(state.cursor, jnp.int32)
        )
        cursor = state.cursor.astype(jnp.uint32)
        position = cursor + offsets.astype(jnp.uint32)
        within = (position % period).astype(jnp.int32)
        if shuffle and n is not None:
            epochs = state.epoch + (position // period).astype(jnp.int32)
            ids = _permute.permute(within, n, _permute.round_keys(seed_word, epochs))
        else:
            ids = within
        end = cursor + jnp.uint32(num)
        new = SequentialState(
            _counters.add(state.epoch, (end // period).astype(jnp.int32)),
            (end % period).astype(jnp.int32),
        )
        return ids.astype(jnp.int32), new

    def observe(state: SequentialState, results: GroupResults) -> SequentialState:
        del results
        return state

    def metrics(state: SequentialState) -> dict[str, jax.Array]:
        return {
            "epoch": state.epoch.astype(jnp.float32),
            "cursor": state.cursor.astype(jnp.float32),
        }

    return TaskSampler(init, sample, observe, metrics, num_tasks=n)
