"""Curricula against uniform sampling at an equal budget of solver rollouts.

    python -m experiments.compare --run-dir runs/compare

Runs every arm (uniform sampling, uniform plus the zero-advantage gate, the sequential default,
difficulty pools with prime-rl's default bands plus the gate, difficulty pools with bands that
fit exact-match rewards with and without the gate) for several seeds on the main job's task family.
The seeds of an arm run as one ``vmap``-ped program (spread over ``--devices`` when given);
every arm spends exactly the same number of rollouts (the same number of generation batches of
the same size; rejected groups cost rollouts too). Writes ``compare.md`` (final held-out
success, rollouts to reach the target, mean and spread over seeds), ``compare.json`` and
``compare.png``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from experiments import _cli
from experiments._builders import FRONTIER_CURRICULUM, GRPOExperimentConfig, build

ZERO_ADVANTAGE = {"zero_advantage": {"type": "advantage_range", "low": 0.0, "high": 0.0}}
ARMS = {
    "uniform": {"sampler": {"type": "uniform"}},
    "uniform + gate": {"sampler": {"type": "uniform"}, "gates": ZERO_ADVANTAGE},
    "sequential": {"sampler": {"type": "sequential"}},
    "pools (prime-rl bands) + gate": {
        "sampler": {"type": "difficulty_pools"},
        "gates": ZERO_ADVANTAGE,
    },
    "pools (frontier bands) + gate": FRONTIER_CURRICULUM,
    "pools (frontier bands)": {"sampler": FRONTIER_CURRICULUM["sampler"]},
}


@dataclasses.dataclass(frozen=True)
class CompareConfig:
    experiment: GRPOExperimentConfig = dataclasses.field(default_factory=GRPOExperimentConfig)
    seeds: int = 5
    generations: int = 1500  # generation batches per run: the rollout budget
    eval_every: int = 50  # generation batches between held-out evaluations
    arms: tuple[str, ...] = tuple(ARMS)


def run_arm(config: CompareConfig, name: str, mesh=None) -> dict:
    """All seeds of one arm as one program. Returns the curves (numpy)."""
    exp = config.experiment
    engine, held_out = build(exp, curriculum=ARMS[name])
    chunks = config.generations // config.eval_every

    def one_seed(key):
        def chunk(state, _):
            state, reports = jax.lax.scan(
                lambda s, _: engine.step(s), state, None, length=config.eval_every
            )
            score = jnp.mean(engine.solver.evaluate(state.solver, held_out, key))
            gen = reports.generation
            admitted = jnp.sum(gen.admitted).astype(jnp.float32)
            out = {
                "held_out": score,
                "rollouts": state.counters.rollouts,
                "updates": state.counters.updates,
                "admission": admitted / gen.admitted.size,
            }
            return state, out

        _, curve = jax.lax.scan(chunk, engine.init(key), None, length=chunks)
        return curve

    keys = jax.random.split(jax.random.key(exp.seed), config.seeds)
    fn = jax.vmap(one_seed)
    if mesh is not None:
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        split = NamedSharding(mesh, P(mesh.axis_names[0]))
        fn = jax.jit(fn, in_shardings=split, out_shardings=split)
        keys = jax.device_put(keys, split)
    else:
        fn = jax.jit(fn)
    t0 = time.perf_counter()
    curves = jax.device_get(fn(keys))
    curves["seconds"] = time.perf_counter() - t0
    return curves


def to_target(curve: dict, target: float, field: str = "rollouts") -> list[float | None]:
    """Per seed: ``field`` (rollouts or updates) at the first evaluation at or above
    ``target`` (None: never)."""
    out = []
    for held, counts in zip(curve["held_out"], curve[field]):
        hits = np.flatnonzero(held >= target)
        out.append(float(counts[hits[0]]) if hits.size else None)
    return out


def summarize(config: CompareConfig, curves: dict[str, dict]) -> tuple[str, dict]:
    exp = config.experiment
    target = exp.target
    budget = int(curves[next(iter(curves))]["rollouts"][0, -1])
    rows, data = [], {}
    for name, c in curves.items():
        final = c["held_out"][:, -1]
        reach = to_target(c, target)
        reached = [r for r in reach if r is not None]
        updates = [u for u in to_target(c, target, "updates") if u is not None]
        data[name] = {
            "final_held_out": final.tolist(),
            "rollouts_to_target": reach,
            "updates_to_target": to_target(c, target, "updates"),
            "final_updates": c["updates"][:, -1].tolist(),
            "admission_rate": c["admission"].mean(axis=1).tolist(),
            "curve_rollouts": c["rollouts"][0].tolist(),
            "curve_held_out": c["held_out"].tolist(),
            "seconds": c["seconds"],
        }
        reach_text = (
            f"{np.mean(reached):,.0f} ± {np.std(reached):,.0f}" if reached else "not reached"
        )
        updates_text = f"{np.mean(updates):,.0f}" if updates else "-"
        rows.append(
            f"| {name} | {final.mean():.3f} ± {final.std():.3f} | {reach_text} "
            f"| {len(reached)}/{len(reach)} | {updates_text} | {c['updates'][:, -1].mean():,.0f} "
            f"| {c['admission'].mean():.2f} |"
        )
    header = (
        f"Task: {exp.task.family}, {exp.task.num_levels} levels; {config.seeds} seeds per arm; "
        f"budget {budget:,} rollouts per run ({config.generations} generation batches of "
        f"{exp.groups_per_generation} groups x {exp.group_size} rollouts); target: held-out "
        f"exact match >= {target} (evaluated every {config.eval_every} generation batches).\n\n"
        "| arm | final held-out exact match (mean ± sd) | rollouts to target (mean ± sd over "
        "seeds that reached it) | seeds reaching target | updates to target | updates in "
        "budget | admission rate |\n"
        "|---|---:|---:|---:|---:|---:|---:|"
    )
    table = header + "\n" + "\n".join(rows) + "\n"
    base = data.get("uniform", {}).get("rollouts_to_target")
    lines = []
    if base is not None:
        for name, d in data.items():
            if name == "uniform":
                continue
            ratio = _speedup(base, d["rollouts_to_target"], budget)
            if ratio:
                lines.append(
                    f"- {name}: uniform needs {ratio} the rollouts this arm needs to reach "
                    f"{target} (mean over seeds; above 1 favours the arm)"
                )
    return table + ("\n" + "\n".join(lines) + "\n" if lines else ""), data


def _speedup(base: list, arm: list, budget: int) -> str | None:
    """Mean rollouts of uniform over the arm's; a seed that never reached counts as the
    budget, which makes the ratio a lower bound ("at least")."""
    if any(r is None for r in arm):
        return None
    b = [budget if r is None else r for r in base]
    ratio = np.mean(b) / np.mean(arm)
    prefix = "at least " if any(r is None for r in base) else ""
    return f"{prefix}{ratio:.2f}x"


def plot(curves: dict[str, dict], out_path: str, target: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, c in curves.items():
        x = c["rollouts"][0]
        y = c["held_out"]
        ax.plot(x, y.mean(axis=0), label=name)
        ax.fill_between(x, y.min(axis=0), y.max(axis=0), alpha=0.15)
    ax.axhline(target, color="grey", lw=0.8, ls="--")
    ax.set(xlabel="solver rollouts", ylabel="held-out exact match", ylim=(0, 1))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_path, dpi=110)
    plt.close(fig)


def main(argv=None) -> None:
    parser = _cli.base_parser(__doc__.splitlines()[0], steps=0, run_dir="runs/compare")
    parser.add_argument("--arms", nargs="+", default=None, help=f"subset of {list(ARMS)}")
    args = parser.parse_args(argv)
    config = _cli.load_config(CompareConfig, args)
    if args.seed is not None:
        config = dataclasses.replace(
            config, experiment=dataclasses.replace(config.experiment, seed=args.seed)
        )
    if args.arms:
        unknown = sorted(set(args.arms) - set(ARMS))
        if unknown:
            raise SystemExit(f"unknown arms {unknown}; choose from {list(ARMS)}")
        config = dataclasses.replace(config, arms=tuple(args.arms))
    mesh = _cli.setup_devices(args)
    if mesh is not None and config.seeds % args.devices:
        raise SystemExit(f"--devices {args.devices} must divide the {config.seeds} seeds")
    os.makedirs(args.run_dir, exist_ok=True)
    curves = {}
    for name in config.arms:
        print(f"== {name}: {config.seeds} seeds ...", file=sys.stderr, flush=True)
        curves[name] = run_arm(config, name, mesh)
        c = curves[name]
        print(
            f"   {c['seconds']:.0f}s; final held-out {c['held_out'][:, -1].round(3).tolist()}",
            file=sys.stderr,
            flush=True,
        )
    table, data = summarize(config, curves)
    print(table)
    with open(os.path.join(args.run_dir, "compare.md"), "w") as f:
        f.write(table)
    with open(os.path.join(args.run_dir, "compare.json"), "w") as f:
        json.dump({"config": dataclasses.asdict(config), "arms": data}, f, indent=2)
    plot(curves, os.path.join(args.run_dir, "compare.png"), config.experiment.target)


if __name__ == "__main__":
    main()
