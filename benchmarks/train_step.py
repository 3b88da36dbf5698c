"""The main job's training step, and the share of it spent in the curriculum.

One generation batch (``engine.generate``: mix, sample, roll out, credit, observe, vote,
append) and one update (``engine.train``) of the main job's default configuration, each a
compiled call timed after compilation (median of ``--repeats``); beside them, the
curriculum's own work in a generation batch (``sample`` then ``observe`` of the same
``Curriculum`` on the same shapes: ``G`` groups of ``K`` rollouts with per-token advantages over
the engine's ``T`` positions), timed as its own compiled program.

Run: ``python -m benchmarks.train_step`` (``--quick`` for a smoke test).
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp

from benchmarks.curriculum_step import machine_info, positive_int
from curriculax.testing import synthetic_results
from experiments import _markdown as md
from experiments._builders import GRPOExperimentConfig, build


def _median(fn, repeats: int, setup=None) -> float:
    """Median seconds of ``fn()`` over ``repeats`` calls after a compile call; ``setup()``, if
    given, runs before each call, untimed."""
    if setup is not None:
        setup()
    fn()  # compile
    times = []
    for _ in range(repeats):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=positive_int, help="timed calls per part (median; default 20)")
    p.add_argument("--quick", action="store_true", help="3 repeats unless --repeats is given")
    args = p.parse_args(argv)
    repeats = args.repeats if args.repeats is not None else 3 if args.quick else 20
    print(machine_info("benchmarks.train_step", argv), flush=True)
    config = GRPOExperimentConfig()
    engine = build(config).engine
    env = engine.envs[0]
    g, k = config.groups_per_generation, config.group_size
    holder = {"state": engine.init()}

    def generate():
        holder["state"], gen = engine.generate(holder["state"])
        jax.block_until_ready(gen)

    t_gen = _median(generate, repeats)
    while int(holder["state"].pending.count) < config.batch_groups:
        generate()

    def keep_batch():
        # Keep the pending batch full: train on the same rows every repeat (a copy, since
        # train donates the state it is given), copied before the timing starts.
        holder["saved"] = jax.block_until_ready(jax.tree.map(jnp.copy, holder["state"].pending))

    def train():
        state, metrics = engine.train(holder["state"])
        holder["state"] = state._replace(pending=holder["saved"])
        jax.block_until_ready(metrics)

    t_train = _median(train, repeats, setup=keep_batch)

    cur = env.curriculum
    cur_state = cur.init(jax.random.key(0))
    # The shapes observe sees inside generate: g groups of k rollouts with per-token
    # advantages over the engine's T positions (those its pending batch carries).
    tokens = holder["state"].pending.groups.advantages.shape[-1]
    results = synthetic_results(jax.random.key(1), jnp.arange(g) % env.num_tasks, k, tokens)

    @jax.jit
    def curriculum_step(state, key):
        ids, state = cur.sample(state, key, g)
        admission, state = cur.observe(state, results._replace(task_ids=ids))
        return state, admission.admitted

    keys = jax.block_until_ready([jax.random.key(i) for i in range(1, repeats + 2)])
    box = {"state": cur_state, "i": 0}

    def curriculum():
        box["state"], admitted = curriculum_step(box["state"], keys[box["i"]])
        box["i"] += 1
        jax.block_until_ready(admitted)

    t_cur = _median(curriculum, repeats)
    step = t_gen + t_train
    print(
        f"# {config.task.family} over {config.task.num_symbols} symbols, "
        f"{config.task.num_levels} levels, pool {env.num_tasks} tasks, curriculum "
        f"{config.curriculum}, {g} groups x {k} rollouts per generation batch, "
        f"{config.batch_groups} groups per update, {config.model.depth}-layer "
        f"width-{config.model.width} transformer, T = {tokens} tokens per rollout; "
        f"median of {repeats} calls each"
    )
    rows = [
        [
            "generate (sample, roll out, credit, observe, append)",
            f"{t_gen * 1e3:.2f}",
            f"{t_gen / step:.1%}",
        ],
        [
            f"train (one GRPO update on {config.batch_groups} groups)",
            f"{t_train * 1e3:.2f}",
            f"{t_train / step:.1%}",
        ],
        [
            "curriculum alone (sample + observe, inside generate)",
            f"{t_cur * 1e3:.3f}",
            f"{t_cur / step:.2%}",
        ],
    ]
    print("\n" + md.table(["part", "ms", "share of generate + train"], rows))
    print(f"\nrollouts/s with an update every generation batch: {g * k / step:,.0f}")


if __name__ == "__main__":
    main()
