"""Curriculum step time against pool size (up to 1e7) and against device count.

A step samples ``--num`` tasks from ``cx.samplers.difficulty_pools(N)`` and observes as many
groups of ``--group-size`` rollouts through the zero-advantage gate: the same curriculum as
``benchmarks.curriculum_step``, run through the same code the engine runs.

- **pool size**: one device, N = 1e4 ... 1e7; the step time should grow no worse than
  linearly in N (the per-step cost is one O(N) pass plus O(num log N)).
- **device count**: the per-task state split over a 1-D mesh of D devices (the engine's
  ``Env(shard_tasks=True)``: ``shard_map`` with the sampler built with ``axis_name``); each
  device holds N / D tasks and the draws need two small collectives. On CPU the devices are
  fake (``jax_num_cpu_devices``) and share the machine's cores, so the wall time shows the
  cost of the split, not a speed-up; on a GPU node or TPU pod each device's share is what
  bounds its time.

Run: ``python -m benchmarks.scaling`` (``--quick`` for a smoke test in seconds).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from experiments import _markdown as md


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=float, nargs="+", default=[1e4, 1e5, 1e6, 1e7])
    p.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--device-pool", type=float, default=1e7, help="pool size of the device table")
    p.add_argument("--num", type=int, default=1024)
    p.add_argument("--group-size", type=int, default=16)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--platform", default=None, help="e.g. cpu or gpu (default: JAX's choice)")
    return p.parse_args()


def main() -> None:
    args = _parse()
    if args.quick:
        args.sizes, args.device_pool, args.devices = [4096, 16384], 16384, [1, 2, 4]
        args.num, args.repeats = 64, 2
    max_devices = max(args.devices)
    import jax

    if args.platform in (None, "cpu"):
        jax.config.update("jax_num_cpu_devices", max_devices)
    if args.platform:
        jax.config.update("jax_platforms", args.platform)
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import curriculax as cx
    from curriculax.engine import _mesh

    def build(n: int, axis: str | None):
        return cx.curriculum(
            cx.samplers.difficulty_pools(n, axis_name=axis),
            gates={"zero_advantage": cx.gates.advantage_range(0.0, 0.0)},
        )

    def results_for(ids: jax.Array, key: jax.Array) -> cx.GroupResults:
        g, k = ids.shape[0], args.group_size
        rewards = jax.random.bernoulli(key, 0.4, (g, k)).astype(jnp.float32)
        adv = rewards - rewards.mean(axis=1, keepdims=True)
        ones = jnp.ones((g, k), bool)
        return cx.GroupResults(ids, rewards, ones, adv[:, :, None], ones[:, :, None])

    def timed(fn, state, steps, key_sharding=None):
        """Median seconds of one step (after a compile/warm-up call); the keys are derived
        (and placed) before the timing, so only ``fn`` is timed. The warm-up call's key is
        placed as the timed keys are: an unplaced one compiles a program the timed calls do
        not use, and the first timed call would compile its own."""
        key = jax.random.key(1)
        keys = [jax.device_put(jax.random.fold_in(key, i), key_sharding) for i in range(steps)]
        jax.block_until_ready(keys)
        state = fn(state, jax.device_put(key, key_sharding))
        jax.block_until_ready(state)
        times = []
        for i in range(steps):
            t0 = time.perf_counter()
            state = fn(state, keys[i])
            jax.block_until_ready(state)
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    def step_fn(cur, sample, observe):
        def step(state, key):
            k_s, k_r = jax.random.split(key)
            ids, state = sample(state, k_s, args.num)
            _, state = observe(state, results_for(ids, k_r))
            return state

        return step

    def warm_state(cur, n):
        """A state past warm-up with a spread of scores (the banded path is what is timed)."""
        s = cur.init(jax.random.key(0))
        rates = jax.random.beta(jax.random.key(2), 0.6, 0.6, (n,))
        return s._replace(
            sampler=s.sampler._replace(
                scores=rates.astype(jnp.float32),
                scored=jnp.ones((n,), bool),
                seen=jnp.ones((n,), bool),
            )
        )

    from benchmarks.curriculum_step import machine_info

    print(machine_info("benchmarks.scaling"))
    print(
        f"# jax {jax.__version__}, backend {jax.default_backend()}, "
        f"{jax.device_count()} devices ({jax.devices()[0].device_kind}), "
        f"{os.cpu_count()} CPU cores; sample {args.num} + observe {args.num} groups of "
        f"{args.group_size}"
    )
    print("\n## step time against pool size (1 device)\n")
    print(md.row(["N", "step ms", "memory pass ms", "step / memory pass", "ms per 1e6 tasks"]))
    print(md.rule("rrrrr"))
    cumsum = jax.jit(jnp.cumsum)
    for size in args.sizes:
        n = int(size)
        cur = build(n, None)
        step = jax.jit(step_fn(cur, cur.sample, cur.observe), donate_argnums=0)
        t = timed(step, warm_state(cur, n), args.repeats)
        x = jnp.ones((n,), jnp.float32)
        m = timed(lambda a, k: cumsum(a), x, args.repeats)
        print(
            md.row(
                [
                    f"{n:,}",
                    f"{t * 1e3:.2f}",
                    f"{m * 1e3:.2f}",
                    f"{t / m:.1f}",
                    f"{t * 1e3 / n * 1e6:.2f}",
                ]
            )
        )

    n = int(args.device_pool)
    print(f"\n## step time against device count (N = {n:,}, per-task state split)\n")
    print(md.row(["devices", "tasks per device", "step ms"]))
    print(md.rule("rrr"))
    for d in args.devices:
        if d > jax.device_count() or n % d:
            continue
        mesh = _mesh.make_mesh(d)
        cur = build(n, _mesh.AXIS)
        state = warm_state(cur, n)
        specs = _mesh.per_task_specs(state, _mesh.AXIS)
        sharded = _mesh.shard_curriculum(cur, mesh, _mesh.AXIS, specs)
        sharding = _mesh.shardings(specs, mesh)
        state = jax.device_put(state, sharding)
        step = jax.jit(
            step_fn(cur, sharded.sample, sharded.observe),
            donate_argnums=0,
            in_shardings=(sharding, NamedSharding(mesh, P())),
            out_shardings=sharding,
        )
        t = timed(step, state, args.repeats, NamedSharding(mesh, P()))
        per = n // d
        print(md.row([d, f"{per:,}", f"{t * 1e3:.2f}"]))


if __name__ == "__main__":
    main()
