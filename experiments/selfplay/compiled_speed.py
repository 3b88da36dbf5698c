"""Per-seed wall time of the compiled, vmapped round loop against the host path, in one run.

    python -m experiments.selfplay.compiled_speed --seeds 20 --host-seeds 2

The toy of the dry-run demo (capped solver, seed tasks of levels 0-7; 6 rounds of 15 updates
of 16 groups, 32 tasks generated per round) with the pure level bandit. The host path runs
``--host-seeds`` seeds one after another through ``curriculum_evolve`` (its twin challenger,
:func:`~curriculax.selfplay.host_challenger`); the compiled path runs ``--seeds`` seeds as one
program. Both times include compilation (each host run builds its engine, as the study does
without a persistent cache; ``--cache DIR`` gives the host runs after the first its compiled
programs). Prints one line per path and the ratio of per-seed times.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import numpy as np

from curriculax.selfplay import compiled_evolve, curriculum_evolve, host_challenger
from curriculax.selfplay.toy import capped_solver, level_tasks, pure_bandit_spec, pure_level_bandit
from experiments import _cli

SETUP = dict(rounds=6, steps_per_round=15, generated_per_round=32, batch_groups=16)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=20, help="seeds of the compiled path")
    p.add_argument("--host-seeds", type=int, default=2, help="seeds of the host path")
    p.add_argument(
        "--cache",
        default=None,
        help="a persistent compilation cache directory (as the study uses): host runs after "
        "the first reuse its compiled programs",
    )
    _cli.add_debug_flag(p)
    args = p.parse_args(argv)
    # Both paths report a time per seed: each needs at least one.
    _cli.check_int(args.seeds, "--seeds", 1, "seeds of the compiled path")
    _cli.check_int(args.host_seeds, "--host-seeds", 1, "seeds of the host path")
    if args.cache:
        jax.config.update("jax_compilation_cache_dir", args.cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    tasks = level_tasks()
    held = level_tasks(per_level=48)
    held = jax.tree.map(lambda x: x[np.asarray(held["variant"]) >= 40], held)
    pure = pure_level_bandit(max_level=8)
    load0 = os.getloadavg()[0]
    host, seconds = [], []
    for seed in range(args.host_seeds):
        t0 = time.perf_counter()
        result = curriculum_evolve(
            capped_solver(),
            tasks,
            challenger=host_challenger(pure, tasks, 4 * SETUP["generated_per_round"]),
            spec=pure_bandit_spec(8),
            held_out_tasks=held,
            key=seed,
            **SETUP,
        )
        host.append(result.final_reward)
        seconds.append(time.perf_counter() - t0)
    host_s = float(np.mean(seconds))
    keys = jax.vmap(jax.random.key)(np.arange(args.seeds, dtype=np.uint32))
    compiled = []
    for _ in range(2 if args.cache else 1):  # with a cache, the second call is warm
        t0 = time.perf_counter()
        out = compiled_evolve(
            capped_solver(),
            tasks,
            challenger=pure,
            spec=pure_bandit_spec(8),
            held_out_tasks=held,
            keys=keys,
            **SETUP,
        )
        final = np.asarray(jax.device_get(out.held_out))[:, -1]
        compiled.append((time.perf_counter() - t0) / args.seeds)
    compiled_s = compiled[0]
    shared = min(args.seeds, args.host_seeds)  # the seeds both paths ran
    same = np.allclose(final[:shared], host[:shared], rtol=1e-6)
    print(
        f"host path: {host_s:.2f} s per seed ({args.host_seeds} seeds, one after another: "
        + " ".join(f"{x:.1f}" for x in seconds)
        + " s)"
    )
    print(
        f"compiled:  {compiled_s:.2f} s per seed ({args.seeds} seeds, one vmapped program"
        + (f"; warm, from the cache: {compiled[1]:.2f} s per seed)" if len(compiled) > 1 else ")")
    )
    print(
        f"ratio {host_s / compiled_s:.1f}x per seed"
        + (
            f" (warm against warm: {np.mean(seconds[1:]) / compiled[1]:.1f}x)"
            if len(compiled) > 1 and len(seconds) > 1
            else ""
        )
        + "; final held-out equal on the shared seeds: "
        f"{same}; load average {load0:.1f} -> {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    _cli.entry(main)
