"""The solver side: a small Flax NNX transformer policy, batched sampling, and GRPO.

Example:
  >>> from curriculax import rl, tasks
  >>> solver = rl.grpo_solver(rl.TransformerConfig(tasks.VOCAB_SIZE, max_len=32),
  ...                         rl.GRPOConfig(), max_new_tokens=13)
"""

from curriculax.rl._grpo import GRPOConfig, grpo_advantages, grpo_loss
from curriculax.rl._model import (
    KVCache,
    Transformer,
    TransformerConfig,
    apply_policy,
    init_policy,
    policy_graphdef,
    positions_from_tokens,
)
from curriculax.rl._sampling import (
    Samples,
    answer_probability,
    completion_mask,
    default_output_tokens,
    policy_log_softmax,
    sample,
    score_completions,
)
from curriculax.rl._solver import GRPORolloutData, GRPOState, grpo_solver, make_optimizer
from curriculax.rl._supervised import pretrain, supervised_loss

__all__ = [
    "GRPOConfig",
    "GRPORolloutData",
    "GRPOState",
    "KVCache",
    "Samples",
    "Transformer",
    "TransformerConfig",
    "answer_probability",
    "apply_policy",
    "completion_mask",
    "default_output_tokens",
    "grpo_advantages",
    "grpo_loss",
    "grpo_solver",
    "init_policy",
    "make_optimizer",
    "policy_graphdef",
    "policy_log_softmax",
    "positions_from_tokens",
    "pretrain",
    "sample",
    "score_completions",
    "supervised_loss",
]
