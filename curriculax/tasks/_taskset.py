"""The task record shared by every family, and helpers to index, pad and join task sets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax.tasks._vocab import PAD

Array = jax.Array


class TaskSet(NamedTuple):
    """``N`` tasks of the form "prompt tokens -> answer tokens" (leading task axis ``N``).

    Prompts are **left**-padded: the SEP token of every prompt sits in the last column, so a
    batch of prompts continues in the same column for every row and autoregressive sampling
    writes token ``t`` of every completion to column ``P + t`` with no per-row bookkeeping.
    The policy computes positions from the first non-PAD token, so padding does not change
    what it sees. Answers are **right**-padded, aligned with the completion they are compared to.

    Attributes:
      prompt: ``i32[N, P]`` PAD ... PAD, BOS, prompt tokens, SEP.
      prompt_len: ``i32[N]`` number of non-PAD prompt tokens (BOS and SEP included).
      answer: ``i32[N, A]`` answer tokens, EOS, PAD ... PAD.
      answer_len: ``i32[N]`` number of answer tokens including EOS.
      level: ``i32[N]`` 0-based difficulty level within the task's family.
      key: ``u32[N]`` stable content hash of prompt and answer (see
        :func:`curriculax.tasks.content_key`).
    """

    prompt: Array
    prompt_len: Array
    answer: Array
    answer_len: Array
    level: Array
    key: Array


def num_tasks(tasks: TaskSet) -> int:
    """Returns ``N``, the size of the leading task axis (a static Python int)."""
    return tasks.level.shape[0]


def take(tasks: TaskSet, idx: Array) -> TaskSet:
    """Gathers tasks by index.

    Indices must lie in ``[-N, N)`` (negative ones count from the end, as in NumPy). Concrete
    indices (host arrays, or JAX arrays outside ``jit``) are checked. Traced ones cannot be:
    under ``jit`` an out-of-range index yields a task of fill values (``answer_len`` of
    ``-2**31``, say), never an error, so a caller that traces ``take`` must draw its indices
    in range (e.g. ``jax.random.randint(key, shape, 0, N)``).

    Args:
      tasks: a task set with ``N`` tasks.
      idx: ``i32[...]`` indices into the task axis; jit-able.

    Returns:
      A :class:`TaskSet` whose leaves have leading axes ``idx.shape``.

    Raises:
      ValueError: a concrete index is outside ``[-N, N)``.
    """
    try:
        host = np.asarray(idx)
    except jax.errors.TracerArrayConversionError:
        host = None  # traced: see the docstring
    if host is not None and host.size:
        n = num_tasks(tasks)
        bad = host[(host < -n) | (host >= n)]
        if bad.size:
            raise ValueError(
                f"take: idx must be in [-{n}, {n}) (the task set holds {n} tasks), got "
                f"{bad[:5].tolist()}{' ...' if bad.size > 5 else ''} out of range; pass indices "
                f"below num_tasks(tasks)={n}."
            )
    idx = jnp.asarray(idx)
    return jax.tree.map(lambda x: jnp.take(x, idx, axis=0), tasks)


def pad_tasks(
    tasks: TaskSet, *, prompt_width: int | None = None, answer_width: int | None = None
) -> TaskSet:
    """Pads prompts on the left and answers on the right to the given widths.

    Padding never changes a task's meaning or key. Works on leaves with any leading axes.

    Raises:
      ValueError: a width is smaller than the current one (that would cut tokens off).
    """
    prompt = _pad_last(tasks.prompt, prompt_width, "prompt", left=True)
    answer = _pad_last(tasks.answer, answer_width, "answer", left=False)
    return tasks._replace(prompt=prompt, answer=answer)


def _pad_last(x: jax.Array, width: int | None, name: str, *, left: bool) -> jax.Array:
    """``x`` padded with PAD on the left or right of its last axis to ``width`` (``None``:
    unchanged); a ValueError if ``width`` would cut tokens off."""
    if width is None:
        return x
    extra = width - x.shape[-1]
    if extra < 0:
        raise ValueError(
            f"{name}_width={width} is smaller than the {name}s' width {x.shape[-1]}; raise it "
            f"to at least {x.shape[-1]}."
        )
    pad = [(0, 0)] * (x.ndim - 1) + [(extra, 0) if left else (0, extra)]
    return jnp.pad(x, pad, constant_values=PAD)


def concat_tasksets(tasksets: Sequence[TaskSet]) -> TaskSet:
    """Joins task sets along the task axis, padding prompts and answers to common widths.

    Levels are kept as they are (each family numbers its own levels from 0). Keys of tasks from
    different pools are not checked for collisions here; see
    :func:`curriculax.tasks.check_unique_keys`.

    Example:
      >>> from curriculax.tasks import AdditionSpec, ReversalSpec, generate
      >>> reversal_pool = generate(jax.random.key(0), ReversalSpec(num_levels=2), 2)
      >>> addition_pool = generate(jax.random.key(1), AdditionSpec(num_levels=2), 2)
      >>> reversal_pool.prompt.shape, addition_pool.prompt.shape
      ((4, 5), (4, 7))
      >>> both = concat_tasksets([reversal_pool, addition_pool])
      >>> both.prompt.shape, both.level.tolist()
      ((8, 7), [0, 0, 1, 1, 0, 0, 1, 1])
      >>> both.prompt[0].tolist()  # <bos> <rev> s5 <sep>, padded on the left
      [0, 0, 0, 1, 5, 22, 2]
    """
    tasksets = list(tasksets)
    if not tasksets:
        raise ValueError("concat_tasksets needs at least one TaskSet, got an empty sequence.")
    prompt_width = max(t.prompt.shape[-1] for t in tasksets)
    answer_width = max(t.answer.shape[-1] for t in tasksets)
    padded = [pad_tasks(t, prompt_width=prompt_width, answer_width=answer_width) for t in tasksets]
    return jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=0), *padded)


def distinct_tasks(tasks: TaskSet) -> np.ndarray:
    """``i32[N]`` for each task, the index of the first task with the same prompt and answer
    (host-side). Pools repeat tasks to weight them (a small level filling many entries, each
    copy with its own key); pass this as a sampler's ``entry_task`` so the copies share one
    per-task state.

    Example:
      >>> from curriculax.tasks import ReversalSpec, generate
      >>> tasks = generate(jax.random.key(0), ReversalSpec(num_levels=2), 2)
      >>> distinct_tasks(take(tasks, jnp.array([0, 1, 0]))).tolist()
      [0, 1, 0]
    """
    content = np.concatenate([np.asarray(tasks.prompt), np.asarray(tasks.answer)], axis=1)
    _, first, inverse = np.unique(content, axis=0, return_index=True, return_inverse=True)
    return first[inverse.reshape(-1)].astype(np.int32)
