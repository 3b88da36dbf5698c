"""One curriculum step four ways: jitted, through the host driver, vectorised numpy, pure Python.

A step samples ``num`` task ids (default 1024) and observes ``num`` groups of ``group_size``
rollouts (sequence-level advantages, ``T = 1``, every token trainable) through
``cx.curriculum(cx.samplers.difficulty_pools(N), gates={"zero_advantage":
cx.gates.advantage_range(0.0, 0.0)})``, for several pool sizes ``N``, all from the same state
(past warm-up, one observed group mean per task) in one run:

- **jitted step**: one jitted ``step(state, key, results) -> (ids, admission, state)`` with the
  state donated, as the engine runs it, compiled first. The jitted step, the driver, the
  driver's compiled programs and the numpy step are timed interleaved (one call of each per
  round, ``--rounds`` rounds, medians; ``block_until_ready``), so a shared machine's load
  drifts alike for all of them; the parts (sample, observe) take the median of ``--repeats``
  calls each.
- **driver**: :class:`curriculax.HostCurriculum`, as a trainer written in host Python calls it:
  ``ids = cur.sample(num, exact=True)`` then ``cur.observe(task_ids, rewards)`` with numpy
  rewards (``exact``: one draw of ``num`` per call, as the compiled baseline draws), the
  driver computing the group-relative credit itself. Its *host overhead* is the median, over
  rounds, of its time minus the time of its two compiled programs called directly with
  arguments already on the device.
- **numpy**: the same semantics as an efficient vectorised host implementation
  (:mod:`benchmarks._numpy_baseline`: per-task arrays, band labels by comparison, band sizes
  by counting, per-band rank draws, array expressions for observe and the gate).
- **pure Python**: the same semantics in plain Python with a per-draw O(N) scan of the pool
  (:mod:`benchmarks._host_baseline`, the shape of prime-rl's difficulty pools). Where a full
  ``sample`` would take long, a few draws are timed and scaled to ``num`` (marked ``*``);
  ``--no-python`` skips it.
- **memory pass**: one jitted ``jnp.cumsum`` of ``f32[N]``, the floor for anything that reads
  the per-task state once. On CPU that scan is far from memory-bound, so the breakdown table
  also shows an elementwise ``2 * x`` of ``f32[N]`` (read + write): the bandwidth floor.

Run: ``python -m benchmarks.curriculum_step`` (``--quick`` for a smoke test in seconds).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import math
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import curriculax as cx
from benchmarks import _host_baseline, _numpy_baseline
from experiments import _markdown as md
from experiments._environment import cpu_model

DEFAULT_SIZES = (1_000, 10_000, 100_000, 1_000_000)
QUICK_SIZES = (500, 2_000)
TARGET_N = 1_000_000
TARGET_SPEEDUP = 50.0
TARGET_MEMORY_RATIO = 5.0
DRIVER_TARGET_N = 100_000
DRIVER_TARGET_RATIO = 1.5  # driver / jitted step
DRIVER_TARGET_OVERHEAD = 0.5  # driver host overhead / jitted step
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


def time_interleaved(calls: dict[str, Callable[[int], object]], repeats: int) -> dict:
    """Wall times (s) of each call over ``repeats`` rounds, the calls interleaved within a
    round (order reversed every other round), after one untimed call each: a shared machine's
    load drifts, and interleaving gives every call the same drift."""
    for call in calls.values():
        jax.block_until_ready(call(-1))
    times = {name: [] for name in calls}
    for i in range(repeats):
        for name in list(calls) if i % 2 == 0 else list(reversed(calls)):
            start = time.perf_counter()
            jax.block_until_ready(calls[name](i))
            times[name].append(time.perf_counter() - start)
    return times


def time_curriculax(fns: Compiled, state, results, repeats: int, seed: int, calls: int):
    """Median ms of sample and observe jitted on their own, and the step's compile time.

    Returns ``(row, call_step)``: ``call_step(i)`` runs one jitted step, ``i < calls`` (the
    step is timed interleaved with the others by :func:`time_steps`).
    """
    base = jax.random.key(seed + 3)
    keys = [jax.random.fold_in(base, i) for i in range(max(repeats, calls) + 1)]
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

    start = time.perf_counter()
    jax.block_until_ready(call_step(-1))
    row = {
        "cx_compile_s": time.perf_counter() - start,
        "cx_sample_ms": median_ms(call_sample, repeats),
        "cx_observe_ms": median_ms(call_observe, repeats),
    }
    return row, call_step


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


def driver_from_state(cur: cx.Curriculum, state, seed: int) -> cx.HostCurriculum:
    """A host driver holding a copy of ``state`` (loaded through its state dict)."""
    driver = cx.HostCurriculum(cur, seed=seed)
    sd = driver.state_dict()
    for path, leaf in jax.tree_util.tree_flatten_with_path(state)[0]:
        sd[f"state/{cx.checkpoint.path_str(path)}"] = np.array(leaf)
    driver.load_state_dict(sd)
    return driver


def driver_calls(driver: cx.HostCurriculum, results: dict[str, np.ndarray], num: int):
    """``(call, compiled)``: one driver step (``sample(num, exact=True)``, then
    ``observe(task_ids, rewards)`` with numpy in and out), and the same two compiled programs
    called directly with arguments already on the device; the difference is the driver's host
    overhead (argument checks, padding, transfers, dispatch).

    ``exact=True`` makes the driver draw ``num`` in each call, as ``compiled`` does: by default
    a ``num`` that is not a power of two >= 8 draws ``bucket(num)`` and keeps the rest (some
    calls then run no program), so the two would time different work. For a power of two
    >= 8 (the default 1024) the two modes are the same call."""
    ids, rewards = results["task_ids"], results["rewards"]

    def call(i):
        drawn = driver.sample(num, exact=True)
        return drawn, driver.observe(ids, rewards)

    # The inputs padded as the driver pads them (zeros; groups to bucket(G), rollouts to a
    # power of two with a valid mask when K is not one), so both run the same observe program.
    g, k = rewards.shape
    gp, kp = cx.host.bucket(g), 1 << max(0, k - 1).bit_length()

    def pad(x: np.ndarray, sizes: tuple[int, ...]) -> jax.Array:
        out = np.zeros((*sizes, *x.shape[len(sizes) :]), x.dtype)
        out[tuple(slice(0, d) for d in x.shape)] = x
        return jnp.asarray(out)

    args = [pad(ids.astype(np.int32), (gp,)), pad(rewards.astype(np.float32), (gp, kp))]
    valid = pad(np.ones((g, k), bool), (gp, kp))  # always given, as HostCurriculum.observe does
    count = jnp.asarray(g, jnp.int32)

    def compiled(i):
        drawn, driver._state, driver._key = driver._sample(driver._state, driver._key, num)
        admitted, driver._state = driver._observe(
            driver._state, args[0], args[1], valid, None, None, None, count
        )
        return drawn, admitted

    return call, compiled


def time_steps(call_step, driver, numpy_cur, results, num: int, repeats: int, rounds: int) -> dict:
    """The jitted step, the driver (and its compiled programs alone) and the numpy step,
    interleaved over ``rounds`` rounds; then the driver's sample and observe on their own."""
    call, compiled = driver_calls(driver, results, num)
    args = [results[k] for k in FIELDS]
    times = time_interleaved(
        {
            "cx": call_step,
            "drv": call,
            "drv_compiled": compiled,
            "np": lambda i: (numpy_cur.sample(num), numpy_cur.observe(*args)),
        },
        rounds,
    )
    row = {f"{name}_ms": 1e3 * statistics.median(t) for name, t in times.items()}
    paired = [a - b for a, b in zip(times["drv"], times["drv_compiled"])]
    row["drv_overhead_ms"] = 1e3 * statistics.median(paired)
    ids, rewards = results["task_ids"], results["rewards"]
    row["drv_sample_ms"] = median_ms(lambda i: driver.sample(num, exact=True), repeats)
    row["drv_observe_ms"] = median_ms(lambda i: driver.observe(ids, rewards), repeats)
    return row


def numpy_from_state(state, num_tasks: int, seed: int) -> _numpy_baseline.NumpyCurriculum:
    """The numpy curriculum holding the same per-task state as a curriculax state."""
    cur = _numpy_baseline.NumpyCurriculum(num_tasks, seed=seed)
    s = state.sampler
    cur.scores, cur.scored, cur.seen, cur.scored_at = (
        np.array(x) for x in (s.scores, s.scored, s.seen, s.scored_at)
    )
    cur.clock = int(s.clock)
    return cur


def time_numpy(cur, results: dict[str, np.ndarray], num: int, repeats: int) -> dict[str, float]:
    """Median ms of the numpy sample and observe on their own."""
    args = [results[k] for k in FIELDS]
    return {
        "np_sample_ms": median_ms(lambda i: cur.sample(num), repeats),
        "np_observe_ms": median_ms(lambda i: cur.observe(*args), repeats),
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
    num_tasks: int,
    *,
    num: int,
    group_size: int,
    repeats: int,
    rounds: int,
    budget: int,
    seed: int,
    python: bool = True,
) -> dict:
    """Times one pool size, every implementation from the same state; returns one row."""
    cur = build_curriculum(num_tasks)
    fns = compile_curriculum(cur, num)
    rates = solve_rates(num_tasks, seed)
    state = warm_state(cur, fns, num_tasks, num, rates, group_size, seed)
    # Copies first: the jitted step consumes (donates) the state it is given.
    driver = driver_from_state(cur, state, seed)
    numpy_cur = numpy_from_state(state, num_tasks, seed)
    host = host_from_state(state, num_tasks, seed) if python else None
    rng = np.random.default_rng(seed + 4)
    ids = rng.choice(num_tasks, num, replace=num > num_tasks)
    results = group_results(rng, ids, rates, group_size)
    row = {"n": num_tasks}
    cx_row, call_step = time_curriculax(
        fns, state, as_group_results(results), repeats, seed, rounds
    )
    row.update(cx_row)
    row.update(time_steps(call_step, driver, numpy_cur, results, num, repeats, rounds))
    row.update(time_numpy(numpy_cur, results, num, repeats))
    if host is not None:
        row.update(time_host(host, results, num, repeats, budget))
        row["speedup"] = row["host_ms"] / row["cx_ms"]
    row.update(time_memory_pass(num_tasks, repeats))
    row["mem_ratio"] = row["cx_ms"] / row["mem_ms"]
    row["drv_ratio"] = row["drv_ms"] / row["cx_ms"]
    row["np_ratio"] = row["np_ms"] / row["cx_ms"]
    return row


def _fmt(ms: float) -> str:
    return f"{ms:,.3f}" if ms < 10 else f"{ms:,.1f}"


def _ratio(x: float) -> str:
    return f"{x:,.0f}x" if x >= 100 else f"{x:.2f}x"


def format_tables(rows: Sequence[dict], num: int, group_size: int) -> str:
    """The markdown tables: the step four ways, the driver, and where the time goes."""
    python = all("host_ms" in r for r in rows)
    extrapolated = python and any(r["host_draws"] < num for r in rows)
    head = ["N", "jitted step ms", "driver ms", "driver / step", "numpy ms", "numpy / step"]
    if python:
        head += ["pure Python ms", "pure Python / step"]
    step_rows = []
    for r in rows:
        cells = [
            f"{r['n']:,}",
            _fmt(r["cx_ms"]),
            _fmt(r["drv_ms"]),
            _ratio(r["drv_ratio"]),
            _fmt(r["np_ms"]),
            _ratio(r["np_ratio"]),
        ]
        if python:
            star = "*" if r["host_draws"] < num else ""
            cells += [f"{_fmt(r['host_ms'])}{star}", _ratio(r["speedup"])]
        step_rows.append(cells)
    lines = [
        f"One step: sample {num} task ids + observe {num} groups of {group_size} "
        "(difficulty_pools + zero-advantage gate)",
        "",
        md.table(head, step_rows, "r" * len(head)),
        "",
        "The driver (`cx.HostCurriculum`: numpy in and out, credit computed in its program)",
        "",
        md.table(
            [
                "N",
                "driver sample ms",
                "driver observe ms",
                "its compiled programs ms",
                "host overhead ms",
                "overhead / step",
            ],
            (
                [
                    f"{r['n']:,}",
                    _fmt(r["drv_sample_ms"]),
                    _fmt(r["drv_observe_ms"]),
                    _fmt(r["drv_compiled_ms"]),
                    _fmt(r["drv_overhead_ms"]),
                    f"{r['drv_overhead_ms'] / r['cx_ms']:.2f}x",
                ]
                for r in rows
            ),
            "r" * 6,
        ),
    ]
    head = ["N", "jitted sample ms", "jitted observe ms", "numpy sample ms", "numpy observe ms"]
    if python:
        head += ["pure Python sample ms", "pure Python observe ms", "pure Python draws timed"]
    head += ["memory pass ms", "elementwise pass ms", "jitted step compile s"]
    parts_rows = []
    for r in rows:
        cells = [
            f"{r['n']:,}",
            _fmt(r["cx_sample_ms"]),
            _fmt(r["cx_observe_ms"]),
            _fmt(r["np_sample_ms"]),
            _fmt(r["np_observe_ms"]),
        ]
        if python:
            star = "*" if r["host_draws"] < num else ""
            cells += [
                f"{_fmt(r['host_sample_ms'])}{star}",
                _fmt(r["host_observe_ms"]),
                f"{r['host_draws']} of {num}",
            ]
        cells += [_fmt(r["mem_ms"]), _fmt(r["stream_ms"]), f"{r['cx_compile_s']:.1f}"]
        parts_rows.append(cells)
    lines += [
        "",
        "Where the time goes (each part jitted and timed on its own for the jitted columns)",
        "",
        md.table(head, parts_rows, "r" * len(head)),
    ]
    lines += [
        "",
        "Memory pass: one jitted `jnp.cumsum` of f32[N]; elementwise pass: one jitted `2 * x` "
        "of f32[N] (read + write, the bandwidth floor).",
    ]
    if extrapolated:
        lines += [
            "",
            "\\* pure Python sample extrapolated: the median time of k draws (k: draws timed) "
            f"times {num}/k; each draw is one O(N) pass over the pool.",
        ]
    return "\n".join(lines)


def _crossover(rows: Sequence[dict], key: str) -> str:
    """Where numpy stops being faster than ``key``'s column, in this run's sizes."""
    faster = [r["n"] for r in rows if r["np_ms"] < r[key]]
    slower = [r["n"] for r in rows if r["np_ms"] >= r[key]]
    if not faster:
        return f"never (slower from N = {min(slower):,})"
    if not slower:
        return f"at every size run (up to N = {max(faster):,})"
    below = [n for n in faster if n < min(slower)]
    if not below:  # slower at the smallest size, faster at a larger one
        return f"nowhere consistently (slower at N = {min(slower):,}; the sizes interleave: noisy)"
    return f"at N <= {max(below):,} (slower from N = {min(slower):,})" + (
        "" if max(faster) < min(slower) else "; the sizes interleave: noisy"
    )


def check_targets(rows: Sequence[dict]) -> dict[str, object]:
    """The targets: the driver's at N = 1e5, the library's at N = 1e6 (or the largest N run,
    flagged as such), and where numpy is faster."""
    out: dict[str, object] = {}
    at = [r for r in rows if r["n"] == DRIVER_TARGET_N] or [max(rows, key=lambda r: r["n"])]
    r = at[0]
    out.update(
        drv_n=r["n"],
        drv_ratio=r["drv_ratio"],
        drv_ratio_met=r["drv_ratio"] <= DRIVER_TARGET_RATIO,
        drv_overhead=r["drv_overhead_ms"] / r["cx_ms"],
        drv_overhead_met=r["drv_overhead_ms"] / r["cx_ms"] < DRIVER_TARGET_OVERHEAD,
    )
    at = [r for r in rows if r["n"] == TARGET_N] or [max(rows, key=lambda r: r["n"])]
    r = at[0]
    out.update(
        n=r["n"],
        mem_ratio=r["mem_ratio"],
        mem_ratio_met=r["mem_ratio"] <= TARGET_MEMORY_RATIO,
        stream_ratio=r["cx_ms"] / r["stream_ms"],
        np_ratio=r["np_ratio"],
        np_faster_than_step=_crossover(rows, "cx_ms"),
        np_faster_than_driver=_crossover(rows, "drv_ms"),
    )
    if "speedup" in r:
        out.update(speedup=r["speedup"], speedup_met=r["speedup"] >= TARGET_SPEEDUP)
    return out


def format_targets(t: dict[str, object]) -> str:
    def verdict(met):
        return "met" if met else "NOT met"

    def note(n, want):
        return "" if n == want else f" (N = {want:,} not run; judged at N = {n:,})"

    lines = [
        f"Driver targets at N = {t['drv_n']:,}{note(t['drv_n'], DRIVER_TARGET_N)}:",
        f"- driver <= {DRIVER_TARGET_RATIO}x the jitted step: {t['drv_ratio']:.2f}x "
        f"-> {verdict(t['drv_ratio_met'])}",
        f"- driver host overhead < {DRIVER_TARGET_OVERHEAD}x the jitted step: "
        f"{t['drv_overhead']:.2f}x -> {verdict(t['drv_overhead_met'])}",
        f"Library targets at N = {t['n']:,}{note(t['n'], TARGET_N)}:",
    ]
    if "speedup" in t:
        lines.append(
            f"- >= {TARGET_SPEEDUP:.0f}x faster than pure Python: {t['speedup']:,.0f}x "
            f"-> {verdict(t['speedup_met'])}"
        )
    lines += [
        f"- within {TARGET_MEMORY_RATIO:.0f}x of the memory pass: {t['mem_ratio']:.2f}x "
        f"-> {verdict(t['mem_ratio_met'])}",
        f"- step / elementwise pass (the bandwidth floor): {t['stream_ratio']:.1f}x",
        f"- numpy / jitted step: {t['np_ratio']:.2f}x",
        f"Numpy is faster than the jitted step {t['np_faster_than_step']}, "
        f"and than the driver {t['np_faster_than_driver']}.",
    ]
    return "\n".join(lines)


def machine_info(module: str, argv: Sequence[str] | None = None) -> str:
    """The header every benchmark prints: UTC time, machine, versions, load, and the command
    (``python -m module`` with ``argv``, by default this process's arguments)."""
    cpu = cpu_model()
    device = jax.devices()[0]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    args = sys.argv[1:] if argv is None else list(argv)
    return (
        f"{now} · {os.cpu_count()} CPU cores ({cpu}) · "
        f"jax {jax.__version__} on {device.platform} · Python {platform.python_version()} · "
        f"load average {load}\n"
        f"command: {shlex.join(['python', '-m', module, *args])}"
    )


def pool_size(text: str) -> int:
    """An argparse type: a pool size, an integer >= 1 (``1e6`` notation ok)."""
    value = float(text)
    if not math.isfinite(value) or value < 1 or value != int(value):  # int(inf) would raise
        raise argparse.ArgumentTypeError(f"pool sizes must be positive integers, got {text!r}")
    return int(value)


def positive_int(text: str) -> int:
    """An argparse type: an int >= 1 (a count of repeats, steps, tasks or devices)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.curriculum_step",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--sizes", type=pool_size, nargs="+", help="pool sizes N (1e6 notation ok)")
    parser.add_argument("--repeats", type=int, help="timed calls per measurement (median)")
    parser.add_argument(
        "--rounds", type=int, help="interleaved rounds of the four step timings (median)"
    )
    parser.add_argument("--num", type=int, help="tasks sampled and groups observed per step")
    parser.add_argument("--group-size", type=int, help="rollouts per group")
    parser.add_argument(
        "--host-budget",
        type=int,
        default=HOST_BUDGET,
        help="task visits the host sampler may spend per timed call before it is extrapolated",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--no-python", action="store_true", help="skip the pure-Python baseline (slow at 1e6)"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, 2 repeats (seconds)")
    args = parser.parse_args(argv)
    quick = args.quick
    defaults = {
        "sizes": QUICK_SIZES if quick else DEFAULT_SIZES,
        "repeats": 2 if quick else 21,
        "rounds": 3 if quick else 301,
        "num": 64 if quick else 1024,
        "group_size": 4 if quick else 16,
    }
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if min(args.repeats, args.rounds, args.num, args.group_size) < 1:
        parser.error("--repeats, --rounds, --num and --group-size must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, object]:
    """Runs the benchmark, prints the tables; returns ``{"rows", "targets", "text"}``."""
    args = parse_args(argv)
    print(machine_info("benchmarks.curriculum_step", argv), flush=True)
    rows = []
    for n in args.sizes:
        rows.append(
            bench_size(
                n,
                num=args.num,
                group_size=args.group_size,
                repeats=args.repeats,
                rounds=args.rounds,
                budget=args.host_budget,
                seed=args.seed,
                python=not args.no_python,
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
