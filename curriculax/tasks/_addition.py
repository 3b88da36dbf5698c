"""Multi-digit addition, with the number of digits per operand as the difficulty."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from curriculax._checks import int_at_least
from curriculax.tasks._family import check_level
from curriculax.tasks._vocab import BOS, DIGIT_0, EOS, NUM_DIGITS, PAD, PLUS, SEP

Array = jax.Array

# Sums of two 9-digit numbers still fit in int32 (1,999,999,998 < 2**31 - 1).
MAX_DIGITS = 9


@dataclasses.dataclass(frozen=True)
class AdditionSpec:
    """Add two ``d``-digit numbers; level ``l`` has ``d = min_digits + l`` digits per operand.

    Every number is written **least-significant digit first**, in the prompt and in the answer:
    ``47 + 85 = 132`` is the prompt ``<bos> 7 4 + 5 8 <sep>`` and the answer ``2 3 1 <eos>``.
    In this order answer digit ``k`` depends only on operand digits ``k`` (at fixed offsets from
    BOS and from '+') and on the carry out of digit ``k - 1``, which the model has just written;
    most-significant-first answers would need the whole carry chain before the first token,
    which a 2-layer transformer does not learn from a sparse reward.

    Operands at ``d = 1`` range over 0 .. 9; for ``d > 1`` they have exactly ``d`` digits (no
    leading zero). The answer has ``d`` or ``d + 1`` digits (no leading zero), then EOS.

    Attributes:
      min_digits: digits per operand at level 0.
      num_levels: number of levels; the default covers 1 .. 8 digits.

    Example:
      >>> spec = AdditionSpec(min_digits=1, num_levels=8)
    """

    min_digits: int = 1
    num_levels: int = 8

    def __post_init__(self):
        for field in ("min_digits", "num_levels"):
            # Python ints >= 1 (bools and floats such as 2.0 refused: they fail later, unnamed).
            object.__setattr__(
                self, field, int_at_least(getattr(self, field), f"AdditionSpec.{field}")
            )
        if self.digits(self.num_levels - 1) > MAX_DIGITS:
            raise ValueError(
                f"AdditionSpec reaches {self.digits(self.num_levels - 1)} digits per operand "
                f"(min_digits={self.min_digits}, num_levels={self.num_levels}); at most "
                f"{MAX_DIGITS} are supported so that sums fit in int32."
            )

    def digits(self, level: int) -> int:
        """Digits per operand at ``level``."""
        return self.min_digits + level

    @property
    def prompt_width(self) -> int:
        return 2 * self.digits(self.num_levels - 1) + 3

    @property
    def answer_width(self) -> int:
        return self.digits(self.num_levels - 1) + 2

    def answer_tokens(self) -> tuple[int, ...]:
        return (EOS, *range(DIGIT_0, DIGIT_0 + NUM_DIGITS))

    def radices(self, level: int) -> tuple[int, ...]:
        check_level(self, level)
        d = self.digits(level)
        operand = (10,) if d == 1 else (9,) + (10,) * (d - 1)
        return operand + operand

    def encode(self, level: int, digits: Array) -> tuple[Array, Array, Array]:
        check_level(self, level)
        d = self.digits(level)
        digits = jnp.asarray(digits, jnp.int32)
        n = digits.shape[0]
        if digits.shape[1] != 2 * d:
            raise ValueError(f"expected {2 * d} digits at level {level}, got {digits.shape[1]}.")
        if d > 1:  # the leading digit's radix is 9: shift it to 1 .. 9
            lead = jnp.zeros((2 * d,), jnp.int32).at[0].set(1).at[d].set(1)
            digits = digits + lead
        a_msd, b_msd = digits[:, :d], digits[:, d:]
        powers = 10 ** jnp.arange(d - 1, -1, -1, dtype=jnp.int32)
        total = a_msd @ powers + b_msd @ powers
        k = jnp.arange(d + 1, dtype=jnp.int32)
        sum_digits = (total[:, None] // (10**k)[None, :]) % 10
        num_sum_digits = d + (total >= 10**d).astype(jnp.int32)
        col = jnp.arange(d + 2, dtype=jnp.int32)[None, :]
        sum_digits = jnp.pad(sum_digits, ((0, 0), (0, 1)))
        answer = jnp.where(
            col < num_sum_digits[:, None],
            DIGIT_0 + sum_digits,
            jnp.where(col == num_sum_digits[:, None], EOS, PAD),
        )
        column = lambda token: jnp.full((n, 1), token, jnp.int32)  # noqa: E731
        prompt = jnp.concatenate(
            [
                column(BOS),
                DIGIT_0 + a_msd[:, ::-1],
                column(PLUS),
                DIGIT_0 + b_msd[:, ::-1],
                column(SEP),
            ],
            axis=1,
        )
        return prompt, answer.astype(jnp.int32), num_sum_digits + 1


def carries(prompt: Array) -> Array:
    """``i32[N]`` the number of carries in each addition prompt's sum (jit-able).

    Difficulty within a level: every task of a level adds two numbers of the same digit count,
    but a sum with no carry is digit-wise copying of ``(a_k + b_k) mod 10`` while each carry
    makes answer digit ``k + 1`` depend on digits ``k``; a ``d``-digit level holds tasks with 0
    to ``d`` carries (the last one being the extra leading digit). So a per-task score can see a
    difference that the level label cannot.

    Args:
      prompt: ``i32[N, P]`` left-padded addition prompts (``BOS a_0 .. a_{d-1} + b_0 ..
        b_{d-1} SEP``, least-significant digit first, as :class:`AdditionSpec` encodes them).

    Returns:
      ``i32[N]`` carries out of each digit position, summed.

    Example:
      >>> carries(AdditionSpec().encode(1, jnp.array([[3, 7, 7, 5]]))[0])   # 47 + 85
      Array([2], dtype=int32)
    """
    prompt = jnp.asarray(prompt, jnp.int32)
    width = prompt.shape[1]
    bos = jnp.argmax(prompt == BOS, axis=1)[:, None]
    plus = jnp.argmax(prompt == PLUS, axis=1)[:, None]
    num_digits = plus - bos - 1
    total = jnp.zeros((prompt.shape[0],), jnp.int32)
    carry = jnp.zeros((prompt.shape[0],), jnp.int32)
    for k in range(MAX_DIGITS):  # static: at most 9 digit positions
        a = jnp.take_along_axis(prompt, jnp.minimum(bos + 1 + k, width - 1), axis=1)[:, 0]
        b = jnp.take_along_axis(prompt, jnp.minimum(plus + 1 + k, width - 1), axis=1)[:, 0]
        inside = k < num_digits[:, 0]
        carry = jnp.where(inside, ((a - DIGIT_0) + (b - DIGIT_0) + carry >= 10), 0).astype(
            jnp.int32
        )
        total = total + carry
    return total
