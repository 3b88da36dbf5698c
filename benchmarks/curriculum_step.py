"""One curriculum step: curriculax (jit) against a host-side Python orchestrator.

A step samples ``num`` task ids (default 1024) and observes ``num`` groups of ``group_size``
rollouts (sequence-level advantages, ``T = 1``, every token trainable) through
``cx.curriculum(cx.samplers.difficulty_pools(N), gates={"zero_advantage":
cx.gates.advantage_range(0.0, 0.0)})``, for several pool sizes ``N``. Three columns:

- **curriculax**: one jitted ``step(state, key, results) -> (ids, admission, state)`` with the
  state donated, as the engine runs it; compiled first, then the median of ``--repeats`` calls
  (``block_until_ready``). The state is past warm-up (every task dispatched once) and holds
  one observed group mean per task, so the banded draw path is what is timed.
- **host**: the same semantics as a host-side orchestrator does it today
  (:mod:`benchmarks._host_baseline`: a dict per task, one O(N) weighted draw over the pool per
  dispatched task, Python loops over groups in ``observe`` and the gate), started from the same
  state. Where a full ``sample`` would take long, a few draws are timed and scaled to ``num``
  (marked ``*``).
- **memory pass**: one jitted ``jnp.cumsum`` of ``f32[N]``, the floor for anything that reads
  the per-task state once. On CPU that scan is far from memory-bound, so the breakdown table
  also shows an elementwise ``2 * x`` of ``f32[N]`` (read + write): the bandwidth floor.

A second table splits the step into ``sample`` and ``observe`` (each jitted on its own) for
both implementations, with the step's compile time.

Run: ``python -m benchmarks.curriculum_step`` (``--quick`` for a smoke test in seconds).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import curriculax as cx
from benchmarks import _host_baseline

DEFAULT_SIZES = (1_000, 10_000, 100_000, 1_000_000)
QUICK_SIZES = (500, 2_000)
TARGET_N = 1_000_000
TARGET_SPEEDUP = 50.0
TARGET_MEMORY_RATIO = 5.0
# Task visits the host sampler may spend per timed repeat before it is extrapolated.
HOST_BUDGET = 2_000_000
FIELDS = ("task_ids", "rewards", "valid", "advantages", "token_mask")  # GroupResults order


def build_curriculum(num_tasks: int) -> cx.Curriculum:
    """The benchmarked curriculum: difficulty pools (default bands) + zero-advantage gate."""
    return cx.curriculum(
        cx.samplers.difficulty_pools(num_tasks),
        gates={"zero_advantage": cx.gates.advantage_range(0.0, 0.0)},
    )


def solve_rates(num_tasks: int, seed: int) -> np.ndarray:
    """``f32[N]`` latent success rate per task: U-shaped, so every band holds tasks."""
    return np.random.default_rng(seed).beta(0.6, 0.6, num_tasks).astype(np.float32)


def group_results(
    rng: np.random.Generator, ids: np.ndarray, rates: np.ndarray, group_size: int
) -> dict[str, np.ndarray]:
    """Bernoulli rewards per rollout and group-relative sequence-level advantages."""
    g = ids.shape[0]
    rewards = (rng.random((g, group_size)) < rates[ids][:, None]).astype(np.float32)
    adv = rewards - rewards.mean(axis=1, keepdims=True)
    return {
        "task_ids": ids.astype(np.int32),
        "rewards": rewards,
        "valid": np.ones((g, group_size), bool),
        "advantages": adv[:, :, None].astype(np.float32),
        "token_mask": np.ones((g, group_size, 1), bool),
    }


def as_group_results(arrays: dict[str, np.ndarray]) -> cx.GroupResults:
    return cx.GroupResults(**{k: jnp.asarray(v) for k, v in arrays.items()})


class Compiled(NamedTuple):
    """The jitted functions timed for one curriculum; each donates (consumes) its state."""

    step: Callable
    sample: Callable
    observe: Callable


def compile_curriculum(cur: cx.Curriculum, num: int) -> Compiled:
    """``step(state, key, results) -> (ids, admission, state)`` and its two halves."""

    @functools.partial(jax.jit, donate_argnums=0)
    def step(state, key, results):
        ids, state = cur.sample(state, key, num)
        admission, state = cur.observe(state, results)
        return ids, admission, state

    sample = jax.jit(lambda state, key: cur.sample(state, key, num), donate_argnums=0)
    observe = jax.jit(cur.observe, donate_argnums=0)
    return Compiled(step, sample, observe)


def warm_state(
    cur: cx.Curriculum,
    fns: Compiled,
    num_tasks: int,
    num: int,
    rates: np.ndarray,
    group_size: int,
    seed: int,
):
    """A state past warm-up: every task dispatched once, then one observed group per task.

    Reuses the timed functions (``num`` tasks or groups per call), so nothing extra compiles.
    """
    state = cur.init(jax.random.key(seed))
    base = jax.random.key(seed + 1)
    for i in range(-(-num_tasks // num)):
        _, state = fns.sample(state, jax.random.fold_in(base, i))
    rng = np.random.default_rng(seed + 2)
    order = np.arange(-(-num_tasks // num) * num) % num_tasks
    for start in range(0, order.shape[0], num):
        chunk = group_results(rng, order[start : start + num], rates, group_size)
        _, state = fns.observe(state, as_group_results(chunk))
    return jax.block_until_ready(state)


def median_ms(call: Callable[[int], object], repeats: int, first: list | None = None) -> float:
    """Median wall time of ``call(i)`` over ``repeats`` calls, after one untimed call.

    The untimed call's seconds (compilation included) are appended to ``first`` if given.
    """
    start = time.perf_counter()
    jax.block_until_ready(call(-1))
    if first is not None:
        first.append(time.perf_counter() - start)
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(call(i))
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


class _Donated:
    """Holds a state that each timed call consumes (donates) and replaces."""

    def __init__(self, state):
        self.state = state


def time_curriculax(fns: Compiled, state, results, repeats: int, seed: int) -> dict[str, float]:
    """Median ms of the jitted step, and of sample and observe jitted on their own."""
    base = jax.random.key(seed + 3)
    keys = [jax.random.fold_in(base, i) for i in range(repeats + 1)]
    held = _Donated(state)

    def call_step(i):
        ids, admission, held.state = fns.step(held.state, keys[i], results)
        return ids, admission, held.state

    def call_sample(i):
        ids, held.state = fns.sample(held.state, keys[i])
        return ids, held.state

    def call_observe(i):
        admission, held.state = fns.observe(held.state, results)
        return admission, held.state

    first = []
    return {
        "cx_ms": median_ms(call_step, repeats, first),
        "cx_compile_s": first[0],
        "cx_sample_ms": median_ms(call_sample, repeats),
        "cx_observe_ms": median_ms(call_observe, repeats),
    }


def host_from_state(state, num_tasks: int, seed: int) -> _host_baseline.HostCurriculum:
    """The host curriculum holding the same per-task state as a curriculax state."""
    host = _host_baseline.zero_advantage_curriculum(num_tasks, seed=seed)
    s = state.sampler
    scores = np.asarray(s.scores).tolist()
    scored = np.asarray(s.scored).tolist()
    seen = np.asarray(s.seen).tolist()
    host.sampler.tasks = {
        tid: {"score": scores[tid], "scored": scored[tid], "seen": seen[tid]}
        for tid in range(num_tasks)
    }
    host.sampler.unseen = seen.count(False)
    return host


def time_host(host, results: dict[str, np.ndarray], num: int, repeats: int, budget: int):
    """Median ms of the host sample (extrapolated from a few draws if slow) and observe."""
    n = host.sampler.num_tasks
    draws = int(min(num, max(2, budget // n)))
    as_lists = [results[k].tolist() for k in FIELDS]
    sample_ms = median_ms(lambda i: host.sample(num, max_draws=draws), repeats) * num / draws
    observe_ms = median_ms(lambda i: host.observe(*as_lists), repeats)
    return {
        "host_ms": sample_ms + observe_ms,
        "host_sample_ms": sample_ms,
        "host_observe_ms": observe_ms,
        "host_draws": draws,
    }


def time_memory_pass(num_tasks: int, repeats: int) -> dict[str, float]:
    """One jitted ``jnp.cumsum`` of ``f32[N]`` (the floor), and one elementwise ``2 * x``.

    On CPU XLA's scan (a ``reduce_window``) is far from memory-bound, so the elementwise
    pass (read + write of ``f32[N]``) is shown too, as the bandwidth floor.
    """
    x = jnp.asarray(np.random.default_rng(0).random(num_tasks, dtype=np.float32))
    cumsum = jax.jit(jnp.cumsum)
    double = jax.jit(lambda v: 2.0 * v)
    return {
        "mem_ms": median_ms(lambda i: cumsum(x), repeats),
        "stream_ms": median_ms(lambda i: double(x), repeats),
    }


def bench_size(
    num_tasks: int, *, num: int, group_size: int, repeats: int, budget: int, seed: int
) -> dict:
    """Times one pool size; returns one row of the table."""
    cur = build_curriculum(num_tasks)
    fns = compile_curriculum(cur, num)
    rates = solve_rates(num_tasks, seed)
    state = warm_state(cur, fns, num_tasks, num, rates, group_size, seed)
    host = host_from_state(state, num_tasks, seed)
    rng = np.random.default_rng(seed + 4)
    ids = rng.choice(num_tasks, num, replace=num > num_tasks)
    results = group_results(rng, ids, rates, group_size)
    row = {"n": num_tasks}
    row.update(time_host(host, results, num, repeats, budget))
    row.update(time_curriculax(fns, state, as_group_results(results), repeats, seed))
    row.update(time_memory_pass(num_tasks, repeats))
    row["speedup"] = row["host_ms"] / row["cx_ms"]
    row["mem_ratio"] = row["cx_ms"] / row["mem_ms"]
    return row


def _fmt(ms: float) -> str:
    return f"{ms:,.3f}" if ms < 10 else f"{ms:,.1f}"


def format_tables(rows: Sequence[dict], num: int, group_size: int) -> str:
    """The two markdown tables: the step, and where its time goes."""
    extrapolated = [r for r in rows if r["host_draws"] < num]
    lines = [
        f"One step: sample {num} task ids + observe {num} groups of {group_size} "
        "(difficulty_pools + zero-advantage gate)",
        "",
        "| N | curriculax ms | host ms | speed-up | memory pass ms | curriculax / memory pass |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        star = "*" if r["host_draws"] < num else ""
        lines.append(
            f"| {r['n']:,} | {_fmt(r['cx_ms'])} | {_fmt(r['host_ms'])}{star} "
            f"| {r['speedup']:,.0f}x | {_fmt(r['mem_ms'])} | {r['mem_ratio']:.2f}x |"
        )
    lines += [
        "",
        "Where the time goes (each part jitted and timed on its own for curriculax)",
        "",
        "| N | curriculax sample ms | curriculax observe ms | host sample ms "
        "| host observe ms | host draws timed | elementwise pass ms | curriculax step compile s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        star = "*" if r["host_draws"] < num else ""
        lines.append(
            f"| {r['n']:,} | {_fmt(r['cx_sample_ms'])} | {_fmt(r['cx_observe_ms'])} "
            f"| {_fmt(r['host_sample_ms'])}{star} | {_fmt(r['host_observe_ms'])} "
            f"| {r['host_draws']} of {num} | {_fmt(r['stream_ms'])} | {r['cx_compile_s']:.1f} |"
        )
    lines += [
        "",
        "Memory pass: one jitted `jnp.cumsum` of f32[N]; elementwise pass: one jitted `2 * x` "
        "of f32[N] (read + write, the bandwidth floor).",
    ]
    if extrapolated:
        lines += [
            "",
            "\\* host sample extrapolated: the median time of k draws (k: host draws timed) "
            f"times {num}/k; each draw is one O(N) pass over the pool.",
        ]
    return "\n".join(lines)


def check_targets(rows: Sequence[dict]) -> dict[str, object]:
    """The targets, judged at N = 1e6 (or the largest N run, flagged as such)."""
    at = [r for r in rows if r["n"] == TARGET_N] or [max(rows, key=lambda r: r["n"])]
    r = at[0]
    return {
        "n": r["n"],
        "speedup": r["speedup"],
        "speedup_met": r["speedup"] >= TARGET_SPEEDUP,
        "mem_ratio": r["mem_ratio"],
        "mem_ratio_met": r["mem_ratio"] <= TARGET_MEMORY_RATIO,
    }


def format_targets(t: dict[str, object]) -> str:
    note = "" if t["n"] == TARGET_N else f" (N = 1e6 not run; judged at N = {t['n']:,})"

    def verdict(met):
        return "met" if met else "NOT met"

    return "\n".join(
        [
            f"Targets at N = {t['n']:,}{note}:",
            f"- >= {TARGET_SPEEDUP:.0f}x faster than host-side: {t['speedup']:,.0f}x "
            f"-> {verdict(t['speedup_met'])}",
            f"- within {TARGET_MEMORY_RATIO:.0f}x of the memory pass: {t['mem_ratio']:.2f}x "
            f"-> {verdict(t['mem_ratio_met'])}",
        ]
    )


def machine_info() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    device = jax.devices()[0]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{datetime.date.today().isoformat()} · {os.cpu_count()} CPU cores ({cpu}) · "
        f"jax {jax.__version__} on {device.platform} · Python {platform.python_version()} · "
        f"load average {load}"
    )


def _size(text: str) -> int:
    value = float(text)
    if value < 1 or value != int(value):
        raise argparse.ArgumentTypeError(f"pool sizes must be positive integers, got {text!r}")
    return int(value)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.curriculum_step",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--sizes", type=_size, nargs="+", help="pool sizes N (1e6 notation ok)")
    parser.add_argument("--repeats", type=int, help="timed calls per measurement (median)")
    parser.add_argument("--num", type=int, help="tasks sampled and groups observed per step")
    parser.add_argument("--group-size", type=int, help="rollouts per group")
    parser.add_argument(
        "--host-budget",
        type=int,
        default=HOST_BUDGET,
        help="task visits the host sampler may spend per timed call before it is extrapolated",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="small sizes, 2 repeats (seconds)")
    args = parser.parse_args(argv)
    quick = args.quick
    defaults = {
        "sizes": QUICK_SIZES if quick else DEFAULT_SIZES,
        "repeats": 2 if quick else 21,
        "num": 64 if quick else 1024,
        "group_size": 4 if quick else 16,
    }
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.repeats < 1 or args.num < 1 or args.group_size < 1:
        parser.error("--repeats, --num and --group-size must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, object]:
    """Runs the benchmark, prints the tables; returns ``{"rows", "targets", "text"}``."""
    args = parse_args(argv)
    print(machine_info(), flush=True)
    rows = []
    for n in args.sizes:
        rows.append(
            bench_size(
                n,
                num=args.num,
                group_size=args.group_size,
                repeats=args.repeats,
                budget=args.host_budget,
                seed=args.seed,
            )
        )
        print(f"  N = {n:,} done", flush=True)
    print(f"  load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    targets = check_targets(rows)
    text = format_tables(rows, args.num, args.group_size) + "\n\n" + format_targets(targets)
    print()
    print(text)
    return {"rows": rows, "targets": targets, "text": text}


if __name__ == "__main__":
    main()
