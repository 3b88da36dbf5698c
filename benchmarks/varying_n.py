"""The host driver under a varying batch size: what backfilling rejected groups costs.

A trainer that backfills rejected groups asks ``cx.HostCurriculum.sample(n)`` for a different
``n`` at each step. This script drives a fresh driver over the benchmarked curriculum
(:func:`benchmarks.curriculum_step.build_curriculum`, N = 1e5 by default) through ``--steps``
steps of ``sample(n)`` then ``observe`` of ``n`` groups, with ``n`` running through 33
distinct sizes in 900-1130 (a fixed shuffled order), and reports the wall time of the whole
loop, compilation included (wall, and the CPU time of the process: on a shared machine the
wall time measures the neighbours too), the number of compiled programs, and the median time
of a step once every size was seen.

``--exact`` also times ``sample(n, exact=True)``, one compiled draw per distinct ``n`` (the
driver's ``sample`` before it kept draws, and what a fixed-size trainer adapter uses): the
cost the kept draws replace for a varying ``n``.

Run: ``python -m benchmarks.varying_n`` (``--exact`` for the comparison).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Sequence

import numpy as np

import curriculax as cx
from benchmarks.curriculum_step import build_curriculum, machine_info, positive_int, solve_rates

TARGET_S = 20.0
# The target is defined for the default run: N = 1e5, 66 steps (two passes over the 33
# sizes), groups of 16.
TARGET_NUM_TASKS, TARGET_STEPS, TARGET_GROUP_SIZE = 100_000, 66, 16
NUM_SIZES = 33


def sizes(count: int = NUM_SIZES, low: int = 900, high: int = 1130, seed: int = 0) -> list[int]:
    """``count`` distinct sizes spread over ``[low, high]``, in a shuffled order."""
    grid = np.linspace(low, high, count).round().astype(int)
    return np.random.default_rng(seed).permutation(grid).tolist()


def run(num_tasks: int, steps: int, group_size: int, exact: bool, seed: int = 0) -> dict:
    """Times ``steps`` steps of a fresh driver; returns the figures of one table row."""
    order = sizes()
    if steps <= len(order):
        raise ValueError(
            f"steps must be at least {len(order) + 1}: the median step leaves out the first "
            f"{len(order)} (one pass over the sizes, where the compiles fall); got {steps}"
        )
    rates = solve_rates(num_tasks, seed)
    rng = np.random.default_rng(seed + 1)
    start, cpu = time.perf_counter(), time.process_time()
    driver = cx.HostCurriculum(build_curriculum(num_tasks), seed=seed)
    step_s = []
    for i in range(steps):
        n = order[i % len(order)]
        t = time.perf_counter()
        ids = driver.sample(n, exact=exact)  # exact: one compiled draw of exactly n
        rewards = (rng.random((n, group_size)) < rates[ids][:, None]).astype(np.float32)
        driver.observe(ids, rewards)
        step_s.append(time.perf_counter() - t)
    total, cpu = time.perf_counter() - start, time.process_time() - cpu
    steady = step_s[len(order) :]
    return {
        "mode": "exact n (one compile per n)" if exact else "kept draws (one compile per bucket)",
        "steps": steps,
        "distinct_n": len(set(order[i % len(order)] for i in range(steps))),
        "total_s": total,
        "cpu_s": cpu,
        "sample_programs": driver.trace_counts["sample"],
        "observe_programs": driver.trace_counts["observe"],
        "steady_ms": 1e3 * statistics.median(steady),
    }


def format_row(r: dict, num_tasks: int) -> str:
    return (
        f"| {num_tasks:,} | {r['mode']} | {r['steps']} | {r['distinct_n']} | {r['total_s']:.1f} "
        f"| {r['cpu_s']:.1f} | {r['sample_programs']} | {r['observe_programs']} "
        f"| {r['steady_ms']:.2f} |"
    )


HEADER = (
    "| N | sample | steps | distinct n | wall s (compiles included) | CPU s of the process "
    "| sample programs | observe programs | median step ms after the first pass |\n"
    "|---:|---|---:|---:|---:|---:|---:|---:|---:|"
)


def main(argv: Sequence[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.varying_n", description=__doc__)
    parser.add_argument("--num-tasks", type=positive_int, default=TARGET_NUM_TASKS)
    parser.add_argument(
        "--steps",
        type=int,
        default=TARGET_STEPS,
        help=f"steps ({NUM_SIZES} distinct sizes cycle; at least {NUM_SIZES + 1})",
    )
    parser.add_argument("--group-size", type=positive_int, default=TARGET_GROUP_SIZE)
    parser.add_argument("--exact", action="store_true", help="also time one compile per n")
    args = parser.parse_args(argv)
    if args.steps <= NUM_SIZES:
        parser.error(
            f"--steps must be at least {NUM_SIZES + 1}: the median step leaves out the first "
            f"{NUM_SIZES} (one pass over the sizes, where the compiles fall)"
        )
    print(machine_info("benchmarks.varying_n", argv), flush=True)
    rows = [run(args.num_tasks, args.steps, args.group_size, exact=False)]
    if args.exact:
        rows.append(run(args.num_tasks, args.steps, args.group_size, exact=True))
    print(HEADER)
    for r in rows:
        print(format_row(r, args.num_tasks))
    wall, cpu = rows[0]["total_s"], rows[0]["cpu_s"]
    defined = (args.num_tasks, args.steps, args.group_size) == (
        TARGET_NUM_TASKS,
        TARGET_STEPS,
        TARGET_GROUP_SIZE,
    )
    if defined:
        verdict = "met" if wall < TARGET_S else "NOT met"
    else:
        verdict = (
            f"not judged (the target is for N = {TARGET_NUM_TASKS:,}, {TARGET_STEPS} steps, "
            f"groups of {TARGET_GROUP_SIZE})"
        )
    print(
        f"\ntarget: the kept-draws loop under {TARGET_S:.0f} s: {wall:.1f} s wall ({cpu:.1f} s "
        f"CPU), {verdict}; load average at the end {os.getloadavg()[0]:.1f}"
    )
    return rows


if __name__ == "__main__":
    main()
