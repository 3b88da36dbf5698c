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
# another task's key (distinct content, same hash). For uniform hashes a pool of N tasks holds
# about N**2 / 2**33 colliding pairs; the symbol families' structured contents collide about 4x
# as often (measured: 467 pairs over a whole level of 2**20 reversals against 128 expected).
_SPARES_PER_LEVEL = 8


def _more_spares(num: int, total: int) -> int:
    """Candidates drawn for a level beyond its ``_SPARES_PER_LEVEL``, from a key of their own:
    0 where the level's expected collisions (``num`` tasks against a pool of ``total``, at 4x
    the uniform rate) stay below 1/4, so smaller pools are drawn exactly as before; otherwise
    4x that expectation plus ``_SPARES_PER_LEVEL``."""
    expected = 4 * num * total / 2**32
    return 0 if expected < 0.25 else math.ceil(4 * expected) + _SPARES_PER_LEVEL


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
    # Sorting by (segment, random word) shuffles within each segment; ties (~2**-32) keep order
    # (lax.sort is stable by default; said explicitly, as the tie order is relied on).
    _, _, shuffled = jax.lax.sort(
        (jnp.asarray(segment), bits, jnp.asarray(local)), num_keys=2, is_stable=True
    )
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
    """``bool[C]``: the key equals the key of a candidate with a smaller priority value, or
    of an earlier candidate with the same priority (the first of equals is kept)."""
    index = jnp.arange(keys.shape[0], dtype=jnp.int32)
    # Stable (lax.sort's default, said explicitly): among equal (key, priority) the earlier
    # candidate sorts first and is kept.
    sorted_keys, _, sorted_index = jax.lax.sort(
        (keys, jnp.asarray(priority, jnp.int32), index), num_keys=2, is_stable=True
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
    ``radices``), and their keys are unique too: spare tasks are drawn per level (8, plus, in
    pools large enough to expect a collision, four times the expected count, sized at four
    times the uniform rate, which the symbol families' contents reach), and a task whose key
    collides with an earlier task's key is replaced by a spare. Only when a level runs out of
    spares (or has a collision in a space that is fully enumerated) could a duplicate key
    remain; :func:`~curriculax.tasks.make_pools` checks for that.

    Args:
      key: PRNG key.
      spec: a task family spec, e.g. :class:`~curriculax.tasks.ReversalSpec`.
      num_per_level: tasks per level (static).

    Returns:
      A :class:`TaskSet` with ``sum(num_tasks_per_level(spec, num_per_level))`` tasks, prompts
      of width ``spec.prompt_width`` and answers of width ``spec.answer_width``.

    Example:
      >>> from curriculax.tasks import ReversalSpec
      >>> pool = generate(jax.random.key(0), ReversalSpec(num_levels=2), 2)
      >>> pool.prompt.shape, pool.answer.shape, pool.level.tolist()
      ((4, 5), (4, 3), [0, 0, 1, 1])
    """
    if num_per_level < 1:
        raise ValueError(f"num_per_level must be >= 1, got {num_per_level!r}.")
    plan = []
    for level in range(spec.num_levels):
        radices = spec.radices(level)
        space = math.prod(radices)
        num = min(num_per_level, space)
        plan.append((level, radices, num, min(num + _SPARES_PER_LEVEL, space), space))
    total = sum(num for _, _, num, _, _ in plan)
    more = [
        (level, radices, min(_more_spares(num, total), space - c))
        for level, radices, num, c, space in plan
    ]
    more = [(level, radices, m) for level, radices, m in more if m > 0]
    candidates = _candidates(key, spec, [(level, radices, c) for level, radices, _, c, _ in plan])
    # Every level's first choices outrank its spares, which outrank its further spares (drawn
    # on their own key, after the others: the pool is unchanged wherever the first spares
    # suffice); among equals, earlier levels win.
    priority = [(np.arange(c) >= num).astype(np.int32) for _, _, num, c, _ in plan]
    if more:
        extra = _candidates(jax.random.fold_in(key, 1), spec, more)
        candidates = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), candidates, extra)
        priority += [np.full((m,), 2, np.int32) for _, _, m in more]
    keys = content_key(candidates.prompt, candidates.answer)
    candidates = candidates._replace(key=keys)
    collides = _collides_with_earlier(keys, np.concatenate(priority)).astype(jnp.int32)
    # One sort by (level, collides, index): each level's segment keeps its place, and inside it
    # the non-colliding candidates come first, in their random order (further spares last).
    index = jnp.arange(keys.shape[0], dtype=jnp.int32)
    _, _, _, order = jax.lax.sort((candidates.level, collides, index, index), num_keys=3)
    extra_of = {level: m for level, _, m in more}
    sizes = [c + extra_of.get(level, 0) for level, _, _, c, _ in plan]
    offsets = np.cumsum([0, *sizes])
    chosen = [order[start : start + num] for start, (_, _, num, _, _) in zip(offsets, plan)]
    return jax.tree.map(lambda x: x[jnp.concatenate(chosen)], candidates)


def _candidates(key: Array, spec: TaskFamily, plan: list[tuple[int, tuple[int, ...], int]]):
    """A :class:`TaskSet` (keys 0) of ``count`` distinct tasks of each ``(level, radices,
    count)`` of ``plan``, in plan order, padded to the family's widths.

    One draw of random words and one sort for all of them: on CPU, compile time grows with
    every threefry and sort in the program, and per-level ones cost seconds.
    """
    prefix_sizes = [_prefix_len(radices, c)[1] for _, radices, c in plan]
    suffix_sizes = [c * (len(radices) - _prefix_len(radices, c)[0]) for _, radices, c in plan]
    bits = jax.random.bits(key, (sum(prefix_sizes) + sum(suffix_sizes),), jnp.uint32)
    permutations = _segmented_permutations(bits[: sum(prefix_sizes)], prefix_sizes)
    suffix_offsets = sum(prefix_sizes) + np.cumsum([0, *suffix_sizes])
    parts = []
    for (level, radices, count), permutation, start, stop in zip(
        plan, permutations, suffix_offsets, suffix_offsets[1:]
    ):
        digits = _distinct_digits(permutation, bits[start:stop], radices, count)
        prompt, answer, answer_len = spec.encode(level, digits)
        part = TaskSet(
            prompt=prompt,
            prompt_len=jnp.full((count,), prompt.shape[1], jnp.int32),
            answer=answer,
            answer_len=answer_len,
            level=jnp.full((count,), level, jnp.int32),
            key=jnp.zeros((count,), jnp.uint32),
        )
        parts.append(
            pad_tasks(part, prompt_width=spec.prompt_width, answer_width=spec.answer_width)
        )
    return jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=0), *parts)
