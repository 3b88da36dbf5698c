"""Supervised pretraining of the policy: next-token cross-entropy on prompt -> answer.

A warm start for RL, as a pretrained model is for LLM fine-tuning: :func:`pretrain` fits the
policy to a task set's answers, and :func:`~curriculax.rl.grpo_solver` takes the result as its
``init_params``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from curriculax.rl._grpo import GRPOConfig
from curriculax.rl._model import Params, TransformerConfig, init_policy, policy_graphdef
from curriculax.rl._sampling import check_output_tokens, default_output_tokens, score_completions
from curriculax.rl._solver import _check_positive_int, check_vocab_size, make_optimizer
from curriculax.tasks import PAD, TaskSet, num_tasks

Array = jax.Array


def supervised_loss(
    graphdef,
    params: Params,
    prompts: Array,
    answers: Array,
    *,
    output_tokens: Sequence[int] | None = None,
) -> Array:
    """Token-mean cross-entropy of the answers (EOS included) given the prompts.

    Uses the policy's own output distribution (:func:`~curriculax.rl.score_completions` at
    temperature 1, restricted to ``output_tokens``), so the loss trains exactly what sampling
    draws from.

    Args:
      graphdef: the policy's ``GraphDef``.
      params: the policy's params dict.
      prompts: ``i32[B, P]`` left-padded prompts.
      answers: ``i32[B, A]`` answer tokens, EOS, then PAD (``TaskSet.answer``).
      output_tokens: token ids the policy may emit (default: every non-prompt-only token).

    Returns:
      ``f32[]`` mean negative log-likelihood per answer token.
    """
    logprobs, _ = score_completions(
        graphdef, params, prompts, answers, temperature=1.0, output_tokens=output_tokens
    )
    mask = answers != PAD
    return -jnp.sum(jnp.where(mask, logprobs, 0.0)) / jnp.maximum(jnp.sum(mask), 1)


def pretrain(
    model_cfg: TransformerConfig,
    tasks: TaskSet,
    key: Array,
    *,
    steps: int,
    batch_size: int = 64,
    learning_rate: float = 3e-3,
    output_tokens: Sequence[int] | None = None,
    chunk: int = 10,
    on_chunk: Callable[[int, float], None] | None = None,
) -> tuple[Params, Array]:
    """Fits a freshly initialised policy to ``tasks``' answers with AdamW.

    Each step draws ``batch_size`` tasks uniformly with replacement and takes one step of
    clipped AdamW (:func:`~curriculax.rl.make_optimizer` with ``learning_rate``, the GRPO
    solver's other optimizer defaults) on :func:`supervised_loss`. Steps run as jitted scans of
    ``chunk`` steps (one compilation); ``on_chunk(steps_done, mean_loss)`` is called on the
    host after each (a progress bar, say).

    Args:
      model_cfg: the policy's shape (the one the RL solver will use); ``vocab_size`` must
        cover the tasks' tokens, as :func:`~curriculax.rl.grpo_solver` requires.
      tasks: ``N >= 1`` training tasks (prompts of one width, the width RL will use).
      key: PRNG key: initial weights and batch draws.
      steps: optimizer steps (>= 1).
      batch_size: tasks per step (>= 1).
      learning_rate: AdamW step size.
      output_tokens: token ids the policy may emit (as the RL solver's): ids below
        ``vocab_size``, EOS included, PAD excluded, else a ValueError (the check
        :func:`~curriculax.rl.grpo_solver` makes). ``None``: every token that is not
        prompt-only. It must also hold every token of the tasks' answers (PAD aside), else
        a ValueError naming the missing ids.
      chunk: steps per compiled scan (>= 1).
      on_chunk: optional host callback after each chunk.

    Returns:
      ``(params, losses f32[steps])``: the fitted params dict and each step's loss.

    Example:
      >>> from curriculax.rl import grpo_solver
      >>> from curriculax.tasks import VOCAB_SIZE, ReversalSpec, generate
      >>> spec = ReversalSpec(num_levels=2)
      >>> train = generate(jax.random.key(0), spec, 2)  # 4 tasks, 2 per level
      >>> model_cfg = TransformerConfig(VOCAB_SIZE, width=16, depth=1, heads=2, max_len=16)
      >>> params, losses = pretrain(model_cfg, train, jax.random.key(1), steps=4, batch_size=8,
      ...                           chunk=2)
      >>> losses.shape, bool(losses[-1] < losses[0])
      ((4,), True)
      >>> solver = grpo_solver(model_cfg, GRPOConfig(), max_new_tokens=spec.answer_width,
      ...                      init_params=params)
    """
    steps = _check_positive_int("steps", steps, "pretrain")
    batch_size = _check_positive_int("batch_size", batch_size, "pretrain")
    chunk = _check_positive_int("chunk", chunk, "pretrain")
    check_vocab_size(model_cfg, "pretrain")
    # The solver's check: a set without EOS (or with PAD, or ids past the vocabulary) would
    # train on answers the policy cannot emit (losses ~1e8), so refuse it here too.
    output_tokens = check_output_tokens(
        default_output_tokens(model_cfg.vocab_size) if output_tokens is None else output_tokens,
        model_cfg.vocab_size,
    )
    n = num_tasks(tasks)
    if n == 0:
        raise ValueError("pretrain: the task set is empty (0 tasks); pass at least one task.")
    # So would answers whose tokens the policy may not emit (their probability is 0).
    missing = sorted(set(np.unique(np.asarray(tasks.answer)).tolist()) - {PAD, *output_tokens})
    if missing:
        raise ValueError(
            f"pretrain: output_tokens {output_tokens} cannot produce the tasks' answers: "
            f"missing token ids {missing}; include them (e.g. the union of the specs' "
            "answer_tokens())."
        )
    k_init, k_data = jax.random.split(key)
    _, params = init_policy(model_cfg, k_init)
    graphdef = policy_graphdef(model_cfg)
    optimizer = make_optimizer(GRPOConfig(learning_rate=learning_rate))

    def step(carry, index):
        params, opt_state = carry
        rows = jax.random.randint(jax.random.fold_in(k_data, index), (batch_size,), 0, n)
        loss, grads = jax.value_and_grad(supervised_loss, argnums=1)(
            graphdef,
            params,
            tasks.prompt[rows],
            tasks.answer[rows],
            output_tokens=output_tokens,
        )
        updates, new_opt_state = optimizer.update(grads, opt_state, params)
        new = (optax.apply_updates(params, updates), new_opt_state)
        # The last chunk runs past `steps` with no-op steps, so every chunk has one shape and
        # the scan compiles once.
        active = index < steps
        carry = jax.tree.map(lambda a, b: jnp.where(active, a, b), new, (params, opt_state))
        return carry, loss

    @jax.jit
    def run(carry, indices):
        return jax.lax.scan(step, carry, indices)

    carry = (params, optimizer.init(params))
    losses = []
    for start in range(0, steps, chunk):
        carry, loss = run(carry, jnp.arange(start, start + chunk, dtype=jnp.int32))
        done = min(start + chunk, steps)
        losses.append(loss[: done - start])
        if on_chunk is not None:
            on_chunk(done, float(jnp.mean(losses[-1])))
    return carry[0], jnp.concatenate(losses)
