"""Solver-challenger self-play demo.

    python -m experiments.selfplay.selfplay_demo --dry-run

``--dry-run``: deterministic and offline, a few seconds. A toy solver with a capability cap
(``cap:N``) trains on seed tasks of levels 0-7; a level challenger generates tasks around its
spec's level, the frontier sampler judges whether the solver learns each one (latest pass
rate against a baseline independent of the "already passed?" filter), and the verdicts move
the challenger's level. The same rollout budget
is run without a challenger. Prints a per-round table and writes ``summary.json``; two runs
with the same seed print byte-identical output.

Without ``--dry-run``: the GRPO solver on an embedded task family, with the challenger moving
the difficulty knob (see ``experiments.selfplay.grpo_selfplay``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from curriculax._files import write_text_atomic
from curriculax.selfplay import curriculum_evolve
from curriculax.selfplay.toy import capped_solver, level_challenger, level_tasks
from experiments import _cli

HEADER = (
    f"{'round':>5} {'spec':>8} {'gen':>4} {'inval':>5} {'learn':>5} {'stuck':>5} {'easy':>4} "
    f"{'r0':>6} {'front':>5} {'cap':>7} {'held-out':>8} {'rollouts':>8}"
)


def _row(report, held_out: float, cap: float) -> str:
    spec = "-" if report.spec is None else f"{report.spec['level']:.1f}"
    return (
        f"{report.round:>5} {spec:>8} {report.generated:>4} {report.invalid:>5} "
        f"{report.learned:>5} {report.stuck:>5} {report.dropped_easy:>4} {report.r0:>6.3f} "
        f"{report.occupancy:>5} {'cap:' + format(cap, '.2f'):>7} {held_out:>8.3f} "
        f"{report.rollouts:>8}"
    )


def dry_run(seed: int, rounds: int, steps_per_round: int, out=None, mesh=None) -> dict:
    out = out or sys.stdout
    runs = {}
    for name, challenger in (("self-play", level_challenger()), ("no challenger", None)):
        out.write(f"\n== {name} (seed {seed}) ==\n{HEADER}\n")

        def on_round(report, held_out):
            out.write(_row(report, held_out, report.metrics["solver/cap"]) + "\n")

        result = curriculum_evolve(
            capped_solver(),
            level_tasks(),
            challenger=challenger,
            spec={"level": 2.0} if challenger else None,
            rounds=rounds,
            steps_per_round=steps_per_round,
            generated_per_round=32,
            key=seed,
            on_round=on_round,
            mesh=mesh,
        )
        runs[name] = {
            "final_reward": round(result.final_reward, 6),
            "final_cap": round(float(result.state.solver.cap), 6),
            "rounds": [
                {
                    k: (round(v, 6) if isinstance(v, float) else v)
                    for k, v in h.items()
                    if k != "metrics"
                }
                | {"cap": round(h["metrics"]["solver/cap"], 6)}
                for h in result.history
            ],
        }
    gain = runs["self-play"]["final_reward"] - runs["no challenger"]["final_reward"]
    out.write(
        f"\nheld-out reward (seed tasks only): self-play {runs['self-play']['final_reward']:.3f}"
        f" vs no challenger {runs['no challenger']['final_reward']:.3f} ({gain:+.3f}) at "
        f"{runs['self-play']['rounds'][-1]['rollouts']} rollouts each\n"
    )
    return {"seed": seed, "rounds": rounds, "steps_per_round": steps_per_round, "runs": runs}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dry-run", action="store_true", help="the offline, deterministic toy")
    p.add_argument("--run-dir", default="runs/selfplay_demo")
    p.add_argument(
        "--overwrite", action="store_true", help="replace RUN_DIR/summary.json of an earlier run"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, default=15, help="updates per round")
    p.add_argument(
        "--devices", type=int, default=1, help="data-parallel mesh over N devices (default 1)"
    )
    _cli.add_debug_flag(p)
    args, unknown = p.parse_known_args(argv)
    if not args.dry_run:
        from experiments.selfplay import grpo_selfplay

        grpo_selfplay.main(argv)  # its parser refuses what it does not take
        return
    if unknown:  # --resume, say: ignoring it would rerun from scratch
        p.error(
            f"unrecognized arguments: {' '.join(unknown)} (--dry-run takes --run-dir, --overwrite, "
            "--seed, --rounds, --steps and --devices; --config and --set are the GRPO mode's)"
        )
    _cli.check_seed(args.seed, "--seed")
    _cli.check_key("rounds", args.rounds, "--rounds")
    _cli.check_key("steps_per_round", args.steps, "--steps")
    path = os.path.join(args.run_dir, "summary.json")
    _cli.refuse_earlier_output(path, args.overwrite)
    mesh = _cli.local_mesh(args.devices)
    summary = dry_run(args.seed, args.rounds, args.steps, mesh=mesh)
    os.makedirs(args.run_dir, exist_ok=True)
    text = json.dumps(summary, indent=2, sort_keys=True) + "\n"
    write_text_atomic(path, text)


if __name__ == "__main__":
    _cli.entry(main)
