"""Symbol-sequence families: reversal and copy, with the sequence length as the difficulty."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp

from curriculax._checks import int_at_least
from curriculax.tasks._family import check_level
from curriculax.tasks._vocab import BOS, COPY, EOS, NUM_SYMBOLS, REVERSE, SEP, SYMBOL_0

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class _SymbolSequenceSpec:
    """Shared fields and encoding of the symbol-sequence families."""

    num_symbols: int = 8
    min_length: int = 1
    num_levels: int = 12

    _OP_TOKEN: ClassVar[int]
    _REVERSED: ClassVar[bool]

    def __post_init__(self):
        name = type(self).__name__
        for field in ("num_symbols", "min_length", "num_levels"):
            # Python ints >= 1 (bools and floats such as 2.0 refused: they fail later, unnamed).
            object.__setattr__(self, field, int_at_least(getattr(self, field), f"{name}.{field}"))
        if self.num_symbols > NUM_SYMBOLS:
            raise ValueError(
                f"{name}.num_symbols must be in [1, {NUM_SYMBOLS}] (the shared vocabulary holds "
                f"{NUM_SYMBOLS} symbols), got {self.num_symbols!r}."
            )

    def length(self, level: int) -> int:
        """Sequence length at ``level``."""
        return self.min_length + level

    @property
    def prompt_width(self) -> int:
        return self.length(self.num_levels - 1) + 3

    @property
    def answer_width(self) -> int:
        return self.length(self.num_levels - 1) + 1

    def answer_tokens(self) -> tuple[int, ...]:
        return (EOS, *range(SYMBOL_0, SYMBOL_0 + self.num_symbols))

    def radices(self, level: int) -> tuple[int, ...]:
        check_level(self, level)
        return (self.num_symbols,) * self.length(level)

    def encode(self, level: int, digits: Array) -> tuple[Array, Array, Array]:
        check_level(self, level)
        digits = jnp.asarray(digits, jnp.int32)
        n, length = digits.shape
        if length != self.length(level):
            raise ValueError(
                f"expected {self.length(level)} digits at level {level}, got {length}."
            )
        symbols = SYMBOL_0 + digits
        column = lambda token: jnp.full((n, 1), token, jnp.int32)  # noqa: E731
        prompt = jnp.concatenate(
            [column(BOS), column(self._OP_TOKEN), symbols, column(SEP)], axis=1
        )
        body = symbols[:, ::-1] if self._REVERSED else symbols
        answer = jnp.concatenate([body, column(EOS)], axis=1)
        return prompt, answer, jnp.full((n,), length + 1, jnp.int32)


@dataclasses.dataclass(frozen=True)
class ReversalSpec(_SymbolSequenceSpec):
    """Reverse a sequence of symbols; level ``l`` has length ``min_length + l``.

    Prompt ``<bos> <rev> x1 .. xL <sep>``, answer ``xL .. x1 <eos>``. Level ``l`` holds
    ``num_symbols ** (min_length + l)`` distinct tasks, and a policy that picks symbols uniformly
    at random solves one with probability ``num_symbols ** -(min_length + l)``.

    Attributes:
      num_symbols: symbols are drawn from ``s0 .. s{num_symbols - 1}`` (at most 16).
      min_length: sequence length at level 0.
      num_levels: number of levels; the defaults cover lengths 1 .. 12.

    Example:
      >>> spec = ReversalSpec(num_symbols=8, min_length=1, num_levels=12)
      >>> spec.length(11), spec.prompt_width, spec.answer_width
      (12, 15, 13)
    """

    _OP_TOKEN: ClassVar[int] = REVERSE
    _REVERSED: ClassVar[bool] = True


@dataclasses.dataclass(frozen=True)
class CopySpec(_SymbolSequenceSpec):
    """Copy a sequence of symbols; level ``l`` has length ``min_length + l``.

    Prompt ``<bos> <copy> x1 .. xL <sep>``, answer ``x1 .. xL <eos>``. Easier than reversal for
    a transformer (a fixed-offset lookup); useful as a warm-up family in a mixture.

    Attributes:
      num_symbols: symbols are drawn from ``s0 .. s{num_symbols - 1}`` (at most 16).
      min_length: sequence length at level 0.
      num_levels: number of levels; the defaults cover lengths 1 .. 12.
    """

    _OP_TOKEN: ClassVar[int] = COPY
    _REVERSED: ClassVar[bool] = False
