"""Supervised pretraining: the loss falls, the fitted policy answers, GRPO starts from it."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curriculax import rl
from curriculax import tasks as T

SPEC = T.ReversalSpec(num_symbols=4, num_levels=2)
MODEL = rl.TransformerConfig(
    T.VOCAB_SIZE, width=32, depth=1, heads=2, max_len=SPEC.prompt_width + SPEC.answer_width
)


def _tasks():
    train, _ = T.make_pools(jax.random.key(0), SPEC, train_per_level=16, held_out_per_level=1)
    return train


def test_pretrain_fits_the_answers_and_reports_every_step():
    train = _tasks()
    seen = []
    params, losses = rl.pretrain(
        MODEL,
        train,
        jax.random.key(0),
        steps=45,
        batch_size=32,
        learning_rate=1e-2,
        output_tokens=SPEC.answer_tokens(),
        chunk=10,
        on_chunk=lambda done, loss: seen.append(done),
    )
    assert losses.shape == (45,) and seen == [10, 20, 30, 40, 45]
    assert float(losses[-5:].mean()) < 0.25 * float(losses[:5].mean())
    solver = rl.grpo_solver(
        MODEL,
        max_new_tokens=SPEC.answer_width,
        output_tokens=SPEC.answer_tokens(),
        init_params=params,
    )
    state = solver.init(jax.random.key(1))
    assert all(
        np.array_equal(a, b) for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(params))
    )
    greedy = jax.jit(solver.evaluate)(state, train, jax.random.key(0))
    assert float(jnp.mean(greedy)) > 0.9  # the warm start answers its training tasks
    scratch = rl.grpo_solver(MODEL, max_new_tokens=SPEC.answer_width).init(jax.random.key(1))
    assert float(jnp.mean(jax.jit(solver.evaluate)(scratch, train, jax.random.key(0)))) < 0.5


def test_supervised_loss_is_the_answer_tokens_mean_nll():
    train = _tasks()
    graphdef, params = rl.init_policy(MODEL, jax.random.key(0))
    loss = rl.supervised_loss(graphdef, params, train.prompt, train.answer)
    logp, _ = rl.score_completions(graphdef, params, train.prompt, train.answer)
    mask = np.asarray(train.answer) != T.PAD
    assert float(loss) == pytest.approx(-np.asarray(logp)[mask].mean(), rel=1e-5)


def test_init_params_of_another_shape_are_refused():
    _, params = rl.init_policy(MODEL, jax.random.key(0))
    wider = rl.TransformerConfig(T.VOCAB_SIZE, width=64, depth=1, heads=2, max_len=MODEL.max_len)
    with pytest.raises(ValueError, match="init_params do not fit model_cfg"):
        rl.grpo_solver(wider, max_new_tokens=SPEC.answer_width, init_params=params)
    with pytest.raises(ValueError, match="steps must be an int >= 1"):
        rl.pretrain(MODEL, _tasks(), jax.random.key(0), steps=0)


def test_pretrain_refuses_what_the_solver_refuses():
    """``pretrain`` once trained on output tokens without EOS (losses ~3e8) and on a model
    vocabulary that misses the tasks' tokens, both of which ``grpo_solver`` refuses."""
    no_eos = tuple(t for t in SPEC.answer_tokens() if t != T.EOS)
    with pytest.raises(ValueError, match=r"include EOS \(3\).*EOS missing"):
        rl.grpo_solver(MODEL, max_new_tokens=SPEC.answer_width, output_tokens=no_eos)
    with pytest.raises(ValueError, match=r"include EOS \(3\).*EOS missing"):
        rl.pretrain(MODEL, _tasks(), jax.random.key(0), steps=1, output_tokens=no_eos)
    with pytest.raises(ValueError, match=r"offending: \[0\]"):
        rl.pretrain(MODEL, _tasks(), jax.random.key(0), steps=1, output_tokens=(T.PAD, T.EOS))
    small = rl.TransformerConfig(20, width=32, depth=1, heads=2, max_len=MODEL.max_len)
    with pytest.raises(ValueError, match=r"pretrain: model_cfg\.vocab_size=20 does not cover"):
        rl.pretrain(small, _tasks(), jax.random.key(0), steps=1)


def test_pretrain_refuses_output_tokens_that_cannot_emit_the_answers():
    """``pretrain`` once accepted ``output_tokens=(EOS,)`` on reversal tasks: the answers'
    symbols had probability 0, so it trained to losses ~6e8 and the base could never answer."""
    symbols = sorted(set(SPEC.answer_tokens()) - {T.EOS})
    with pytest.raises(ValueError, match=re.escape(f"missing token ids {symbols}")):
        rl.pretrain(MODEL, _tasks(), jax.random.key(0), steps=1, output_tokens=(T.EOS,))


def test_pretrain_checks_its_ints_as_the_solver_does_and_refuses_no_tasks():
    """``pretrain`` once refused ``steps=np.int64(2)`` (which ``grpo_solver`` accepts for its
    ints), accepted ``True`` for ``steps``, ``batch_size`` and ``chunk``, and failed on an
    empty task set with an unclear JAX gather error."""
    tasks = _tasks()
    _, losses = rl.pretrain(MODEL, tasks, jax.random.key(0), steps=np.int64(2), chunk=np.int32(2))
    assert losses.shape == (2,)
    for name in ("steps", "batch_size", "chunk"):
        kwargs = {"steps": 1, name: True}
        with pytest.raises(ValueError, match=rf"pretrain: {name} must be an int >= 1"):
            rl.pretrain(MODEL, tasks, jax.random.key(0), **kwargs)
    empty = jax.tree.map(lambda x: x[:0], tasks)
    with pytest.raises(ValueError, match="pretrain: the task set is empty"):
        rl.pretrain(MODEL, empty, jax.random.key(0), steps=1)


def test_a_warm_start_survives_the_updates_of_a_run_started_from_it():
    # init outside jit handed the state the caller's own arrays; a donating update deleted
    # them, and the next init (another run from the same base) failed.
    from curriculax.engine._solver import TrainBatch

    train = _tasks()
    _, params = rl.init_policy(MODEL, jax.random.key(0))
    solver = rl.grpo_solver(MODEL, max_new_tokens=SPEC.answer_width, init_params=params)
    state = solver.init(jax.random.key(1))
    rollouts = jax.jit(solver.rollout, static_argnums=3)(state, train, jax.random.key(2), 2)
    n = rollouts.rewards.shape[0]
    batch = TrainBatch(rollouts, solver.credit(rollouts), jnp.zeros(n, jnp.int32), jnp.arange(n))
    jax.jit(solver.update, donate_argnums=0)(state, batch, jax.random.key(3))
    again = solver.init(jax.random.key(4))
    for a, b in zip(jax.tree.leaves(again.params), jax.tree.leaves(params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
