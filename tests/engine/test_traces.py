"""The run's outputs: one trace line per finalized group (admitted or not), sampled or off on
request, and one ``metrics.jsonl`` line per update."""

import json
import math

import numpy as np
import pytest
from engine_test_helpers import (
    host,
    id_pool,
    id_solver,
    in_order,
    mod_gate,
    open_gate,
    read_jsonl,
    trained,
)

import curriculax as cx
from curriculax.engine import Engine, EngineConfig, Env, run

N = 1024
STEPS = 40
K = {"a": 2, "b": 3}


@pytest.fixture(scope="module")
def engine():
    """Env ``a``: gates ``mod4`` (multiples of 4) and ``open``; env ``b``: no gate."""
    a = Env(
        "a",
        id_pool(N),
        cx.curriculum(in_order(N), {"mod4": mod_gate(4), "open": open_gate()}),
        group_size=K["a"],
    )
    b = Env("b", id_pool(N), cx.curriculum(in_order(N)), group_size=K["b"])
    return Engine(id_solver(), [a, b], EngineConfig(batch_groups=4))


@pytest.fixture(scope="module")
def full(engine, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("full")
    result = run(engine, steps=STEPS, run_dir=run_dir, progress=False)
    return {
        "state": host(result.state),
        "traces": read_jsonl(run_dir / "traces.jsonl"),
        "metrics": read_jsonl(run_dir / "metrics.jsonl"),
        "dir": run_dir,
    }


def test_every_finalized_group_is_traced_once(full):
    traces, c = full["traces"], full["state"].counters
    assert len(traces) == int(c.groups)
    per_generation = np.bincount([t["generation"] for t in traces])
    assert per_generation.tolist() == [4] * int(c.generations)
    # Within one generation batch the tasks are distinct: no group is written twice.
    seen = {(t["generation"], t["task"]) for t in traces}
    assert len(seen) == len(traces)
    assert sum(not t["admitted"] for t in traces) > 0  # rejected groups are traced too


def test_trace_lines_carry_step_env_key_rewards_admission_and_votes(engine, full):
    keys = {e.name: e.keys for e in engine.envs}
    for t in full["traces"]:
        assert {"step", "env", "key", "rewards", "admitted", "votes"} <= set(t)
        task, env = t["task"], t["env"]
        assert t["key"] == int(keys[env][task])
        assert t["rewards"] == [float((task + k) % 2) for k in range(K[env])]
        if env == "a":
            assert t["votes"] == {"mod4": task % 4 == 0, "open": True}
            assert t["admitted"] == (task % 4 == 0)
        else:
            assert t["votes"] == {}
            assert t["admitted"] is True


def test_trace_step_is_the_number_of_updates_before_the_generation(full):
    generations_at_update = [m["generations"] for m in full["metrics"]]
    for t in full["traces"]:
        assert t["step"] == sum(g <= t["generation"] for g in generations_at_update)


def test_rejected_groups_are_in_traces_and_absent_from_batches(engine, full):
    s = full["state"]
    index = {e.name: i for i, e in enumerate(engine.envs)}
    admitted = [(index[t["env"]], t["task"]) for t in full["traces"] if t["admitted"]]
    rejected = {(index[t["env"]], t["task"]) for t in full["traces"] if not t["admitted"]}
    count = int(s.pending.count)
    waiting = list(
        zip(s.pending.groups.env[:count].tolist(), s.pending.groups.task_ids[:count].tolist())
    )
    # Batches hold exactly the admitted groups, in trace order; the rest wait.
    assert trained(s.solver) + waiting == admitted
    assert not rejected & set(trained(s.solver))
    assert len(trained(s.solver)) == STEPS * 4


def test_traces_off_writes_none(engine, tmp_path):
    run(engine, steps=3, run_dir=tmp_path, progress=False, traces=False)
    assert read_jsonl(tmp_path / "traces.jsonl") == []
    assert len(read_jsonl(tmp_path / "metrics.jsonl")) == 3


@pytest.mark.filterwarnings("error::RuntimeWarning")  # no overflow noise from the hash
def test_sampled_traces_are_a_deterministic_share(engine, full, tmp_path):
    rate = 0.3
    runs = []
    for name in ("one", "two"):
        run(engine, steps=STEPS, run_dir=tmp_path / name, progress=False, traces=rate)
        runs.append((tmp_path / name / "traces.jsonl").read_text())
    assert runs[0] == runs[1]
    sampled = [json.loads(line) for line in runs[0].splitlines()]
    n = len(full["traces"])
    assert abs(len(sampled) - rate * n) <= 4 * math.sqrt(n * rate * (1 - rate))
    # The sampled lines are lines of the full trace, unchanged.
    everything = {json.dumps(t, sort_keys=True) for t in full["traces"]}
    assert all(json.dumps(t, sort_keys=True) in everything for t in sampled)


def test_metrics_jsonl_has_one_namespaced_line_per_update(engine, full):
    metrics, traces = full["metrics"], full["traces"]
    assert [m["step"] for m in metrics] == list(range(1, STEPS + 1))
    times = [m["time"] for m in metrics]
    assert all(isinstance(x, float) for x in times) and times == sorted(times)
    for m in metrics:
        done = [t for t in traces if t["generation"] < m["generations"]]
        assert m["rollouts"] == sum(K[t["env"]] for t in done)
        assert m["groups"] == len(done)
        assert m["batch/a"] + m["batch/b"] == 1.0
        for env in ("a", "b"):
            assert f"curriculum/{env}/admission_rate" in m
            assert f"curriculum/{env}/sampler/cursor" in m
        assert "curriculum/a/gate/mod4/calls" not in m  # the gate publishes no metrics
    last = metrics[-1]
    state = full["state"]
    assert last["curriculum/b/sampler/cursor"] == float(state.curricula["b"].sampler.cursor)
    assert last["curriculum/a/groups"] == float(state.curricula["a"].groups)
