"""Curriculum step time against pool size (up to 1e7) and against device count.

A step samples ``--num`` tasks from ``cx.samplers.difficulty_pools(N)`` and observes as many
groups of ``--group-size`` rollouts through the zero-advantage gate: the same curriculum as
``benchmarks.curriculum_step``, run through the same code the engine runs. The groups are built
before the timing (one per step; their task ids replaced by the drawn ones inside the step), as
``curriculum_step`` hands its step precomputed results: the timed step is sample + observe.

- **pool size**: one device, N = 1e4 ... 1e7; the step time should grow no worse than
  linearly in N (the per-step cost is one O(N) pass plus O(num log N)).
- **device count**: the per-task state split over a 1-D mesh of D devices (the engine's
  ``Env(shard_tasks=True)``: ``shard_map`` with the sampler built with ``axis_name``); each
  device holds N / D tasks and the draws need two small collectives. On CPU the devices are
  fake (``jax_num_cpu_devices``) and share the machine's cores, so the wall time shows the
  cost of the split, not a speed-up; on a GPU node or TPU pod each device's share is what
  bounds its time.

Run: ``python -m benchmarks.scaling`` (``--quick`` for a smoke test in seconds: small defaults;
arguments given explicitly keep their values).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from benchmarks.curriculum_step import pool_size, positive_int
from experiments import _markdown as md

DEFAULTS = {
    "sizes": [1e4, 1e5, 1e6, 1e7],
    "devices": [1, 2, 4, 8],
    "device_pool": 1e7,
    "num": 1024,
    "group_size": 16,
    "repeats": 5,
}
# --quick changes the defaults only: an argument given explicitly keeps its value.
QUICK = {
    "sizes": [4096, 16384],
    "devices": [1, 2, 4],
    "device_pool": 16384,
    "num": 64,
    "repeats": 2,
}


def _parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # An integer size (1e6 notation ok), counts >= 1: --sizes 2.7 once timed N = 2.
    p.add_argument("--sizes", type=pool_size, nargs="+", help=f"default {DEFAULTS['sizes']}")
    p.add_argument("--devices", type=positive_int, nargs="+", help=f"default {DEFAULTS['devices']}")
    p.add_argument("--device-pool", type=pool_size, help="pool size of the device table (1e7)")
    p.add_argument("--num", type=positive_int, help="tasks per sample call (1024)")
    p.add_argument("--group-size", type=positive_int, help="rollouts per group (16)")
    p.add_argument("--repeats", type=positive_int, help="timed steps per row (median; 5)")
    p.add_argument("--quick", action="store_true", help="small defaults (seconds)")
    p.add_argument("--platform", default=None, help="e.g. cpu or gpu (default: JAX's choice)")
    args = p.parse_args(argv)
    for name, value in {**DEFAULTS, **(QUICK if args.quick else {})}.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def main(argv=None) -> None:
    args = _parse(argv)
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

    def timed(fn, state, steps, key_sharding=None, with_results=False):
        """Median seconds of one step (after a compile/warm-up call); the keys (and, with
        ``with_results``, one set of synthetic groups per key) are derived and placed before
        the timing, so only ``fn`` is timed. The warm-up call's arguments are placed as the
        timed ones are: an unplaced key compiles a program the timed calls do not use, and the
        first timed call would compile its own."""
        key = jax.random.key(1)
        keys = [jax.random.fold_in(key, i) for i in range(steps + 1)]
        extra = [()] * len(keys)
        if with_results:
            make = jax.jit(lambda k: results_for(jnp.zeros((args.num,), jnp.int32), k))
            extra = [(make(jax.random.fold_in(k, 1)),) for k in keys]
        calls = jax.block_until_ready(
            [jax.device_put((k, *x), key_sharding) for k, x in zip(keys, extra)]
        )
        state = fn(state, *calls[0])
        jax.block_until_ready(state)
        times = []
        for i in range(1, steps + 1):
            t0 = time.perf_counter()
            state = fn(state, *calls[i])
            jax.block_until_ready(state)
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    def step_fn(cur, sample, observe):
        """Sample + observe only: the groups arrive built (as ``curriculum_step``'s step gets
        them), their task ids replaced by the drawn ones."""

        def step(state, key, results):
            ids, state = sample(state, key, args.num)
            _, state = observe(state, results._replace(task_ids=ids))
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

    print(machine_info("benchmarks.scaling", argv))
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
        t = timed(step, warm_state(cur, n), args.repeats, with_results=True)
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
    skipped = []
    for d in args.devices:
        if d > jax.device_count():
            skipped.append(f"{d} (only {jax.device_count()} devices)")
            continue
        if n % d:
            skipped.append(f"{d} (N = {n:,} does not split into {d} equal shares)")
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
            in_shardings=(sharding, NamedSharding(mesh, P()), NamedSharding(mesh, P())),
            out_shardings=sharding,
        )
        t = timed(step, state, args.repeats, NamedSharding(mesh, P()), with_results=True)
        per = n // d
        print(md.row([d, f"{per:,}", f"{t * 1e3:.2f}"]))
    if skipped:
        print("\nskipped device counts: " + "; ".join(skipped))


if __name__ == "__main__":
    main()
