"""Self-play with the GRPO solver: a challenger moves the difficulty knob of an embedded family.

    python -m experiments.selfplay.selfplay_demo            # (no --dry-run) runs this

The solver is the main job's transformer and GRPO settings; the seed tasks are not the main
job's pool but ``experiment.task.train_per_level`` tasks of every level of the family (by
default reversal over 4 symbols, lengths 1-6: 4, 16, 64, 64, 64 and 64 tasks), ``held_out_frac``
of them held out (``experiment`` keys the script does not read are refused by name). The
challenger generates tasks at its spec's level (a random symbol sequence of that length)
and moves the level by the measured learnability (r0): up when generated tasks get learned,
down when they only get stuck. The same rollout budget is run without a challenger (no gate in
either run, so every update costs the same rollouts). Both are evaluated on the same held-out
seed tasks, which the challenger never touches. Writes ``summary.json`` and prints a
per-round table; reports the held-out result whatever it is. One seed says little: the
multi-seed comparison with intervals is ``experiments.selfplay.study``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os

import jax

from curriculax import tasks as T
from curriculax._files import write_json_atomic
from experiments import _cli
from experiments._builders import GRPOExperimentConfig, TaskConfig, family_spec
from experiments.selfplay._challengers import (
    MAIN_JOB_ONLY,
    check_start_level,
    evolve_arm,
    refuse_unread,
)

# The experiment keys this script never reads (besides the main job's), and what it reads
# instead: the seed tasks are train_per_level tasks of every level of the family, drawn from
# key 0, with held_out_frac (top level) of them held out; the run's seed is --seed. A warm-started
# base (experiment.init) is built from the study pool its task keys declare, held-out split
# included, so from a base the two held-out keys are read (:data:`READ_BY_A_BASE`).
UNREAD = {
    **MAIN_JOB_ONLY,
    "seed": "the run's seed is --seed",
    "task.held_out_per_level": "the held-out tasks are held_out_frac (top level) of the seed tasks",
    "task.held_out_frac": "the held-out share is held_out_frac (top level)",
    "task.level_mass": "the seed tasks are task.train_per_level tasks of every level",
    "task.pool_size": "the seed tasks are task.train_per_level tasks of every level",
}
READ_BY_A_BASE = ("task.held_out_per_level", "task.held_out_frac")


def unread_keys(experiment: GRPOExperimentConfig) -> dict[str, str]:
    """:data:`UNREAD`, less the keys a warm-started base reads where ``experiment`` has one."""
    if experiment.init == "scratch":
        return UNREAD
    return {k: v for k, v in UNREAD.items() if k not in READ_BY_A_BASE}


@dataclasses.dataclass(frozen=True)
class SelfPlayConfig:
    experiment: GRPOExperimentConfig = dataclasses.field(
        default_factory=lambda: GRPOExperimentConfig(task=TaskConfig(num_levels=6))
    )
    rounds: int = 10
    steps_per_round: int = 60
    generated_per_round: int = 32
    frontier_share: float = 0.25
    start_level: int = 2
    sampler: str = "sequential"  # the seed sampler (the best arm of experiments.compare)
    held_out_frac: float = 0.2


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run-dir", default="runs/selfplay_grpo")
    p.add_argument(
        "--overwrite", action="store_true", help="replace RUN_DIR/summary.json of an earlier run"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--config", default=None)
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--rounds", type=int, default=None)
    p.add_argument("--steps", type=int, default=None, help="updates per round")
    _cli.add_debug_flag(p)
    args = p.parse_args(argv)
    _cli.check_int(args.devices, "--devices", 1, "data-parallel devices")
    args.steps_override, args.steps = args.steps, None
    config = _cli.load_config(SelfPlayConfig, args)
    if args.rounds is not None:
        _cli.check_key("rounds", args.rounds, "--rounds")
        config = dataclasses.replace(config, rounds=args.rounds)
    if args.steps_override is not None:
        _cli.check_key("steps_per_round", args.steps_override, "--steps")
        config = dataclasses.replace(config, steps_per_round=args.steps_override)
    refuse_unread(config.experiment, SelfPlayConfig().experiment, unread_keys(config.experiment))
    base_frac = config.experiment.task.held_out_frac
    if config.experiment.init != "scratch" and config.held_out_frac > base_frac:
        # The split is a threshold on each task's key: a larger share holds out tasks the
        # base trained on, and the held-out score would measure them as unseen.
        raise ValueError(
            f"held_out_frac = {config.held_out_frac} holds out more than the warm-started "
            f"base's split (experiment.task.held_out_frac = {base_frac}): some held-out tasks "
            "would be ones the base trained on; give held_out_frac <= "
            f"{base_frac} or raise experiment.task.held_out_frac"
        )
    summary_path = os.path.join(args.run_dir, "summary.json")
    _cli.refuse_earlier_output(summary_path, args.overwrite)
    exp = config.experiment
    mesh = _cli.local_mesh(args.devices)
    spec = family_spec(exp.task)
    if not isinstance(spec, T.ReversalSpec | T.CopySpec):
        raise SystemExit("error: the self-play challenger generates reversal/copy tasks")
    check_start_level(config.start_level, spec)
    seeds = T.generate(jax.random.key(0), spec, exp.task.train_per_level)
    runs = {}
    for name in ("self-play", "no challenger"):
        print(f"\n== GRPO {name} (seed {args.seed}) ==", flush=True)
        print(
            f"{'round':>5} {'level':>5} {'gen':>4} {'learn':>5} {'stuck':>5} {'easy':>4} "
            f"{'r0':>6} {'held-out':>8} {'rollouts':>9}",
            flush=True,
        )

        def on_round(r, held_out):
            level = "-" if r.spec is None else str(r.spec["level"])
            print(
                f"{r.round:>5} {level:>5} {r.generated:>4} {r.learned:>5} {r.stuck:>5} "
                f"{r.dropped_easy:>4} {r.r0:>6.3f} {held_out:>8.3f} "
                f"{r.rollouts:>9,}",
                flush=True,
            )

        result = evolve_arm(
            config,
            seeds,
            arm=name,
            key=args.seed,
            held_out_frac=config.held_out_frac,
            on_round=on_round,
            mesh=mesh,
        )
        runs[name] = {
            "final_reward": result.final_reward,
            "rounds": [{k: v for k, v in h.items() if k != "metrics"} for h in result.history],
        }
    a, b = runs["self-play"]["final_reward"], runs["no challenger"]["final_reward"]
    print(
        f"\nheld-out exact match (seed tasks only): self-play {a:.3f} vs no challenger "
        f"{b:.3f} ({a - b:+.3f}) at {runs['self-play']['rounds'][-1]['rollouts']:,} rollouts"
    )
    os.makedirs(args.run_dir, exist_ok=True)
    write_json_atomic(
        summary_path,
        {"config": dataclasses.asdict(config), "seed": args.seed, "runs": runs},
        indent=2,
        default=str,
    )


if __name__ == "__main__":
    _cli.entry(main)
