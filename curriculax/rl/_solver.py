"""The GRPO solver: a transformer policy trained with GRPO, behind the engine's interface."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from curriculax.checkpoint import layout_diff, leaf_layout
from curriculax.credit import per_token
from curriculax.engine._solver import Rollouts, Solver, TrainBatch
from curriculax.rl._grpo import GRPOConfig, grpo_advantages, grpo_loss
from curriculax.rl._model import Params, TransformerConfig, init_policy, policy_graphdef
from curriculax.rl._sampling import (
    check_output_tokens,
    default_output_tokens,
    sample,
    score_completions,
)
from curriculax.tasks import VOCAB_SIZE, TaskSet, pad_tasks, verify
from curriculax.tasks._keys import sequence_key

Array = jax.Array


class GRPOState(NamedTuple):
    """Everything the GRPO solver carries between steps (arrays only, fixed structure).

    Attributes:
      params: the policy's params dict.
      opt_state: optax state of gradient clipping + AdamW.
      ref_params: the reference policy for the KL penalty (the initial params), or ``{}``
        when ``GRPOConfig.kl_coef == 0``.
      step: ``i32[]`` updates applied so far.
    """

    params: Params
    opt_state: Any
    ref_params: Params
    step: Array


class GRPORolloutData(NamedTuple):
    """What :func:`grpo_solver`'s ``update`` needs from a rollout (``Rollouts.data``).

    Attributes:
      prompt: ``i32[G, K, P]`` the left-padded prompt each rollout answered.
      completion: ``i32[G, K, T]`` sampled tokens, PAD after the first EOS.
      logprobs: ``f32[G, K, T]`` behaviour log-probabilities, stored when sampling.
    """

    prompt: Array
    completion: Array
    logprobs: Array


def make_optimizer(cfg: GRPOConfig) -> optax.GradientTransformation:
    """Global-norm gradient clipping followed by AdamW, as :func:`grpo_solver` uses."""
    return optax.chain(
        optax.clip_by_global_norm(cfg.max_grad_norm),
        optax.adamw(cfg.learning_rate, b1=cfg.b1, b2=cfg.b2, weight_decay=cfg.weight_decay),
    )


def check_vocab_size(model_cfg: TransformerConfig, caller: str) -> None:
    """Refuses a policy whose vocabulary does not cover the tasks' tokens.

    The tasks share one vocabulary (``curriculax.tasks.VOCAB_SIZE`` ids); the embedding lookup
    of an id at or past ``model_cfg.vocab_size`` reads NaN, and training then goes NaN
    silently, so ``caller`` refuses it up front.
    """
    if model_cfg.vocab_size < VOCAB_SIZE:
        raise ValueError(
            f"{caller}: model_cfg.vocab_size={model_cfg.vocab_size} does not cover the tasks' "
            f"tokens (ids 0 .. {VOCAB_SIZE - 1}); build the TransformerConfig with "
            f"vocab_size=curriculax.tasks.VOCAB_SIZE ({VOCAB_SIZE})."
        )


def _check_positive_int(name: str, value: Any, caller: str = "grpo_solver") -> int:
    """``value`` as a Python int >= 1 (numpy ints too, bools not); a ValueError naming
    ``caller`` and ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{caller}: {name} must be an int >= 1, got {value!r}.")
    return int(value)


def check_answer_width(tasks: TaskSet, max_new_tokens: int, caller: str) -> None:
    """Refuses (at trace time: widths are static) tasks whose answers are wider than the
    ``max_new_tokens`` a rollout generates: no completion could match the widest of them."""
    width = tasks.answer.shape[-1]
    if max_new_tokens < width:
        raise ValueError(
            f"{caller}: max_new_tokens={max_new_tokens} is smaller than the tasks' answer width "
            f"{width} (answer tokens and EOS), so the longest answers could never be matched; "
            f"build the solver with max_new_tokens >= {width} (spec.answer_width)."
        )


def grpo_solver(
    model_cfg: TransformerConfig,
    grpo_cfg: GRPOConfig | None = None,
    *,
    max_new_tokens: int,
    prompt_len: int | None = None,
    output_tokens: Sequence[int] | None = None,
    init_params: Params | None = None,
) -> Solver:
    """A :class:`~curriculax.engine._solver.Solver` training a transformer policy with GRPO.

    - ``init(key) -> GRPOState``.
    - ``rollout(state, tasks, key, group_size) -> Rollouts``: samples ``group_size``
      completions of ``max_new_tokens`` tokens for each of ``G`` tasks (a
      :class:`~curriculax.tasks.TaskSet` with leaves ``[G, ...]``) and scores them with
      :func:`~curriculax.tasks.verify` (``grpo_cfg.reward``). Every rollout is valid (a
      completion without EOS is trainable, it simply fails); ``token_mask`` covers the
      sampled tokens up to and including the first EOS; ``data`` is a
      :class:`GRPORolloutData`.
    - ``credit(rollouts) -> f32[G, K, T]``: :func:`~curriculax.rl.grpo_advantages` broadcast
      over each rollout's masked tokens, 0 elsewhere.
    - ``update(state, batch, key) -> (state, metrics)``: one AdamW step on
      :func:`~curriculax.rl.grpo_loss` over every masked token of the batch; padded rollouts
      (``valid`` False, ``token_mask`` all False) contribute nothing. Metrics (all ``f32[]``):
      ``loss``, ``pg_loss``, ``entropy``, ``clip_frac``, ``ratio``, ``approx_kl_old``,
      ``tokens``, ``grad_norm``, ``reward``, ``completion_len`` (+ ``kl`` when ``kl_coef > 0``).
    - ``evaluate(state, tasks, key) -> f32[M]``: greedy-decoding exact match per task.

    All four are pure and traceable; jit them (or the engine's step that calls them).

    Args:
      model_cfg: the policy's shape; ``vocab_size`` must cover the tasks' tokens (at least
        ``curriculax.tasks.VOCAB_SIZE``), else a ValueError.
      grpo_cfg: GRPO hyperparameters; defaults to ``GRPOConfig()``.
      max_new_tokens: ``T`` (an int >= 1), tokens generated per rollout. It must be at least
        the tasks' answer width (``spec.answer_width``, the widest family's when a run mixes
        families) so every task is solvable: ``rollout`` and ``evaluate`` raise a ValueError
        when tracing tasks with wider answers.
      prompt_len: pad every batch of prompts to this width (an int >= 1). Set it to the widest
        prompt of all envs when a run mixes families, so ``Rollouts.data`` has one shape for
        every env. ``None`` keeps each batch's own width.
      output_tokens: token ids the policy may emit, EOS included; every other token has
        probability 0 when sampling and scoring. Pass the union of the run's families'
        ``spec.answer_tokens()`` (a constrained decoder: with reversal over 8 symbols the
        policy chooses among 9 tokens, not 27, which makes the cold start from a random policy
        about 9x likelier at length 1). ``None``: every token that is not prompt-only.
      init_params: start every run from these params (a warm start, e.g. from
        :func:`~curriculax.rl.pretrain`) instead of random weights from ``init``'s key; their
        layout must be ``model_cfg``'s. The optimizer state starts fresh either way.

    Returns:
      A :class:`~curriculax.engine._solver.Solver`.

    Example:
      >>> from curriculax.tasks import ReversalSpec, generate
      >>> spec = ReversalSpec(num_levels=2)
      >>> tasks = generate(jax.random.key(0), spec, 2)  # 4 tasks, 2 per level
      >>> cfg = TransformerConfig(VOCAB_SIZE, width=16, depth=1, heads=2, max_len=16)
      >>> solver = grpo_solver(cfg, GRPOConfig(), max_new_tokens=spec.answer_width)
      >>> state = solver.init(jax.random.key(1))
      >>> rollouts = jax.jit(solver.rollout, static_argnums=3)(state, tasks, jax.random.key(2), 2)
      >>> rollouts.rewards.shape, rollouts.token_mask.shape  # [G, K], [G, K, T]
      ((4, 2), (4, 2, 3))
    """
    grpo_cfg = GRPOConfig() if grpo_cfg is None else grpo_cfg
    max_new_tokens = _check_positive_int("max_new_tokens", max_new_tokens)
    if prompt_len is not None:
        prompt_len = _check_positive_int("prompt_len", prompt_len)
    check_vocab_size(model_cfg, "grpo_solver")
    if prompt_len is not None and prompt_len + max_new_tokens > model_cfg.max_len:
        raise ValueError(
            f"prompt_len={prompt_len} plus max_new_tokens={max_new_tokens} exceeds "
            f"TransformerConfig.max_len={model_cfg.max_len}; raise max_len to at least "
            f"{prompt_len + max_new_tokens}."
        )
    output_tokens = check_output_tokens(
        default_output_tokens(model_cfg.vocab_size) if output_tokens is None else output_tokens,
        model_cfg.vocab_size,
    )
    graphdef = policy_graphdef(model_cfg)
    optimizer = make_optimizer(grpo_cfg)
    if init_params is not None:
        expected = jax.eval_shape(lambda: init_policy(model_cfg, jax.random.key(0))[1])
        diff = layout_diff(leaf_layout(init_params), leaf_layout(expected))
        if diff:
            raise ValueError(
                "grpo_solver: init_params do not fit model_cfg (build them with the same "
                "TransformerConfig): " + "; ".join(diff[:5])
            )
    use_kl = grpo_cfg.kl_coef > 0

    def prompts_of(tasks: TaskSet) -> Array:
        if prompt_len is None:
            return tasks.prompt
        return pad_tasks(tasks, prompt_width=prompt_len).prompt

    def init(key: Array) -> GRPOState:
        if init_params is None:
            _, params = init_policy(model_cfg, key)
        else:
            # A copy: the state is donated to the update, which would delete the caller's
            # arrays (a second run from them then failed) where init runs outside jit.
            params = jax.tree.map(jnp.array, init_params)
        return GRPOState(
            params=params,
            opt_state=optimizer.init(params),
            ref_params=jax.tree.map(jnp.copy, params) if use_kl else {},
            step=jnp.zeros((), jnp.int32),
        )

    def rollout(state: GRPOState, tasks: TaskSet, key: Array, group_size: int) -> Rollouts:
        check_answer_width(tasks, max_new_tokens, "grpo_solver rollout")
        prompts = prompts_of(tasks)
        num_groups, width = prompts.shape
        flat_prompts = jnp.repeat(prompts, group_size, axis=0)
        out = sample(
            graphdef,
            state.params,
            flat_prompts,
            key,
            max_new_tokens=max_new_tokens,
            temperature=grpo_cfg.temperature,
            output_tokens=output_tokens,
        )
        shape = (num_groups, group_size)
        completion = out.tokens.reshape(*shape, max_new_tokens)
        exact, partial = verify(tasks.answer[:, None], tasks.answer_len[:, None], completion)
        answers = jax.lax.bitcast_convert_type(sequence_key(completion), jnp.int32)
        return Rollouts(
            rewards=exact if grpo_cfg.reward == "exact" else partial,
            valid=jnp.ones(shape, bool),
            token_mask=out.mask.reshape(*shape, max_new_tokens),
            data=GRPORolloutData(
                prompt=flat_prompts.reshape(*shape, width),
                completion=completion,
                logprobs=out.logprobs.reshape(*shape, max_new_tokens),
            ),
            answers=answers,
        )

    def credit(rollouts: Rollouts) -> Array:
        advantages = grpo_advantages(
            rollouts.rewards,
            rollouts.valid,
            scale_by_std=grpo_cfg.scale_by_std,
            eps=grpo_cfg.std_eps,
        )
        return per_token(advantages, rollouts.token_mask, rollouts.valid)

    def loss_fn(params: Params, ref_params: Params, batch: TrainBatch):
        data: GRPORolloutData = batch.rollouts.data
        flat = lambda x: x.reshape(-1, *x.shape[2:])  # noqa: E731
        prompts, completions = flat(data.prompt), flat(data.completion)
        logprobs, entropy = score_completions(
            graphdef,
            params,
            prompts,
            completions,
            temperature=grpo_cfg.temperature,
            output_tokens=output_tokens,
        )
        ref_logprobs = None
        if use_kl:
            ref_logprobs, _ = score_completions(
                graphdef,
                ref_params,
                prompts,
                completions,
                temperature=grpo_cfg.temperature,
                output_tokens=output_tokens,
            )
            ref_logprobs = jax.lax.stop_gradient(ref_logprobs)
        mask = batch.rollouts.token_mask & batch.rollouts.valid[..., None]
        return grpo_loss(
            logprobs,
            flat(data.logprobs),
            flat(batch.advantages),
            flat(mask),
            clip_eps=grpo_cfg.clip_eps,
            entropy=entropy,
            entropy_coef=grpo_cfg.entropy_coef,
            ref_logprobs=ref_logprobs,
            kl_coef=grpo_cfg.kl_coef,
        )

    def update(state: GRPOState, batch: TrainBatch, key: Array) -> tuple[GRPOState, dict]:
        del key  # the update is deterministic (no dropout)
        (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            state.params, state.ref_params, batch
        )
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        rollouts = batch.rollouts
        num_valid = jnp.maximum(jnp.sum(rollouts.valid), 1).astype(jnp.float32)
        metrics = {
            **metrics,
            "loss": loss,
            "grad_norm": optax.tree.norm(grads),
            "reward": jnp.sum(jnp.where(rollouts.valid, rollouts.rewards, 0.0)) / num_valid,
            "completion_len": jnp.sum(rollouts.token_mask & rollouts.valid[..., None]) / num_valid,
        }
        metrics = {k: jnp.asarray(v, jnp.float32) for k, v in sorted(metrics.items())}
        new_state = GRPOState(
            params=params,
            opt_state=opt_state,
            ref_params=state.ref_params,
            step=state.step + 1,
        )
        return new_state, metrics

    def evaluate(state: GRPOState, tasks: TaskSet, key: Array) -> Array:
        check_answer_width(tasks, max_new_tokens, "grpo_solver evaluate")
        out = sample(
            graphdef,
            state.params,
            prompts_of(tasks),
            key,
            max_new_tokens=max_new_tokens,
            greedy=True,
            output_tokens=output_tokens,
        )
        exact, _ = verify(tasks.answer, tasks.answer_len, out.tokens)
        return exact

    return Solver(init=init, rollout=rollout, credit=credit, update=update, evaluate=evaluate)
