"""Drawing pools of distinct tasks from any :class:`~curriculax.tasks.TaskFamily`."""

from __future__ import annotations

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np

from curriculax.tasks._family import TaskFamily
from curriculax.tasks._keys import content_key
from curriculax.tasks._taskset import TaskSet, pad_tasks

Array = jax.Array

# Extra candidates drawn per level, used only to replace tasks whose 32-bit key collides with
# another task's key (distinct content, same hash: about N**2 / 2**33 expected pairs).
_SPARES_PER_LEVEL = 8


def num_tasks_per_level(spec: TaskFamily, num_per_level: int) -> tuple[int, ...]:
    """Tasks per level in a pool from ``generate(key, spec, num_per_level)`` (static ints).

    A level whose task space is smaller than ``num_per_level`` contributes all of its tasks.
    """
    return tuple(
        min(num_per_level, math.prod(spec.radices(level))) for level in range(spec.num_levels)
    )


def _prefix_len(radices: tuple[int, ...], num: int) -> tuple[int, int]:
    """Shortest prefix of the digits whose space holds at least ``num`` values, and its size."""
    prefix_len, prefix_space = 0, 1
    while prefix_space < num:
        prefix_space *= radices[prefix_len]
        prefix_len += 1
    return prefix_len, prefix_space


def _segmented_permutations(bits: Array, sizes: list[int]) -> list[Array]:
    """One uniform random permutation of ``range(size)`` per size, from one sort of ``bits``."""
    segment = np.repeat(np.arange(len(sizes), dtype=np.int32), sizes)
    local = np.concatenate([np.arange(size, dtype=np.int32) for size in sizes])
    # Sorting by (segment, random word) shuffles within each segment; ties (~2**-32) keep order.
    _, _, shuffled = jax.lax.sort((jnp.asarray(segment), bits, jnp.asarray(local)), num_keys=2)
    offsets = np.cumsum([0, *sizes])
    return [shuffled[start:stop] for start, stop in itertools.pairwise(offsets)]


def _distinct_digits(permutation: Array, bits: Array, radices: tuple[int, ...], num: int) -> Array:
    """Draws ``num`` distinct digit tuples, uniformly, without rejection.

    The leading digits (the shortest prefix whose space holds at least ``num`` values, so at
    most ``num * max(radices)`` values) are a random permutation of that prefix space cut to
    ``num``; the remaining digits are independent uniform draws. Distinct prefixes make distinct
    tuples, and every tuple is equally likely (up to the ``2**-28`` bias of ``u32 % radix``).

    Args:
      permutation: ``i32[prefix_space]`` a uniform permutation of the prefix space.
      bits: ``u32[num * (len(radices) - prefix_len)]`` random words for the other digits.
      radices: radix of each digit.
      num: tuples to draw, at most ``prod(radices)``.

    Returns:
      ``i32[num, len(radices)]``.
    """
    prefix_len, _ = _prefix_len(radices, num)
    ids = permutation[:num]
    prefix_digits = []
    for radix in reversed(radices[:prefix_len]):
        prefix_digits.append(ids % radix)
        ids = ids // radix
    suffix_radices = np.asarray(radices[prefix_len:], np.uint32)
    suffix = (bits.reshape(num, suffix_radices.size) % suffix_radices).astype(jnp.int32)
    return jnp.concatenate([*(d[:, None] for d in prefix_digits[::-1]), suffix], axis=1)


def _collides_with_earlier(keys: Array, priority: np.ndarray) -> Array:
    """``bool[C]``: the key equals the key of a candidate with a smaller priority value."""
    index = jnp.arange(keys.shape[0], dtype=jnp.int32)
    sorted_keys, _, sorted_index = jax.lax.sort(
        (keys, jnp.asarray(priority, jnp.int32), index), num_keys=2
    )
    repeated = jnp.concatenate([jnp.zeros((1,), bool), sorted_keys[1:] == sorted_keys[:-1]])
    return jnp.zeros(keys.shape, bool).at[sorted_index].set(repeated)


@functools.partial(jax.jit, static_argnums=(1, 2))
def generate(key: Array, spec: TaskFamily, num_per_level: int) -> TaskSet:
    """Draws a pool of distinct tasks, ``num_per_level`` per level, in level order.

    Pure JAX, jitted with ``spec`` (hashable) and ``num_per_level`` static, and usable inside
    other jitted functions. Levels whose whole task
    space is smaller than ``num_per_level`` contribute every task they have (see
    :func:`num_tasks_per_level`); within a level tasks come in random order.

    Uniqueness: tasks are distinct by construction (distinct digit tuples, see the family's
    ``radices``), and their keys are unique too: a few spare tasks per level are drawn, and a
    task whose key collides with an earlier task's key is replaced by a spare. Only when a level
    runs out of spares (it would need more than 8 hash collisions in one level, or one in a level
    whose space is fully enumerated) could a duplicate key remain;
    :func:`~curriculax.tasks.make_pools` checks for that.

    Args:
      key: PRNG key.
      spec: a task family spec, e.g. :class:`~curriculax.tasks.ReversalSpec`.
      num_per_level: tasks per level (static).

    Returns:
      A :class:`TaskSet` with ``sum(num_tasks_per_level(spec, num_per_level))`` tasks, prompts
      of width ``spec.prompt_width`` and answers of width ``spec.answer_width``.

    Example:
      >>> pool = generate(jax.random.key(0), ReversalSpec(), 64)
    """
    if num_per_level < 1:
        raise ValueError(f"num_per_level must be >= 1, got {num_per_level!r}.")
    plan = []
    for level in range(spec.num_levels):
        radices = spec.radices(level)
        space = math.prod(radices)
        num = min(num_per_level, space)
        plan.append((level, radices, num, min(num + _SPARES_PER_LEVEL, space)))
    # One draw of random words and one sort for the whole pool: on CPU, compile time grows with
    # every threefry and sort in the program, and per-level ones cost seconds.
    prefix_sizes = [_prefix_len(radices, c)[1] for _, radices, _, c in plan]
    suffix_sizes = [c * (len(radices) - _prefix_len(radices, c)[0]) for _, radices, _, c in plan]
    bits = jax.random.bits(key, (sum(prefix_sizes) + sum(suffix_sizes),), jnp.uint32)
    permutations = _segmented_permutations(bits[: sum(prefix_sizes)], prefix_sizes)
    suffix_offsets = sum(prefix_sizes) + np.cumsum([0, *suffix_sizes])

    parts, spare_flags, level_sizes = [], [], []
    for (level, radices, num, num_candidates), permutation, start, stop in zip(
        plan, permutations, suffix_offsets, suffix_offsets[1:]
    ):
        digits = _distinct_digits(permutation, bits[start:stop], radices, num_candidates)
        prompt, answer, answer_len = spec.encode(level, digits)
        prompt_len = jnp.full((num_candidates,), prompt.shape[1], jnp.int32)
        part = TaskSet(
            prompt=prompt,
            prompt_len=prompt_len,
            answer=answer,
            answer_len=answer_len,
            level=jnp.full((num_candidates,), level, jnp.int32),
            key=jnp.zeros((num_candidates,), jnp.uint32),
        )
        parts.append(
            pad_tasks(part, prompt_width=spec.prompt_width, answer_width=spec.answer_width)
        )
        spare_flags.append(np.arange(num_candidates) >= num)
        level_sizes.append((num_candidates, num))
    candidates = jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=0), *parts)
    keys = content_key(candidates.prompt, candidates.answer)
    candidates = candidates._replace(key=keys)

    # Every level's first choices outrank every spare; among equals, earlier levels win.
    priority = np.concatenate(spare_flags).astype(np.int32)
    collides = _collides_with_earlier(keys, priority).astype(jnp.int32)
    # One sort by (level, collides, index): each level's segment keeps its place, and inside it
    # the non-colliding candidates come first, in their random order.
    index = jnp.arange(keys.shape[0], dtype=jnp.int32)
    _, _, _, order = jax.lax.sort((candidates.level, collides, index, index), num_keys=3)
    offsets = np.cumsum([0] + [num_candidates for num_candidates, _ in level_sizes])
    chosen = [order[start : start + num] for start, (_, num) in zip(offsets, level_sizes)]
    return jax.tree.map(lambda x: x[jnp.concatenate(chosen)], candidates)
