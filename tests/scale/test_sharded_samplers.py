"""Samplers with per-task state split over 4 fake CPU devices (``shard_map``, as the engine runs
``Env(shard_tasks=True)``) draw exactly what the unsplit sampler draws and end in the same
state; a gate with per-task state votes as the unsplit one does; each refuses split state when
built without the mesh axis. One subprocess (the device count is fixed when JAX starts)
checks every entry."""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = r"""
import jax

jax.config.update("jax_num_cpu_devices", 4)
import numpy as np

import curriculax as cx
from curriculax.engine import _mesh
from curriculax.testing import synthetic_results

N, NUM, STEPS = 64, 8, 12
SAMPLERS = {
    "learnability": lambda axis: cx.samplers.learnability(N, axis_name=axis),
    # Copies spread over the devices: entry i holds task i % 12, its state at entry i % 12.
    "learnability_repeated_entries": lambda axis: cx.samplers.learnability(
        N, entry_task=np.arange(N) % 12, axis_name=axis
    ),
    # every task ties (a posterior mean, no unseen-first): the tie pass runs split as well
    "learnability_mean_ties": lambda axis: cx.samplers.learnability(
        N, draw="mean", unseen_first=False, half_life=None, axis_name=axis
    ),
    "learning_progress": lambda axis: cx.samplers.learning_progress(
        N, patience=1.0, noise_visits=2, axis_name=axis
    ),
    "learning_progress_repeated_entries": lambda axis: cx.samplers.learning_progress(
        N, patience=1.0, noise_visits=2, entry_task=np.arange(N) % 12, axis_name=axis
    ),
    "floor": lambda axis: cx.samplers.floor(
        N,
        cx.samplers.learnability(N, draw="mean", uniform_share=0.3, axis_name=axis),
        uniform_share=0.2,
        staleness_share=0.3,
        axis_name=axis,
    ),
    "reward_consistency": lambda axis: cx.samplers.reward_consistency(
        N, cx.samplers.learnability(N, axis_name=axis), axis_name=axis
    ),
    # A proof marks every copy of its task, copies spread over the devices.
    "reward_consistency_repeated_entries": lambda axis: cx.samplers.reward_consistency(
        N,
        cx.samplers.learnability(N, entry_task=np.arange(N) % 12, axis_name=axis),
        axis_name=axis,
    ),
    # A gate with per-task state: its votes and marks must not depend on the split either.
    "reward_consistency_gate": lambda axis: (
        cx.samplers.learnability(N, axis_name=axis),
        {"consistency": cx.gates.reward_consistency(N, axis_name=axis)},
    ),
    "reward_consistency_gate_repeated_entries": lambda axis: (
        cx.samplers.learnability(N, axis_name=axis),
        {
            "consistency": cx.gates.reward_consistency(
                N, entry_task=np.arange(N) % 12, axis_name=axis
            )
        },
    ),
    # The category rates are summed over the devices (categories spread across them).
    "hierarchical_learnability": lambda axis: cx.samplers.hierarchical_learnability(
        N, np.arange(N) % 3, axis_name=axis
    ),
    "robust_curriculum": lambda axis: cx.robust_curriculum(N, np.arange(N) % 3, axis_name=axis),
    "skip_zero_variance": lambda axis: cx.samplers.skip_zero_variance(
        N,
        cx.samplers.difficulty_pools(N, score_half_life=0.5, axis_name=axis),
        initial_p=0.0,
        axis_name=axis,
    ),
    "skip_solved_repeated_entries": lambda axis: cx.samplers.skip_zero_variance(
        N,
        cx.samplers.uniform(N),
        skip="solved",
        target_share=0.0,
        entry_task=np.arange(N) % 12,
        axis_name=axis,
    ),
    "skip_solved_forgetting_replay": lambda axis: cx.samplers.skip_zero_variance(
        N,
        cx.samplers.uniform(N),
        skip="solved",
        replay="forgetting",
        entry_task=np.arange(N) % 12,
        axis_name=axis,
    ),
    "skip_solved_inner_replacements": lambda axis: cx.samplers.skip_zero_variance(
        N,
        cx.samplers.learnability(N, axis_name=axis),
        skip="solved",
        replace="inner",
        entry_task=np.arange(N) % 12,
        axis_name=axis,
    ),
}
mesh = _mesh.make_mesh(4)


def as_curriculum(c):
    if isinstance(c, cx.Curriculum):
        return c
    return cx.curriculum(c) if isinstance(c, cx.TaskSampler) else cx.curriculum(*c)


for name, make in SAMPLERS.items():
    plain, split = (as_curriculum(c) for c in (make(None), make("data")))
    state = plain.init(jax.random.key(0))
    sharded = _mesh.shard_curriculum(split, mesh, "data", _mesh.per_task_specs(state, "data"))

    def stepper(cur):
        def step(state, key):
            k_s, k_r = jax.random.split(key)
            ids, state = cur.sample(state, k_s, NUM)
            admission, state = cur.observe(state, synthetic_results(k_r, ids))
            return (ids, admission.admitted), state, cur.metrics(state)

        return jax.jit(step)

    runs = []
    for cur in (plain, sharded):
        s, outs = state, []
        step = stepper(cur)
        for i in range(STEPS):
            ids, s, m = step(s, jax.random.key(100 + i))
            outs.append((np.asarray(ids), {k: float(v) for k, v in m.items()}))  # ids over votes
        runs.append((outs, s))
    for i, ((a, ma), (b, mb)) in enumerate(zip(runs[0][0], runs[1][0])):
        assert np.array_equal(a, b), (name, i, a, b)
        for k in ma:
            assert abs(ma[k] - mb[k]) <= 1e-4 * max(1.0, abs(ma[k])), (name, i, k, ma[k], mb[k])
    split_leaves = [x for x in jax.tree.leaves(runs[1][1]) if x.ndim == 1 and x.shape[0] == N]
    assert split_leaves and all(
        x.sharding.shard_shape(x.shape) == (N // 4,) for x in split_leaves
    ), name  # the per-task state really was split
    for x, y in zip(jax.tree.leaves(runs[0][1]), jax.tree.leaves(runs[1][1])):
        assert np.allclose(np.asarray(x), np.asarray(y), rtol=1e-6), name
    print("ok", name)

# Split state handed to a component built without the mesh axis (or with another one) is
# refused when traced: unchecked, each device took its slice for the whole pool.
MISBUILT = {
    **{f"{name} without axis_name": (make, None) for name, make in SAMPLERS.items()},
    "learnability with another axis": (SAMPLERS["learnability"], "batch"),
    "inner sampler without axis_name": (
        lambda axis: cx.samplers.floor(
            N, cx.samplers.learnability(N), uniform_share=0.2, axis_name=axis
        ),
        "data",
    ),
    "gate without axis_name": (
        lambda axis: (
            cx.samplers.learnability(N, axis_name=axis),
            {"consistency": cx.gates.reward_consistency(N)},
        ),
        "data",
    ),
}
# The refusal names the sampler built without the axis (these two once said "learnability").
WHO = {
    f"{name} without axis_name": name
    for name in ("learning_progress", "learning_progress_repeated_entries",
                 "hierarchical_learnability")
}
for name, (make, axis) in MISBUILT.items():
    cur = as_curriculum(make(axis))
    state = cur.init(jax.random.key(0))
    sharded = _mesh.shard_curriculum(cur, mesh, "data", _mesh.per_task_specs(state, "data"))

    def step(state, key):
        ids, state = sharded.sample(state, key, NUM)
        admission, state = sharded.observe(state, synthetic_results(key, ids))
        return ids, state

    try:
        jax.jit(step)(state, jax.random.key(1))
    except ValueError as e:
        assert "per-task state holds 16 of the pool's 64 tasks" in str(e), (name, str(e))
        who = WHO.get(name, "").removesuffix("_repeated_entries")
        assert str(e).startswith(who), (name, str(e))
        print("refused", name)
    else:
        print("not refused", name)
"""


def test_split_samplers_draw_what_unsplit_ones_draw():
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    names = re.findall(r'^    "(\w+)": ', SCRIPT, re.MULTILINE)  # the entries of SAMPLERS
    assert len(names) > 10
    misbuilt = [f"refused {name} without axis_name" for name in names] + [
        "refused learnability with another axis",
        "refused inner sampler without axis_name",
        "refused gate without axis_name",
    ]
    assert out.stdout.split("\n")[:-1] == [f"ok {name}" for name in names] + misbuilt, out.stdout
