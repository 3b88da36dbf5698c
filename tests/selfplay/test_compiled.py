"""The compiled round loop: the host path's twin, vmapped over seeds, with an unbiased judge."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curriculax import tasks as T
from curriculax.engine import content_keys
from curriculax.selfplay import (
    PureChallenger,
    compiled_evolve,
    curriculum_evolve,
    host_challenger,
    row_keys,
)
from curriculax.selfplay.toy import (
    capped_solver,
    level_tasks,
    pure_bandit_spec,
    pure_level_bandit,
)


def _held_out():
    held = level_tasks(per_level=48)
    return jax.tree.map(lambda x: x[np.asarray(held["variant"]) >= 40], held)  # disjoint


def test_row_keys_are_the_hosts_content_keys_or_the_tasks_own():
    held = _held_out()
    assert np.array_equal(np.asarray(row_keys(held)), content_keys(held, bits=32))
    pool, _ = T.make_pools(
        jax.random.key(0), T.ReversalSpec(), train_per_level=4, held_out_per_level=2
    )
    assert np.array_equal(np.asarray(row_keys(pool)), np.asarray(pool.key))


def test_the_compiled_round_loop_matches_the_host_path_on_one_seed():
    tasks, held = level_tasks(), _held_out()
    kw = dict(
        rounds=3, steps_per_round=6, generated_per_round=16, frontier_share=0.5, batch_groups=8
    )
    pure = pure_level_bandit(max_level=8)
    compiled = compiled_evolve(
        capped_solver(),
        tasks,
        challenger=pure,
        spec=pure_bandit_spec(8),
        held_out_tasks=held,
        keys=jax.random.key(3)[None],
        **kw,
    )
    host = curriculum_evolve(
        capped_solver(),
        tasks,
        challenger=host_challenger(pure, tasks, 4 * 16),
        spec=pure_bandit_spec(8),
        held_out_tasks=held,
        key=3,
        **kw,
    )
    for field in ("generated", "invalid", "learned", "stuck", "dropped_easy", "rollouts"):
        assert np.asarray(getattr(compiled, field))[0].tolist() == [
            getattr(r, field) for r in host.curriculum
        ], field
    assert sum(r.learned + r.stuck for r in host.curriculum) > 0  # the judge had work
    np.testing.assert_allclose(np.asarray(compiled.r0)[0], [r.r0 for r in host.curriculum])
    np.testing.assert_allclose(np.asarray(compiled.held_out)[0], host.held_out, rtol=1e-6)
    for r, rep in enumerate(host.curriculum):
        np.testing.assert_array_equal(np.asarray(compiled.spec["values"])[0, r], rep.spec["values"])
    assert float(compiled.state.solver.cap[0]) == pytest.approx(float(host.state.solver.cap))


def test_a_frozen_solver_on_the_compiled_path_gets_at_most_5_percent_learned_and_r0_0():
    out = compiled_evolve(
        capped_solver(learning_rate=0.0, initial_cap=2.0),
        level_tasks(),
        challenger=pure_level_bandit(max_level=6),
        spec=pure_bandit_spec(6),
        held_out_tasks=_held_out(),
        keys=jax.random.split(jax.random.key(0), 3),
        rounds=12,
        steps_per_round=8,
        generated_per_round=96,
        frontier_share=0.5,
        batch_groups=32,
    )
    assert np.all(np.asarray(out.state.solver.cap) == 2.0)
    judged = np.asarray(out.learned) + np.asarray(out.stuck)
    total = int(judged.sum())
    assert total >= 300, total
    assert int(np.asarray(out.learned).sum()) / total <= 0.05
    assert abs(float((np.asarray(out.r0) * judged).sum()) / total) <= 0.05


def test_seed_batches_and_the_run_without_a_challenger_match():
    tasks, held = level_tasks(), _held_out()
    kw = dict(rounds=2, steps_per_round=4, batch_groups=8)
    keys = jax.random.split(jax.random.key(5), 3)
    run = lambda **o: compiled_evolve(  # noqa: E731
        capped_solver(),
        tasks,
        challenger=None,
        spec=None,
        held_out_tasks=held,
        keys=keys,
        **kw,
        **o,
    )
    together, batched = run(), run(seed_batch=2)  # batches of 2: the last one padded
    np.testing.assert_array_equal(together.held_out, batched.held_out)
    np.testing.assert_array_equal(together.state.solver.cap, batched.state.solver.cap)
    host = curriculum_evolve(capped_solver(), tasks, held_out_tasks=held, key=keys[1], **kw)
    np.testing.assert_allclose(np.asarray(together.held_out)[1], host.held_out, rtol=1e-6)
    assert np.asarray(together.rollouts)[1].tolist() == [r.rollouts for r in host.curriculum]
    assert int(np.asarray(together.generated).sum()) == 0 and together.spec is None


def test_the_progress_callback_runs_once_per_seed_and_round_and_changes_no_number():
    tasks, held = level_tasks(), _held_out()
    keys = jax.random.split(jax.random.key(7), 3)
    calls = []
    run = lambda **o: compiled_evolve(  # noqa: E731
        capped_solver(),
        tasks,
        challenger=pure_level_bandit(max_level=6),
        spec=pure_bandit_spec(6),
        held_out_tasks=held,
        keys=keys,
        rounds=2,
        steps_per_round=4,
        batch_groups=8,
        **o,
    )
    quiet, ticked = run(), run(progress=lambda score: calls.append(float(score)))
    assert len(calls) == 3 * 2  # seeds x rounds, each with its seed's held-out score
    assert sorted(calls) == sorted(np.asarray(quiet.held_out).ravel().tolist())
    np.testing.assert_array_equal(quiet.held_out, ticked.held_out)
    np.testing.assert_array_equal(quiet.state.solver.cap, ticked.state.solver.cap)
    np.testing.assert_array_equal(quiet.learned, ticked.learned)


def _three_tasks(retry):
    """A pure challenger that draws one of 3 tasks (level 3, variants 1000-1002) per key; spec
    unchanged: every round proposes the same tasks again."""

    def generate(spec, keys):
        variant = jax.vmap(lambda k: jax.random.randint(k, (), 0, 3))(keys) + 1000
        return {"level": jnp.full(keys.shape[:1], 3.0, jnp.float32), "variant": variant}

    def validate(payloads):
        return payloads, jnp.ones(payloads["level"].shape, bool)

    return PureChallenger(generate, validate, lambda spec, judged: spec, retry=retry)


@pytest.mark.parametrize("retry", [True, False])
def test_a_task_still_on_the_frontier_is_not_generated_again_on_either_path(retry):
    # One frontier attempt a round (1 step, 1 frontier group): the 3 tasks of round 0 are
    # still active in rounds 1-2, so the challenger's repeats of them are rejected there.
    # (Before: inserted again, one task in two or three slots, judged twice.)
    tasks, held = level_tasks(), _held_out()
    kw = dict(
        rounds=3, steps_per_round=1, generated_per_round=4, frontier_share=0.5, batch_groups=2
    )
    spec = {"unused": jnp.int32(0)}
    pure = _three_tasks(retry)
    compiled = compiled_evolve(
        capped_solver(),
        tasks,
        challenger=pure,
        spec=spec,
        held_out_tasks=held,
        keys=jax.random.key(0)[None],
        **kw,
    )
    host = curriculum_evolve(
        capped_solver(),
        tasks,
        challenger=host_challenger(pure, tasks, 4 * 4),
        spec=spec,
        held_out_tasks=held,
        key=0,
        **kw,
    )
    generated = [r.generated for r in host.curriculum]
    assert np.asarray(compiled.generated)[0].tolist() == generated
    assert generated[0] == 3 and generated[1:] == [0, 0], generated
    for f, row in (
        (host.state.curricula["train"].sampler, ()),
        (compiled.state.curricula["train"].sampler, (0,)),
    ):
        status, keys = np.asarray(f.status)[row], np.asarray(f.keys)[row]
        live = keys[status != 0]
        assert len(live) == 3 and len(set(live.tolist())) == 3, (status, keys)
        assert int(np.asarray(f.inserted)[row]) == 3
