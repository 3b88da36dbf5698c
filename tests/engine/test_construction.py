"""Construction-time checks: settings that cannot work fail at once, with what to change."""

import jax.numpy as jnp
import pytest
from engine_test_helpers import id_pool, id_solver, in_order, open_gate

import curriculax as cx
from curriculax.engine import Engine, EngineConfig, Env, Rollouts, run
from curriculax.engine.synthetic import synthetic_solver, synthetic_tasks


def _zero_advantage():
    return {"zero_advantage": cx.gates.advantage_range(0.0, 0.0)}


def _single(gates, group_size=1):
    return Env("solo", synthetic_tasks(16), cx.curriculum(in_order(16), gates), group_size)


def test_group_size_one_with_a_zero_advantage_gate_under_group_relative_credit_fails():
    with pytest.raises(ValueError) as info:
        Engine(synthetic_solver(), [_single(_zero_advantage())], EngineConfig(4))
    message = str(info.value)
    assert "env 'solo'" in message
    assert "group_size=1 with gate(s) ['zero_advantage']" in message
    assert "group-relative" in message
    assert "Use group_size >= 2, or remove the gate" in message


def test_group_size_one_is_fine_without_a_gate_or_with_an_admitting_gate():
    Engine(synthetic_solver(), [_single(None)], EngineConfig(4))
    Engine(synthetic_solver(), [_single({"open": open_gate()})], EngineConfig(4))
    Engine(synthetic_solver(), [_single(_zero_advantage(), group_size=2)], EngineConfig(4))


def test_group_size_one_with_a_zero_advantage_gate_is_fine_under_absolute_credit():
    def baseline_credit(rollouts):  # reward minus a fixed baseline: not group-relative
        adv = jnp.where(rollouts.valid, rollouts.rewards - 0.5, 0.0)
        return jnp.where(rollouts.token_mask, adv[:, :, None], 0.0)

    solver = synthetic_solver()._replace(credit=baseline_credit)
    engine = Engine(solver, [_single(_zero_advantage())], EngineConfig(4))
    result = run(engine, steps=2, progress=False, traces=False)  # and it trains
    assert int(result.state.counters.updates) == 2
    assert int(result.state.counters.admitted) == int(result.state.counters.groups) == 8


@pytest.mark.parametrize("field", ["batch_groups", "groups_per_generation", "stall_windows"])
@pytest.mark.parametrize("value", [0, -3])
def test_sizes_below_one_are_rejected(field, value):
    with pytest.raises(ValueError, match=f"{field} must be >= 1, got {value}"):
        EngineConfig(**{"batch_groups": 4, field: value})


def test_group_size_below_one_and_non_int_sizes_are_rejected():
    for k in (0, -1):
        with pytest.raises(ValueError, match=f"env 'x': group_size must be >= 1, got {k}"):
            Env("x", id_pool(4), group_size=k)
    with pytest.raises(TypeError, match="group_size must be an int"):
        Env("x", id_pool(4), group_size=2.5)
    with pytest.raises(TypeError, match="batch_groups must be an int"):
        EngineConfig(batch_groups=True)
    with pytest.raises(TypeError, match="batch_groups must be an int"):
        EngineConfig(batch_groups=4.0)


def test_pending_capacity_smaller_than_one_update():
    with pytest.raises(ValueError, match="pending_capacity=3 is smaller than one update") as info:
        EngineConfig(batch_groups=4, pending_capacity=3)
    assert "batch_groups=4" in str(info.value)


def test_pending_capacity_smaller_than_what_may_wait_after_a_generation():
    """B - 1 + G rows can wait (B - 1 left over, then G admitted)."""
    with pytest.raises(ValueError, match="batch_groups - 1 \\+ groups_per_generation = 7"):
        EngineConfig(batch_groups=4, groups_per_generation=4, pending_capacity=6)
    with pytest.raises(ValueError, match="= 12"):
        EngineConfig(batch_groups=5, groups_per_generation=8, pending_capacity=11)
    assert EngineConfig(batch_groups=4, groups_per_generation=4, pending_capacity=7).capacity == 7
    assert EngineConfig(batch_groups=5, groups_per_generation=8).capacity == 13


def test_other_config_errors():
    with pytest.raises(ValueError, match="stall_policy must be one of"):
        EngineConfig(4, stall_policy="ignore")
    with pytest.raises(ValueError, match=r"env names must be unique, duplicated: \['a'\]"):
        Engine(id_solver(), [Env("a", id_pool(4)), Env("a", id_pool(4))], EngineConfig(2))
    with pytest.raises(ValueError, match="env name must be"):
        Env("a/b", id_pool(4))
    with pytest.raises(ValueError, match="needs at least one Env"):
        Engine(id_solver(), [], EngineConfig(2))


def _rollout_with(data_fn=None, positions=1):
    """The id solver's rollout with other ``data`` or another number of credit positions."""

    def rollout(solver_state, tasks, key, group_size):
        ids = tasks["id"].astype(jnp.int32)
        g = ids.shape[0]
        rewards = ((ids[:, None] + jnp.arange(group_size)) % 2).astype(jnp.float32)
        valid = jnp.ones((g, group_size), bool)
        task = jnp.broadcast_to(ids[:, None], (g, group_size))
        data = {"task": task} if data_fn is None else data_fn(task)
        mask = jnp.broadcast_to(valid[:, :, None], (g, group_size, positions))
        return Rollouts(rewards, valid, mask, data)

    return rollout


@pytest.mark.parametrize(
    ("rollout", "expected"),
    [
        (
            _rollout_with(lambda t: {"task": t.astype(jnp.float32)}),
            r"rollout leaf .*'task'.*float32",
        ),
        (_rollout_with(lambda t: {"task": t, "more": t}), "different structure"),
        (_rollout_with(lambda t: {"task": jnp.stack([t, t], -1)}), r"rollout leaf .*'task'"),
        (_rollout_with(positions=3), r"rollout leaf .*"),
    ],
    ids=["dtype", "structure", "shape", "positions"],
)
def test_envs_whose_rollout_layouts_differ(rollout, expected):
    a = Env("a", id_pool(8), cx.curriculum(in_order(8)), group_size=2)
    b = Env("b", id_pool(8), cx.curriculum(in_order(8)), group_size=2, rollout=rollout)
    with pytest.raises(ValueError, match=expected) as info:
        Engine(id_solver(), [a, b], EngineConfig(2))
    assert "env 'b'" in str(info.value)


def test_a_sampler_built_for_another_pool_size_is_refused():
    """Ids past the pool would be invalidated group by group; the mismatch is caught at once."""
    with pytest.raises(ValueError) as info:
        Env("solo", synthetic_tasks(16), cx.curriculum(cx.samplers.uniform(20)), 2)
    assert "env 'solo'" in str(info.value)
    assert "built for 20 tasks, the pool has 16" in str(info.value)
    Env("solo", synthetic_tasks(16), cx.curriculum(cx.samplers.uniform(16)), 2)


def _ignores_group_size(k, *, field="rewards"):
    """The id solver's rollout, but ``field`` (or all of them) made for ``k`` rollouts a group
    whatever group size it is handed."""
    solver = id_solver()

    def rollout(state, tasks, key, group_size):
        wrong = solver.rollout(state, tasks, key, k)
        if field == "all":
            return wrong
        right = solver.rollout(state, tasks, key, group_size)
        return right._replace(**{field: getattr(wrong, field)})

    return rollout


@pytest.mark.parametrize(
    ("group_size", "k", "field", "got"),
    [
        (4, 3, "all", "rewards of shape (2, 3)"),  # fewer: was padded up and trained
        (2, 3, "all", "rewards of shape (2, 3)"),  # more: failed with an unrelated error
        (4, 3, "valid", "valid of shape (2, 3)"),
        (4, 3, "token_mask", "token_mask of shape (2, 3, 1)"),
    ],
    ids=["fewer", "more", "valid", "token_mask"],
)
def test_a_rollout_that_ignores_the_group_size_is_refused(group_size, k, field, got):
    env = Env("e", id_pool(16), group_size=group_size, rollout=_ignores_group_size(k, field=field))
    with pytest.raises(ValueError) as info:
        Engine(id_solver(), [env], EngineConfig(batch_groups=2))
    message = str(info.value)
    assert "env 'e'" in message
    assert got in message
    assert f"(G=2, group_size={group_size}" in message


def test_a_rollout_returning_the_run_s_largest_group_size_for_a_smaller_env_is_refused():
    """Env ``small`` (K = 2) returns 4 rollouts a group, the run's largest K: nothing to pad,
    so it once trained on them while the budget charged 2 per group."""
    big = Env("big", id_pool(8), group_size=4)
    small = Env("small", id_pool(8), group_size=2, rollout=_ignores_group_size(4))
    with pytest.raises(ValueError, match=r"env 'small'.*rewards of shape \(2, 4\)"):
        Engine(id_solver(), [big, small], EngineConfig(batch_groups=2))


def test_group_size_one_with_a_gate_on_a_one_task_pool():
    """The group-size-one probe needs two groups, also from a pool of one task."""
    for solver, pool in ((id_solver(), id_pool(1)), (synthetic_solver(), synthetic_tasks(1))):
        env = Env("e", pool, cx.curriculum(cx.samplers.uniform(1), {"open": open_gate()}), 1)
        engine = Engine(solver, [env], EngineConfig(batch_groups=2))
        result = run(engine, steps=1, progress=False, traces=False)
        assert int(result.state.counters.updates) == 1
