"""The token vocabulary shared by every task family, so one policy can serve all of them.

Layout (ids are stable: changing them changes every task key)::

    0  PAD      padding, never sampled
    1  BOS      first token of every prompt
    2  SEP      last token of every prompt: the answer starts after it
    3  EOS      last token of every answer
    4  PLUS     the '+' of an addition prompt
    5  REVERSE  operation marker of a reversal prompt
    6  COPY     operation marker of a copy prompt
    7 .. 16     digits 0 .. 9
    17 .. 32    symbols s0 .. s15 (reversal and copy)
"""

from __future__ import annotations

from collections.abc import Iterable

PAD = 0
BOS = 1
SEP = 2
EOS = 3
PLUS = 4
REVERSE = 5
COPY = 6
DIGIT_0 = 7
NUM_DIGITS = 10
SYMBOL_0 = DIGIT_0 + NUM_DIGITS
NUM_SYMBOLS = 16
VOCAB_SIZE = SYMBOL_0 + NUM_SYMBOLS

# Tokens that appear only in prompts, never in an answer of any family.
PROMPT_ONLY_TOKENS = (PAD, BOS, SEP, PLUS, REVERSE, COPY)

_SPECIAL_NAMES = ("<pad>", "<bos>", "<sep>", "<eos>", "+", "<rev>", "<copy>")


def token_name(token: int) -> str:
    """Returns a readable name for one token id, e.g. ``"<bos>"``, ``"7"`` or ``"s3"``."""
    token = int(token)
    if 0 <= token < DIGIT_0:
        return _SPECIAL_NAMES[token]
    if DIGIT_0 <= token < SYMBOL_0:
        return str(token - DIGIT_0)
    if SYMBOL_0 <= token < VOCAB_SIZE:
        return f"s{token - SYMBOL_0}"
    raise ValueError(f"token id {token} is outside the vocabulary [0, {VOCAB_SIZE}).")


def decode(tokens: Iterable[int], *, skip_pad: bool = True) -> str:
    """Renders token ids as a space-separated string (host-side, for logs and debugging).

    Example:
      >>> decode([0, 1, 5, 17, 18, 2])
      '<bos> <rev> s0 s1 <sep>'
    """
    return " ".join(token_name(t) for t in tokens if not (skip_pad and int(t) == PAD))
