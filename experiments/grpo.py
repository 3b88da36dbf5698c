"""The main job: a small transformer learns an embedded task family from scratch with GRPO.

    python -m experiments.grpo --run-dir runs/grpo

Trains with the default curriculum (difficulty pools whose bands fit exact-match rewards, plus
the zero-advantage gate) on sequence reversal, evaluates greedy exact match on a held-out set
(disjoint from the training pool by task key) every ``eval_every`` updates, and writes
``metrics.jsonl``, ``traces.jsonl``, ``checkpoints/``, ``summary.json`` and ``curves.png``
(held-out success and admission rate against rollouts consumed). Follows the experiment CLI
convention (``--steps --seed --resume --config --set --devices``).
"""

from __future__ import annotations

import json
import os

import jax

from experiments import _cli
from experiments._builders import GRPOExperimentConfig, build, held_out_report


def plot_curves(metrics_path: str, out_path: str, title: str) -> None:
    """``curves.png``: held-out success and admission rate against rollouts consumed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(metrics_path) as f:
        rows = [json.loads(x) for x in f]
    evals = [r for r in rows if "eval/held_out_success" in r]
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
    ax[0].plot([r["rollouts"] for r in evals], [r["eval/held_out_success"] for r in evals], "o-")
    ax[0].set(xlabel="solver rollouts", ylabel="held-out exact match", ylim=(0, 1))
    ax[0].grid(alpha=0.3)
    ax[1].plot([r["rollouts"] for r in rows], [r["batch/admission_rate"] for r in rows])
    ax[1].set(xlabel="solver rollouts", ylabel="admission rate", ylim=(0, 1.05))
    ax[1].grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out_path, dpi=110)
    plt.close(fig)


def main(argv=None) -> None:
    parser = _cli.base_parser(__doc__.splitlines()[0], steps=200, run_dir="runs/grpo")
    args = parser.parse_args(argv)
    config = _cli.load_config(GRPOExperimentConfig, args)
    mesh = _cli.setup_devices(args)
    engine, held_out = build(config, mesh)
    evaluate = jax.jit(engine.solver.evaluate)

    def on_update(state, record):
        if record["step"] % config.eval_every == 0:
            return held_out_report(evaluate, state, held_out, config.task.num_levels)
        return None

    result = _cli.run_experiment(engine, args, config, on_update=on_update)
    if _cli.already_complete(result):
        return
    final = held_out_report(evaluate, result.state, held_out, config.task.num_levels)
    if jax.process_index() == 0:
        plot_curves(
            os.path.join(args.run_dir, "metrics.jsonl"),
            os.path.join(args.run_dir, "curves.png"),
            f"GRPO on {config.task.family}, {config.task.num_levels} levels (seed {config.seed})",
        )
        levels = " ".join(
            f"{final.get(f'eval/level_{i}', float('nan')):.2f}"
            for i in range(config.task.num_levels)
        )
        s = result.summary
        print(
            f"\n{s['steps']} updates, {s['rollouts']:,} rollouts in {s['wall_seconds']:.0f}s"
            f" -> {args.run_dir}\n  held-out exact match {final['eval/held_out_success']:.3f}"
            f"  (per level: {levels})\n  admission rate (last update) "
            f"{result.metrics.get('batch/admission_rate', float('nan')):.2f}"
            f"\n  curves: {os.path.join(args.run_dir, 'curves.png')}"
        )
        with open(os.path.join(args.run_dir, "summary.json")) as f:
            summary = json.load(f)
        summary["final_eval"] = final
        with open(os.path.join(args.run_dir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2, sort_keys=True)
    _cli.exit_for(result.stopped)


if __name__ == "__main__":
    main()
