"""Conformance checks any task sampler or admission gate can be run through.

``check_sampler(sampler)`` and ``check_gate(gate)`` drive a component for a few steps on
synthetic results and assert the properties the engine relies on:

- eager == jit: the same ids, votes, states and metrics with and without ``jax.jit``;
- the state keeps its structure, shapes and dtypes across a step (safe as a ``lax.scan``
  carry), and a scan over steps runs;
- a jitted step is traced once, not again on the second call;
- ``vmap`` over 4 seeds matches 4 separate runs;
- an Orbax save/restore round-trip returns the same state, NamedTuples included;
- padding rows (an id past the pool, no valid rollout, no trainable token; what the host driver adds
  to reach a power-of-two batch) leave the state and the real rows' votes unchanged.
- no two leaves of the initial state are one array (the engine donates the state).

Each raises ``AssertionError`` with a message that says which property failed.

Example:
  >>> import curriculax as cx
  >>> from curriculax.testing import check_sampler
  >>> check_sampler(cx.samplers.difficulty_pools(64), num_tasks=64)
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from curriculax import _spread
from curriculax._curriculum import PAD_ID, mask_rows, pad_id
from curriculax._types import AdmissionGate, GroupResults, TaskDraw, TaskSampler

__all__ = ["check_gate", "check_sampler", "group_results", "synthetic_results"]


def group_results(task_ids, rewards, valid=None) -> GroupResults:
    """Finished groups with the given rewards, for tests: ``rewards`` is ``[G][K]``,
    ``valid`` defaults to all True, advantages are the rewards minus the mean of the group's
    valid rollouts (sequence-level, ``T = 1``), trainable where valid; exactly 0 in a group
    whose valid rewards are all equal (decided exactly: their float32 mean may differ).

    Example:
      >>> r = group_results([3, 5], [[1.0, 0.0], [1.0, 1.0]])
      >>> r.advantages[:, :, 0].tolist()
      [[0.5, -0.5], [0.0, 0.0]]
    """
    rewards = jnp.asarray(rewards, jnp.float32)
    valid = jnp.ones(rewards.shape, bool) if valid is None else jnp.asarray(valid, bool)
    count = jnp.maximum(jnp.sum(valid, axis=1, keepdims=True), 1)
    mean = jnp.sum(jnp.where(valid, rewards, 0.0), axis=1, keepdims=True) / count
    adv = jnp.where(
        valid & _spread.varies(rewards, valid, axis=1, keepdims=True), rewards - mean, 0.0
    )
    return GroupResults(
        jnp.asarray(task_ids, jnp.int32), rewards, valid, adv[:, :, None], valid[:, :, None]
    )


def synthetic_results(
    key: jax.Array, task_ids: jax.Array, group_size: int = 4, tokens: int = 2
) -> GroupResults:
    """Random finished groups for ``task_ids: i32[G]``: Bernoulli rewards, a few invalid
    rollouts, group-relative advantages broadcast over ``tokens`` positions, some groups
    whose rewards are all equal (zero advantage), and answer ids from three values (so some
    groups contradict themselves). A pure function of its inputs.
    """
    g = task_ids.shape[0]
    # One PRNG call (cheap to compile), then thresholds on independent bit fields.
    bits = jax.random.bits(key, (g, group_size, tokens + 3), jnp.uint32) >> 8
    unit = bits.astype(jnp.float32) / float(1 << 24)
    rewards = (unit[:, :, 0] < 0.5).astype(jnp.float32)
    same = unit[:, :1, 1] < 0.3
    rewards = jnp.where(same, rewards[:, :1], rewards)
    valid = unit[:, :, 2] < 0.9
    count = jnp.maximum(valid.sum(1, keepdims=True), 1)
    mean = jnp.where(valid, rewards, 0).sum(1, keepdims=True) / count
    adv = jnp.where(valid, rewards - mean, 0.0)
    mask = (unit[:, :, 3:] < 0.8) & valid[:, :, None]
    advantages = jnp.where(mask, adv[:, :, None], 0.0)
    # Answer ids from 3 values, so some rollouts share an answer (and some contradict).
    answers = jax.random.randint(jax.random.fold_in(key, 1), (g, group_size), 0, 3)
    return GroupResults(task_ids.astype(jnp.int32), rewards, valid, advantages, mask, answers)


def _chex(check: Callable[[], None], message: str) -> None:
    """Runs a chex assertion; on failure re-raises with ``message`` in front of chex's own
    (which names the differing leaf by its path)."""
    try:
        check()
    except AssertionError as e:
        raise AssertionError(f"{message}: {e}") from None


def _assert_same_layout(before, after, what: str) -> None:
    hint = "it cannot be a lax.scan carry; fix its dtypes and shapes"
    _chex(
        lambda: chex.assert_trees_all_equal_structs(before, after),
        f"{what}: the state's tree structure changed across a step ({hint})",
    )
    _chex(
        lambda: chex.assert_trees_all_equal_shapes_and_dtypes(before, after),
        f"{what}: a state leaf changed its shape or dtype across a step ({hint})",
    )


def _assert_equal(a, b, what: str) -> None:
    """Same structure, shapes and dtypes; floats within ``rtol=1e-5, atol=1e-6`` (NaN equals
    NaN), everything else exactly."""
    _chex(lambda: chex.assert_trees_all_equal_structs(a, b), f"{what}: structures differ")
    _chex(
        lambda: chex.assert_trees_all_equal_shapes_and_dtypes(a, b),
        f"{what}: shapes or dtypes differ",
    )

    def part(tree, floats: bool):
        def keep(x):
            return x if jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating) == floats else None

        return jax.tree.map(keep, tree)

    _chex(
        lambda: chex.assert_trees_all_close(part(a, True), part(b, True), rtol=1e-5, atol=1e-6),
        f"{what}: values differ",
    )
    _chex(
        lambda: chex.assert_trees_all_equal(part(a, False), part(b, False)),
        f"{what}: values differ",
    )


def _orbax_roundtrip(state, what: str, directory: str | None) -> None:
    import orbax.checkpoint as ocp

    if not jax.tree.leaves(state):
        return  # nothing to save: an empty state restores trivially
    # A failed save can leave Orbax's background writes landing in the directory while it is
    # removed ("Directory not empty"); the cleanup must not hide the failure it reports.
    with tempfile.TemporaryDirectory(dir=directory, ignore_cleanup_errors=True) as tmp:
        path = os.path.abspath(os.path.join(tmp, "state"))
        ckpt = ocp.StandardCheckpointer()
        try:
            ckpt.save(path, state)
            ckpt.wait_until_finished()
            restored = ckpt.restore(path, jax.eval_shape(lambda: state))
        except Exception as e:  # Orbax refuses some leaves (zero-size arrays, Python scalars)
            raise AssertionError(
                f"{what}: Orbax could not save and restore the state "
                f"({type(e).__name__}: {e}); every leaf must be a non-empty array"
            ) from None
        finally:
            ckpt.close()
    if jax.tree.structure(restored) != jax.tree.structure(state):
        raise AssertionError(
            f"{what}: Orbax restore changed the state's structure "
            f"({jax.tree.structure(state)} -> {jax.tree.structure(restored)})"
        )
    _assert_equal(state, restored, f"{what}: Orbax round-trip")


def _check_component(
    init: Callable,
    step: Callable[[Any, jax.Array], tuple[Any, Any]],
    metrics: Callable,
    what: str,
    steps: int,
    seed: int,
    checkpoint_dir: str | None,
    check_output: Callable[[Any], None],
) -> Any:
    """Runs the checks; returns the state after ``steps`` eager steps."""
    key = jax.random.key(seed)
    init_key, run_key = jax.random.split(key)

    def run(init_fn, step_fn, metrics_fn, k_init, k_run):
        state = init_fn(k_init)
        outs, states = [], [state]
        for i in range(steps):
            out, state = step_fn(state, jax.random.fold_in(k_run, i))
            outs.append(out)
            states.append(state)
        return outs, states, metrics_fn(state)

    # eager == jit
    eager = run(init, step, metrics, init_key, run_key)
    # the engine donates the state: two leaves sharing one buffer make the call fail
    leaves = jax.tree.leaves(eager[1][0])
    if len({id(x) for x in leaves}) != len(leaves):
        raise AssertionError(
            f"{what}: init returned a state in which two leaves are the same array; a donated "
            "state must hold each buffer once (create each field's array separately)"
        )
    for out in eager[0]:
        check_output(out)
    traces = {"n": 0}

    def counted_step(state, k):
        traces["n"] += 1
        return step(state, k)

    jit_step = jax.jit(counted_step)
    jit_init, jit_metrics = jax.jit(init), jax.jit(metrics)
    jitted = run(jit_init, jit_step, jit_metrics, init_key, run_key)
    _assert_equal(eager[0], jitted[0], f"{what}: eager vs jit outputs")
    _assert_equal(eager[1], jitted[1], f"{what}: eager vs jit states")
    _assert_equal(eager[2], jitted[2], f"{what}: eager vs jit metrics")
    for m_key, value in eager[2].items():
        if jnp.shape(value) != ():
            raise AssertionError(
                f"{what}: metric {m_key!r} must be a scalar, got {jnp.shape(value)}"
            )

    # no retrace on later calls (the first jitted step traced once for all `steps` calls)
    if traces["n"] != 1:
        raise AssertionError(
            f"{what}: the jitted step was traced {traces['n']} times over {steps} calls; "
            "a state leaf probably changes dtype, shape or weak type between steps"
        )

    # structure, shapes and dtypes fixed across steps; lax.scan accepts it as a carry
    for i in range(1, len(eager[1])):
        _assert_same_layout(eager[1][0], eager[1][i], f"{what}: step {i}")

    def scan_body(state, k):
        out, state = step(state, k)
        return state, out

    keys = jax.vmap(lambda i: jax.random.fold_in(run_key, i))(jnp.arange(steps))
    scan_fn = jax.jit(lambda s, ks: jax.lax.scan(scan_body, s, ks))
    final, scanned = scan_fn(init(init_key), keys)
    _assert_equal(eager[1][-1], final, f"{what}: lax.scan vs step-by-step final state")
    _assert_equal(
        jax.tree.map(lambda *xs: jnp.stack(xs), *eager[0]), scanned, f"{what}: lax.scan outputs"
    )

    # vmap over 4 seeds == 4 separate runs (the separate runs reuse the compiled scan)
    seeds = jax.random.split(jax.random.key(seed + 1), 4)

    def seed_keys(k):
        ki, kr = jax.random.split(k)
        return ki, jax.vmap(lambda i: jax.random.fold_in(kr, i))(jnp.arange(steps))

    def one_seed(k):
        ki, ks = seed_keys(k)
        final, outs = jax.lax.scan(scan_body, init(ki), ks)
        return outs, final, metrics(final)

    batched = jax.jit(jax.vmap(one_seed))(seeds)
    for i in range(4):
        ki, ks = seed_keys(seeds[i])
        final, outs = scan_fn(jit_init(ki), ks)
        _assert_equal(
            jax.tree.map(lambda x, i=i: x[i], batched),
            (outs, final, jit_metrics(final)),
            f"{what}: vmap over seeds, seed {i}",
        )

    # Orbax round-trip of a state that has been stepped
    _orbax_roundtrip(eager[1][-1], what, checkpoint_dir)
    return eager[1][-1]


def _check_padding(fn: Callable, state, results: GroupResults, what: str, pad: int) -> None:
    """``fn(state, results) -> (out, state)`` must treat padding rows as absent: the same
    state, and the same output on the real rows, with three padding rows appended."""
    g = results.task_ids.shape[0]
    if g == 0:
        return
    extra = 3
    take = jnp.arange(g + extra) % g  # the padding rows start as copies of real rows
    real = jnp.arange(g + extra) < g
    padded = mask_rows(jax.tree.map(lambda x: x[take], results), real, pad)
    out, plain = fn(state, results)
    out_padded, with_padding = fn(state, padded)
    _assert_equal(
        plain,
        with_padding,
        f"{what}: padding rows (task id {pad}, no valid rollout, no trainable token) changed the "
        "state; a component must ignore them (the host driver pads batches with them)",
    )
    if out is not None:
        _assert_equal(
            out, out_padded[:g], f"{what}: padding rows changed the votes on the real rows"
        )


def check_sampler(
    sampler: TaskSampler,
    *,
    num_tasks: int = 32,
    num: int = 8,
    group_size: int = 4,
    steps: int = 3,
    seed: int = 0,
    checkpoint_dir: str | None = None,
) -> None:
    """Runs a sampler through the conformance checks (see the module docstring).

    Each step samples ``num`` tasks and observes synthetic results for them. Ids must lie in
    ``[0, num_tasks)``, and in ``[0, sampler.num_tasks)`` when the sampler declares it.

    Args:
      sampler: the :class:`~curriculax.TaskSampler` to check.
      num_tasks: ids must lie in ``[0, num_tasks)`` (a sampler that hands out payloads
        with ids past its pool, like the frontier sampler, passes its full id range).
      num: tasks per ``sample`` call.
      group_size: rollouts per synthetic group.
      steps: steps per run.
      seed: seed of the synthetic data.
      checkpoint_dir: where to put the temporary Orbax checkpoint (default: system temp).

    Raises:
      AssertionError: naming the property that failed.
    """
    if not isinstance(sampler, TaskSampler):
        raise TypeError(f"check_sampler takes a TaskSampler, got {type(sampler).__name__}")

    def step(state, key):
        k_sample, k_results = jax.random.split(key)
        drawn, state = sampler.sample(state, k_sample, num)
        ids = drawn.ids if isinstance(drawn, TaskDraw) else drawn
        state = sampler.observe(state, synthetic_results(k_results, ids, group_size))
        return drawn, state

    def check_ids(drawn):
        ids = np.asarray(drawn.ids if isinstance(drawn, TaskDraw) else drawn)
        if ids.shape != (num,) or ids.dtype != np.int32:
            raise AssertionError(
                f"sampler: sample must return int32[num={num}], got {ids.dtype}{list(ids.shape)}"
            )
        if num and (ids.min() < 0 or ids.max() >= num_tasks):
            raise AssertionError(f"sampler: ids {ids.tolist()} fall outside [0, {num_tasks})")
        declared = sampler.num_tasks
        if declared is not None and num and (ids.min() < 0 or ids.max() >= declared):
            raise AssertionError(
                f"sampler: ids {ids.tolist()} fall outside its declared range "
                f"[0, num_tasks={declared})"
            )

    state = _check_component(
        sampler.init, step, sampler.metrics, "sampler", steps, seed, checkpoint_dir, check_ids
    )
    k_sample, k_results = jax.random.split(jax.random.key(seed + 2))
    drawn, state = sampler.sample(state, k_sample, num)
    ids = drawn.ids if isinstance(drawn, TaskDraw) else drawn
    results = synthetic_results(k_results, ids, group_size)
    _check_padding(
        lambda s, r: (None, sampler.observe(s, r)), state, results, "sampler", pad_id(sampler)
    )


def check_gate(
    gate: AdmissionGate,
    *,
    groups: int = 8,
    group_size: int = 4,
    tokens: int = 2,
    steps: int = 3,
    seed: int = 0,
    checkpoint_dir: str | None = None,
) -> None:
    """Runs an admission gate through the conformance checks (see the module docstring).

    Each step asks the gate about ``groups`` synthetic groups; the vote must be
    ``bool[groups]``.

    Raises:
      AssertionError: naming the property that failed.
    """
    if not isinstance(gate, AdmissionGate):
        raise TypeError(f"check_gate takes an AdmissionGate, got {type(gate).__name__}")

    def step(state, key):
        ids = jax.random.randint(key, (groups,), 0, 1000)
        vote, state = gate.admit(state, synthetic_results(key, ids, group_size, tokens))
        return vote, state

    def check_vote(vote):
        if jnp.shape(vote) != (groups,) or jnp.asarray(vote).dtype != jnp.bool_:
            raise AssertionError(
                f"gate: admit must return bool[G={groups}], got "
                f"{jnp.asarray(vote).dtype}{list(jnp.shape(vote))}"
            )

    state = _check_component(
        gate.init, step, gate.metrics, "gate", steps, seed, checkpoint_dir, check_vote
    )
    key = jax.random.key(seed + 2)
    results = synthetic_results(
        key, jax.random.randint(key, (groups,), 0, 1000), group_size, tokens
    )
    _check_padding(gate.admit, state, results, "gate", PAD_ID)
