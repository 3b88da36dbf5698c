"""The no-progress guard: ``stall_windows`` batch-equivalents in a row with no admitted group
stop the run with ``CurriculumStalled`` (or warn); any admitted group resets the count."""

import functools
import math

import pytest
from engine_test_helpers import (
    id_pool,
    id_solver,
    in_order,
    open_gate,
    opens_after,
    periodic_gate,
    read_jsonl,
    reject_gate,
    trained,
)

import curriculax as cx
from curriculax.engine import CurriculumStalled, Engine, EngineConfig, Env, run

N = 512


def _engine(gates, *, batch=4, generation=None, windows=3, policy="raise", name="stuck"):
    env = Env(name, id_pool(N), cx.curriculum(in_order(N), gates), group_size=2)
    config = EngineConfig(
        batch_groups=batch,
        groups_per_generation=generation,
        stall_windows=windows,
        stall_policy=policy,
    )
    return Engine(id_solver(), [env], config)


@functools.cache
def _rejecting(generation: int) -> Engine:
    """Every group rejected by a built-in gate: advantages +-0.5 all lie in [-10, 10]."""
    gates = {"zero_adv": cx.gates.advantage_range(-10.0, 10.0), "mine": open_gate()}
    return _engine(gates, generation=generation)


def _stall(engine, tmp_path) -> tuple[str, list[dict]]:
    with pytest.raises(CurriculumStalled) as info:
        run(engine, steps=5, run_dir=tmp_path, progress=False)
    return str(info.value), read_jsonl(tmp_path / "traces.jsonl")


@pytest.mark.parametrize("generation", [4, 3, 5])
def test_guard_fires_after_exactly_the_configured_windows(generation, tmp_path):
    """B = 4, stall_windows = 3: the run stops at the first generation batch that brings the
    groups since the last admission to 3 x 4 = 12 or more (G = 4: 3 batches, 12 groups;
    G = 3: 4 batches, 12 groups; G = 5: 3 batches, 15 groups)."""
    _, traces = _stall(_rejecting(generation), tmp_path)
    batches = math.ceil(3 * 4 / generation)
    assert len(traces) == batches * generation
    assert sorted({t["generation"] for t in traces}) == list(range(batches))
    assert not any(t["admitted"] for t in traces)


def test_stall_message_names_env_gate_rate_and_what_to_check(tmp_path):
    message, _ = _stall(_rejecting(4), tmp_path)
    assert "3 consecutive batch-equivalents" in message
    assert "env 'stuck': 12 groups since the last admission" in message
    assert "gate 'zero_adv' admit rate 0.00" in message
    assert "What to check:" in message
    assert "gate 'zero_adv' rejects every group" in message


def test_stall_message_says_when_the_votes_cover_only_the_groups_since_a_resume():
    """The groups since the last admission are checkpointed, each gate's votes are counted by
    the process: after a resume the rates once read as if over every group."""
    from curriculax.engine._guard import stall_message

    def text(voted):  # 12 groups since the last admission, gate "g" voted on `voted`
        return stall_message(
            windows=3,
            batch_groups=4,
            since_progress={"e": 12},
            gate_votes={"e": {"g": (0, voted)}},
            curriculum_metrics={},
        )

    assert "admit rate 0.00 (0/4) (votes over the last 4 of them: the run resumed" in text(4)
    assert "resumed" not in text(12)


def test_stall_message_names_every_gate_of_the_env(tmp_path):
    """Each gate's admit rate is named, including gates that publish no ``admit_rate``
    metric of their own (the engine sees every gate's votes)."""
    message, _ = _stall(_rejecting(4), tmp_path)
    assert "gate 'mine' admit rate 1.00" in message
    assert "no gates" not in message


def test_guard_names_gates_that_publish_no_metrics(tmp_path):
    """A user's own gates (no metrics at all): the message must still name them, not claim the
    env has no gates."""
    engine = _engine({"picky": reject_gate(), "lenient": open_gate()}, name="custom")
    with pytest.raises(CurriculumStalled) as info:
        run(engine, steps=1, progress=False, traces=False)
    message = str(info.value)
    assert "env 'custom'" in message
    assert "gate 'picky' admit rate 0.00" in message
    assert "gate 'lenient' admit rate 1.00" in message
    assert "no gates" not in message


def test_any_admitted_group_resets_the_count():
    """One group admitted every 3rd generation batch: at most 2 windows without progress, so
    with stall_windows = 3 the guard never fires (8 admissions need 24 batches)."""
    result = run(_engine({"periodic": periodic_gate(3)}), steps=2, progress=False, traces=False)
    assert result.stopped == "completed"
    assert int(result.state.counters.generations) == 24
    # The first group of batches 3, 6, 9, ... (ids 8, 20, 32, ...).
    assert [i for _, i in trained(result.state.solver)] == [8 + 12 * j for j in range(8)]


def test_one_window_more_between_admissions_fires(tmp_path):
    """One group admitted every 4th batch: 3 silent windows come first, and the guard fires
    after the 3rd batch, before the admitting 4th."""
    engine = _engine({"periodic": periodic_gate(4)})
    with pytest.raises(CurriculumStalled):
        run(engine, steps=1, run_dir=tmp_path, progress=False)
    assert len(read_jsonl(tmp_path / "traces.jsonl")) == 3 * 4


def test_warn_policy_keeps_going_and_warns():
    """Closed for 5 generation batches (5 windows, stall_windows = 2), then open."""
    engine = _engine({"late": opens_after(5)}, windows=2, policy="warn", name="slow")
    with pytest.warns(UserWarning, match="no group was admitted") as record:
        result = run(engine, steps=2, progress=False, traces=False)
    assert result.stopped == "completed"
    assert int(result.state.counters.updates) == 2
    assert [i for _, i in trained(result.state.solver)] == list(range(20, 28))
    messages = [str(w.message) for w in record if "no group was admitted" in str(w.message)]
    assert any("env 'slow'" in m and "What to check:" in m for m in messages)


def test_stall_message_after_a_continue_names_the_gates_of_an_env_not_drawn_since():
    """Gate votes are counted by the process, the groups since the last admission come with
    the state: an env with gates that the continued run has not drawn has groups but no votes,
    and once read "no gates". Here ``alpha`` and ``beta`` both rejected groups before the
    continue; the continued run (``alpha``'s weight now 0) draws only ``beta``."""
    import jax.numpy as jnp

    def envs(alpha_weight):
        return [
            Env(
                "alpha",
                id_pool(64),
                cx.curriculum(in_order(64), {"nope": reject_gate()}),
                2,
                weight=alpha_weight,
            ),
            Env(
                "beta",
                {"id": jnp.arange(100, 164, dtype=jnp.int32)},
                cx.curriculum(in_order(64), {"never": reject_gate()}),
                2,
            ),
        ]

    config = EngineConfig(batch_groups=4, groups_per_generation=2, stall_windows=1)
    before = Engine(id_solver(), envs(1.0), config)
    state = before.init()
    drawn = set()
    while len(drawn) < 2:
        state, gen = before.generate(state)
        drawn.add(int(gen.env))
        assert int(gen.generation) < 50
    after = Engine(id_solver(), envs(0.0), config)
    with pytest.raises(CurriculumStalled) as info:
        run(after, steps=1, state=state, progress=False, traces=False)
    message = str(info.value)
    assert "no gates" not in message
    assert "env 'alpha'" in message
    assert "gate 'nope': no votes counted (the run resumed" in message
    assert "gate 'never' admit rate 0.00 (0/2)" in message


def test_stall_message_names_configured_gates_without_votes():
    from curriculax.engine._guard import stall_message

    def text(gates):
        return stall_message(
            windows=3,
            batch_groups=4,
            since_progress={"e": 12},
            gate_votes={},
            curriculum_metrics={},
            gates=gates,
        )

    assert "gates 'a', 'b': no votes counted" in text({"e": ["a", "b"]})
    assert "no gates" in text({"e": []})


def test_the_groups_since_progress_of_each_env_saturate():
    """``since_progress_by_env`` saturates at the int32 maximum like the other counters (it
    wrapped to negative, and the stall message then left the env out)."""
    import jax.numpy as jnp
    import numpy as np

    from curriculax.engine._loop import _stall_text

    top = 2**31 - 1
    engine = _engine({"g": reject_gate()}, name="e")
    state = engine.init()
    state = state._replace(
        counters=state.counters._replace(since_progress=jnp.int32(top - 5)),
        since_progress_by_env=jnp.array([top - 5], jnp.int32),
    )
    for _ in range(2):
        state, _ = engine.generate(state)
    assert np.asarray(state.since_progress_by_env).tolist() == [top]
    assert int(state.counters.since_progress) == top
    message = _stall_text(engine, state, top // 4, {})
    assert f"env 'e': {top} groups since the last admission" in message


def test_stall_message_names_task_ids_outside_the_pool():
    """A sampler handing out ids past its pool stalled with "check the rollout/verifier" and
    no word of the ids (their groups count as failed too)."""
    from curriculax.engine.synthetic import synthetic_solver, synthetic_tasks

    n = 16
    u = cx.samplers.uniform(n)
    past = cx.TaskSampler(
        u.init, lambda s, k, num: (u.sample(s, k, num)[0] + n, s), u.observe, u.metrics, n
    )
    env = Env("a", synthetic_tasks(n), cx.curriculum(past), group_size=4)
    engine = Engine(synthetic_solver(), [env], EngineConfig(4, stall_windows=2))
    with pytest.raises(CurriculumStalled) as info:
        run(engine, steps=3, progress=False)
    text = str(info.value)
    assert "failed groups so far 8 (8 with a task id outside the pool)" in text
    assert "task ids outside the pool [0, num_tasks)" in text
    assert "check the rollout/verifier" not in text  # every failed group is out of range
