"""What a task family provides so that :func:`curriculax.tasks.generate` can build its pools."""

from __future__ import annotations

from typing import Protocol

import jax

Array = jax.Array


class TaskFamily(Protocol):
    """A family of verifiable tasks with a difficulty knob (implemented by its frozen spec).

    A task at level ``l`` is identified by a tuple of digits with per-position radices
    ``radices(l)`` (most significant first); ``encode`` turns a batch of such tuples into tokens.
    This lets :func:`~curriculax.tasks.generate` draw distinct tasks of any family without
    knowing what the digits mean.

    Attributes:
      num_levels: number of difficulty levels, numbered from 0 (easiest).
      prompt_width: ``P``, the widest prompt over all levels (BOS and SEP included).
      answer_width: ``A``, the widest answer over all levels (EOS included).
    """

    num_levels: int

    @property
    def prompt_width(self) -> int: ...

    @property
    def answer_width(self) -> int: ...

    def answer_tokens(self) -> tuple[int, ...]:
        """Every token id an answer of this family can contain, EOS included (sorted)."""
        ...

    def radices(self, level: int) -> tuple[int, ...]:
        """Radix of each digit that identifies a task at ``level`` (a static tuple)."""
        ...

    def encode(self, level: int, digits: Array) -> tuple[Array, Array, Array]:
        """Builds tokens for ``n`` tasks of one level.

        Args:
          level: the (static) level.
          digits: ``i32[n, D]`` with ``0 <= digits[:, j] < radices(level)[j]``.

        Returns:
          ``(prompt i32[n, p], answer i32[n, a], answer_len i32[n])``: the prompt without padding
          (BOS ... SEP, the same length for every task of a level), the answer tokens then EOS,
          right-padded with PAD, and the answer length including EOS.
        """
        ...


def check_level(spec: TaskFamily, level: int) -> None:
    if not 0 <= level < spec.num_levels:
        raise ValueError(
            f"level {level} is outside [0, {spec.num_levels}) for {type(spec).__name__}."
        )
