"""Quick start: the engine with the synthetic solver and two training sources.

Env ``steady`` uses the default curriculum (epoch-shuffled sequential, no gates); env
``pools`` uses difficulty pools plus the zero-advantage gate. Runs in seconds on a laptop.

    python -m experiments.quickstart --run-dir runs/q --steps 50

Writes ``runs/q/metrics.jsonl`` (one line per update, curriculum metrics under
``curriculum/steady/...`` and ``curriculum/pools/...``), ``traces.jsonl``, ``checkpoints/``
and ``summary.json``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import jax
import jax.numpy as jnp

import curriculax as cx
from curriculax.engine import Engine, EngineConfig, Env
from curriculax.engine.synthetic import synthetic_solver, synthetic_tasks
from experiments import _cli


@dataclasses.dataclass(frozen=True)
class QuickstartConfig:
    steps: int = 50
    seed: int = 0
    batch_groups: int = 16
    groups_per_generation: int = 8
    tasks_per_env: int = 400
    group_size: int = 8
    pools_weight: float = 1.0
    steady_weight: float = 1.0
    checkpoint_every: int = 25
    eval_every: int = 10
    curriculum: dict = dataclasses.field(
        default_factory=lambda: {
            "sampler": {"type": "difficulty_pools"},
            "gates": {"zero_advantage": {"type": "advantage_range", "low": 0.0, "high": 0.0}},
        }
    )


def build(config: QuickstartConfig, mesh=None) -> tuple[Engine, dict]:
    n = config.tasks_per_env
    curriculum = dict(config.curriculum)
    sampler = curriculum.get("sampler")
    split = (
        mesh is not None
        and isinstance(sampler, Mapping)
        and sampler.get("type") == "difficulty_pools"
    )
    if split:  # split the pools env's per-task state over the devices (identical draws)
        d = mesh.devices.size
        if n % d:
            below, above = n - n % d, n - n % d + d
            sizes = f"{below} or {above}" if below else f"{above}"
            raise ValueError(
                f"tasks_per_env={n}: with --devices {d} the quick start splits the per-task "
                "state of the pools env's difficulty_pools sampler over the devices "
                f"(shard_tasks), which needs a pool size divisible by {d}; use e.g. "
                f"--set tasks_per_env={sizes}"
            )
        curriculum["sampler"] = {**curriculum["sampler"], "axis_name": "data"}
    envs = [
        Env(
            "steady",
            synthetic_tasks(n, seed=config.seed),
            None,
            config.group_size,
            config.steady_weight,
        ),
        Env(
            "pools",
            synthetic_tasks(n, seed=config.seed + 1),
            cx.curriculum_from_config(curriculum, n),
            config.group_size,
            config.pools_weight,
            shard_tasks=split,
        ),
    ]
    engine = Engine(
        synthetic_solver(),
        envs,
        EngineConfig(
            batch_groups=config.batch_groups,
            groups_per_generation=config.groups_per_generation,
            seed=config.seed,
        ),
        mesh=mesh,
    )
    held_out = {"difficulty": jnp.linspace(0.0, 1.0, 101, dtype=jnp.float32)}
    return engine, held_out


def main(argv=None) -> None:
    parser = _cli.base_parser(__doc__.splitlines()[0], steps=50, run_dir="runs/quickstart")
    args = parser.parse_args(argv)
    config = _cli.load_config(QuickstartConfig, args)
    mesh = _cli.setup_devices(args)
    # Building and initializing the pools peaks at about 5x what they keep (peak RSS, 2**20
    # tasks per env: 107 bytes per task against 22 kept; 2-core CPU, 2026-12-01).
    _cli.check_memory(
        "tasks_per_env",
        config.tasks_per_env,
        lambda n: build(dataclasses.replace(config, tasks_per_env=n))[0],
        peak=5,
    )
    engine, held_out = build(config, mesh)
    _cli.check_engine_memory(engine, config)
    evaluate = jax.jit(engine.solver.evaluate)

    def held_out_success(state) -> float:
        return float(jnp.mean(evaluate(state.solver, held_out, jax.random.key(0))))

    def on_update(state, record):
        # A fixed schedule (not tied to --steps) keeps a resumed run's log identical to an
        # uninterrupted one.
        if record["step"] % config.eval_every == 0:
            return {"eval/held_out_success": held_out_success(state)}
        return None

    result = _cli.run_experiment(engine, args, config, on_update=on_update)
    if _cli.already_complete(result):
        return
    m = {**result.metrics, "eval/held_out_success": held_out_success(result.state)}
    lines = [
        f"\n{result.summary['steps']} updates, {result.summary['rollouts']:,} rollouts, "
        f"{result.summary['wall_seconds']:.1f}s -> {args.run_dir}"
    ]

    # Only what this run reports: bands are named by the curriculum config, gates may differ.
    def values(fmt, *keys):
        got = [m.get(k) for k in keys]
        return None if None in got else " / ".join(fmt.format(v) for v in got)

    pool = "curriculum/pools/sampler/pool/"
    steady = "curriculum/steady/sampler/"
    rows = [
        ("held-out success", values("{:.3f}", "eval/held_out_success")),
        ("batch share steady / pools", values("{:.2f}", "batch/steady", "batch/pools")),
        ("pools: admission rate (last batch)", values("{:.3f}", "curriculum/pools/admission_rate")),
        (
            "pools: zero-advantage gate rejected",
            values("{:.0f}", "curriculum/pools/gate/zero_advantage/rejected"),
        ),
        (
            "pools: tasks per band",
            ", ".join(f"{k[len(pool) :]} {v:.0f}" for k, v in m.items() if k.startswith(pool)),
        ),
        ("steady: epoch / cursor", values("{:.0f}", steady + "epoch", steady + "cursor")),
    ]
    lines += [f"  {label:38s} {text}" for label, text in rows if text]
    _cli.report(*lines)  # once, on a multi-host run
    _cli.exit_for(result.stopped)


if __name__ == "__main__":
    _cli.entry(main)
