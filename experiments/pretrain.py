"""Builds (or finds) an experiment's warm-started base policy and reports its step-0 pass rates.

    python -m experiments.pretrain --config experiments/configs/grpo.toml
    python -m experiments.pretrain --config experiments/configs/compare/hard-skew.toml \\
        --set 'init={base="short-lengths"}'

The config is a main-job TOML or a study TOML (its ``[experiment]`` table); its ``init`` names
the base (``experiments/_base.py``). The base is built on first use and cached (``--rebuild``
builds it again); then each distinct task of the experiment's pool (at most
``--per-category`` per level) is rolled out ``--samples`` times at the run's temperature
from the base, and the table says, per level, how many tasks are never, sometimes
(0 < p < 1) and always solved: the signal a sampler can find at RL step 0.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time

import jax
import numpy as np

from experiments import _cli
from experiments._base import base_dir, base_spec, load_base
from experiments._builders import MAIN_JOB, GRPOExperimentConfig, TaskConfig, build
from experiments._oracle import make_measure


def step0_pass_rates(
    config: GRPOExperimentConfig, *, samples: int = 32, per_category: int = 32, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """``(p f64[R], category i64[R], category names)``: each probed task's pass rate under the
    experiment's initial policy (``samples`` rollouts at the run's temperature; the free probe
    of ``experiments/_oracle.py``)."""
    built = build(config)
    measure, rows = make_measure(built, per_category=per_category, samples=samples)
    state = built.engine.init(jax.random.key(config.seed))
    p = jax.jit(measure)(state.solver, jax.random.key(seed))
    return np.asarray(p, np.float64), rows.category, built.pool.category_names


def pass_rate_histogram(p: np.ndarray, category: np.ndarray, names) -> dict[str, dict]:
    """Per category with probed tasks: ``{"tasks", "never", "sometimes", "always"}`` counts,
    plus ``"pool"`` over every probed task."""
    out = {}
    for c in [*np.unique(category).tolist(), None]:
        q = p if c is None else p[category == c]
        out["pool" if c is None else names[c]] = {
            "tasks": int(q.size),
            "never": int((q == 0).sum()),
            "sometimes": int(((q > 0) & (q < 1)).sum()),
            "always": int((q == 1).sum()),
        }
    return out


def histogram_table(hist: dict[str, dict], samples: int) -> str:
    """The histogram as a Markdown table (shares of each row's tasks)."""
    lines = [
        "| level | tasks probed | never (p = 0) | sometimes (0 < p < 1) | always (p = 1) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, h in hist.items():
        n = max(h["tasks"], 1)
        lines.append(
            f"| {name} | {h['tasks']} | {h['never'] / n:.2f} | {h['sometimes'] / n:.2f} "
            f"| {h['always'] / n:.2f} |"
        )
    return f"Step-0 pass rates ({samples} rollouts per task):\n\n" + "\n".join(lines)


def load_experiment(path: str | None, sets: list[str]) -> GRPOExperimentConfig:
    """A main-job TOML, or a study TOML's ``[experiment]`` table (a study's pool starts from
    :class:`TaskConfig`'s defaults, as ``experiments.compare`` does)."""
    config, data = MAIN_JOB, {}
    if path:
        data = _cli.read_toml(path)
        if "experiment" in data:
            config, data = GRPOExperimentConfig(task=TaskConfig()), data["experiment"]
        config = _cli.apply_mapping(config, data, where=path)  # a misspelled key is named
    return _cli.override(config, sets)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=None, help="a main-job or study TOML")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one experiment value, e.g. --set 'init={base=\"short-lengths\"}'",
    )
    p.add_argument("--rebuild", action="store_true", help="build the base again")
    p.add_argument("--samples", type=int, default=32, help="rollouts per task (default 32)")
    p.add_argument("--per-category", type=int, default=32, help="tasks per level (0: all)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _cli.add_debug_flag(p)
    args = p.parse_args(argv)
    _cli.check_int(args.samples, "--samples", 1, "rollouts per task")
    _cli.check_int(args.per_category, "--per-category", 0, "tasks probed per level; 0: all")
    config = load_experiment(args.config, args.set)
    _cli.check_values(config)
    if base_spec(config) is None:
        raise SystemExit('error: init is "scratch": nothing to build (set init = {base = "NAME"})')
    if args.rebuild:
        shutil.rmtree(base_dir(config), ignore_errors=True)
    t0 = time.perf_counter()
    _, path = load_base(config, progress=not args.no_progress)
    print(f"base: {path} ({time.perf_counter() - t0:.1f}s)", file=sys.stderr)
    rates, category, names = step0_pass_rates(
        config, samples=args.samples, per_category=args.per_category
    )
    print(histogram_table(pass_rate_histogram(rates, category, names), args.samples))


if __name__ == "__main__":
    _cli.entry(main)
