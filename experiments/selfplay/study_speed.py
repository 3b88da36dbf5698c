"""Per-seed wall time of the study's compiled path against its host path, in one run.

    python -m experiments.selfplay.study_speed --config experiments/configs/selfplay/bridge.toml \
        --arm bandit --host-seeds 2 --seeds 8 --set rounds=2 --set steps_per_round=50

The study's own runs (``study.run_one`` for the host path, ``study.run_compiled`` for the
compiled one) of one arm on the scenario, with the persistent compilation cache the study uses
(a fresh one, so the first host seed and the first compiled call compile): the host path runs
``--host-seeds`` seeds one after another, the compiled path ``--seeds`` seeds as one program,
twice (cold: compilation included; warm: the program from the cache). Prints one line per
path, the ratios, whether the seeds both paths ran have equal records, and the load average.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time

import jax
import numpy as np

from curriculax._files import write_json_atomic
from experiments import _cli
from experiments.selfplay import study
from experiments.selfplay._challengers import refuse_unread

PATH_FIELDS = {"path", "seconds", "challenger_seconds", "program_seconds", "program_seeds"}


def main(argv=None) -> None:
    parser = _cli.base_parser(__doc__.splitlines()[0], steps=0, run_dir="runs/study_speed")
    parser.add_argument("--arm", default="bandit", choices=study.ARMS[:4])
    parser.add_argument("--seeds", type=int, default=8, help="seeds of the compiled path")
    parser.add_argument("--host-seeds", type=int, default=2, help="seeds of the host path")
    never = [
        "--steps",
        "--seed",
        "--resume",
        "--allow-partial",
        "--checkpoint-every",
        "--tensorboard",
        "--wandb",
        *_cli.DEVICE_FLAGS,
    ]
    _cli.hide(parser, never)
    args = parser.parse_args(argv)
    _cli.refuse_unused(
        parser,
        args,
        never,
        "it times seeds 0 to --seeds - 1 (--host-seeds on the host path) of one arm in one "
        "process on one device, for the config's rounds x steps_per_round updates (set them "
        "with --set), and writes only RUN_DIR/records.json",
    )
    _cli.check_int(args.seeds, "--seeds", 1, "seeds of the compiled path")
    _cli.check_int(args.host_seeds, "--host-seeds", 1, "seeds of the host path")
    config = _cli.load_config(study.StudyConfig, args)
    unread = {**study.UNREAD, "seed": "it times seeds 0 to --seeds - 1"}
    refuse_unread(config.experiment, study.StudyConfig().experiment, unread)
    out = os.path.join(args.run_dir, "records.json")
    _cli.refuse_earlier_output(out, args.overwrite, "an earlier timing's records")
    cache = tempfile.mkdtemp(prefix="study_speed_cache_")
    atexit.register(shutil.rmtree, cache, ignore_errors=True)
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    load0 = os.getloadavg()
    host, seconds = [], []
    for seed in range(args.host_seeds):
        t0 = time.perf_counter()
        host.append(study.run_one(config, args.arm, seed))
        seconds.append(time.perf_counter() - t0)
    seeds = list(range(args.seeds))
    compiled = []
    for _ in range(2):  # cold (compiles), then warm (the program from the cache)
        t0 = time.perf_counter()
        records = study.run_compiled(config, args.arm, seeds)
        compiled.append((time.perf_counter() - t0) / args.seeds)
    differ = {
        h["seed"]: {
            k: (h[k], records[h["seed"]].get(k))
            for k in h
            if k not in PATH_FIELDS and h[k] != records[h["seed"]].get(k)
        }
        for h in host
        if h["seed"] < args.seeds
    }
    same = not any(differ.values())
    os.makedirs(args.run_dir, exist_ok=True)
    write_json_atomic(out, {"host": host, "compiled": records}, indent=1)
    updates = config.rounds * config.steps_per_round
    print(
        f"scenario {config.scenario!r}, arm {args.arm!r}: {config.rounds} rounds x "
        f"{config.steps_per_round} updates ({updates} a run), "
        f"seed_batch {config.seed_batch or 'all'}"
    )
    print(
        f"host path: {np.mean(seconds):.1f} s per seed ({args.host_seeds} seeds one after "
        "another: " + " ".join(f"{x:.1f}" for x in seconds) + " s; the first compiles)"
    )
    print(
        f"compiled:  {compiled[0]:.1f} s per seed cold ({args.seeds} seeds, one program, "
        f"compilation included), {compiled[1]:.1f} s per seed warm (from the cache)"
    )
    warm_host = np.mean(seconds[1:]) if len(seconds) > 1 else float("nan")
    print(
        f"ratio {np.mean(seconds) / compiled[0]:.2f}x per seed (all host seeds against cold); "
        f"warm against warm {warm_host / compiled[1]:.2f}x; per update per seed: host warm "
        f"{1000 * warm_host / updates:.0f} ms, compiled warm {1000 * compiled[1] / updates:.0f} ms"
    )
    print(
        f"records equal on the shared seeds: {same}; load average (1, 5, 15 min) "
        f"{load0[0]:.1f} {load0[1]:.1f} {load0[2]:.1f} -> "
        + " ".join(f"{x:.1f}" for x in os.getloadavg())
    )
    for seed, fields in differ.items():
        for k, (h, c) in fields.items():
            print(f"  seed {seed} {k}: host {h} compiled {c}")


if __name__ == "__main__":
    _cli.entry(main)
