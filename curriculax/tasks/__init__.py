"""Embedded verifiable task families with difficulty levels (pure JAX, nothing downloaded).

Every family reduces to "prompt tokens -> answer tokens" over one shared vocabulary, so one
policy serves every family and :func:`verify` is family-agnostic.

Example:
  >>> import jax
  >>> from curriculax import tasks
  >>> spec = tasks.ReversalSpec(num_levels=3)                 # lengths 1, 2, 3
  >>> train, held_out = tasks.make_pools(jax.random.key(0), spec,
  ...                                    train_per_level=4, held_out_per_level=2)
  >>> tasks.decode(train.prompt[-1]), tasks.decode(train.answer[-1])
  ('<bos> <rev> s7 s5 s1 <sep>', 's1 s5 s7 <eos>')
  >>> completions = train.answer                              # a solver that is always right
  >>> exact, partial = tasks.verify(train.answer, train.answer_len, completions)
  >>> float(exact.mean()), float(partial.mean())
  (1.0, 1.0)
"""

from curriculax.tasks._addition import AdditionSpec, carries
from curriculax.tasks._family import TaskFamily
from curriculax.tasks._generate import generate, num_tasks_per_level
from curriculax.tasks._keys import content_key, held_out_mask, mix32
from curriculax.tasks._pools import check_unique_keys, make_pools, per_level_mean, split_by_key
from curriculax.tasks._sequences import CopySpec, ReversalSpec
from curriculax.tasks._taskset import (
    TaskSet,
    concat_tasksets,
    distinct_tasks,
    num_tasks,
    pad_tasks,
    take,
)
from curriculax.tasks._verify import verify
from curriculax.tasks._vocab import (
    BOS,
    COPY,
    DIGIT_0,
    EOS,
    NUM_DIGITS,
    NUM_SYMBOLS,
    PAD,
    PLUS,
    PROMPT_ONLY_TOKENS,
    REVERSE,
    SEP,
    SYMBOL_0,
    VOCAB_SIZE,
    decode,
    token_name,
)

__all__ = [
    "BOS",
    "COPY",
    "DIGIT_0",
    "EOS",
    "NUM_DIGITS",
    "NUM_SYMBOLS",
    "PAD",
    "PLUS",
    "PROMPT_ONLY_TOKENS",
    "REVERSE",
    "SEP",
    "SYMBOL_0",
    "VOCAB_SIZE",
    "AdditionSpec",
    "CopySpec",
    "ReversalSpec",
    "TaskFamily",
    "TaskSet",
    "carries",
    "check_unique_keys",
    "concat_tasksets",
    "content_key",
    "decode",
    "distinct_tasks",
    "generate",
    "held_out_mask",
    "make_pools",
    "mix32",
    "num_tasks",
    "num_tasks_per_level",
    "pad_tasks",
    "per_level_mean",
    "split_by_key",
    "take",
    "token_name",
    "verify",
]
