"""Curricula against uniform sampling: rollouts to a held-out target at an equal budget.

    python -m experiments.compare --config experiments/configs/compare/hard-skew.toml \\
        --run-dir runs/compare/hard-skew

A study is data. Its TOML sets the pool (``[experiment.task]``: family, levels, the share of
the pool per level, coin-flip distractors, the levels the target is measured on), the budget
(``generations`` batches of ``groups_per_generation x group_size`` rollouts), the seeds, and
the arms: each ``[[arms]]`` table is a name plus a curriculum config (any registered or
``package.module:factory`` sampler and gates; ``categories = "levels"`` binds a sampler to the
pool's levels), or an ``oracle`` table for an oracle arm (draws decided from the policy's true
pass rates, measured by a free evaluation: p(1 - p), or the lowest unmastered level; see
``experiments/_oracle.py``), and optionally
``experiment`` overrides (the learning-rate check uses them; the main study keeps one optimizer
and batch for every arm).

Protocol: the seeds of an arm run as one ``vmap``-ped, scanned program; every arm generates
exactly the same rollouts per run (rejected groups are charged like any other; the oracle's
probe is not, by design); the policy is evaluated (greedy exact match on the held-out set) every
``eval_every`` generation batches; a run that never reaches the target is censored at the
budget. Writes ``compare.md`` (per arm: seeds at target, median and IQM rollouts to target with
bootstrap 95% intervals, the ratio of the baseline's median to the arm's with its interval,
final held-out success, updates, the share of groups with a learning signal, where the draws
went), ``compare.json`` (per-seed numbers and curves) and ``compare.png`` (share of seeds at
the target against rollouts, Kaplan-Meier style, and the mean held-out curve). Each finished
arm is kept in ``DIR/arms/`` and reused when the study is run again with the same settings
for that arm (after a crash, or with arms added); delete the folder to run them again.

``--diversity ARM --seed-index I`` runs one seed of one arm instead and prints how varied the
policy's sampled answers stay on the target levels (a collapse onto a few answers shows there).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import time
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import tasks as T
from curriculax.tasks import per_level_mean
from experiments import _cli
from experiments import _stats as S
from experiments._builders import FRONTIER_CURRICULUM, GRPOExperimentConfig, TaskConfig, build
from experiments._oracle import make_measure, make_probe, oracle, probe_rows

DEFAULT_ARMS = (
    {"name": "uniform", "curriculum": {"sampler": {"type": "uniform"}}},
    {"name": "sequential", "curriculum": {"sampler": {"type": "sequential"}}},
    {"name": "pools (frontier bands)", "curriculum": {"sampler": FRONTIER_CURRICULUM["sampler"]}},
    {"name": "oracle p(1-p)", "oracle": {}},
)
ARM_KEYS = ("name", "curriculum", "oracle", "experiment")
# Experiment settings a study does not use (each arm brings its own curriculum).
MAIN_JOB_ONLY = (
    "steps",
    "curriculum",
    "eval_rollouts",
    "checkpoint_every",
    "stop_at_target",
    "evidence",
    "evidence_arm",
)
# The oracle's probe: every `every` generation batches (0: at each evaluation), `samples`
# rollouts on `per_category` entries of each level (256 by default: a level whose pass rate is
# 0.01 shows at least one success 92% of the time; the frontier level of these families sits
# that low, and an oracle that reads it as 0 cannot tell it from an impossible level).
ORACLE_KEYS = {
    "every": 0,
    "per_category": 32,
    "samples": 8,
    "floor": 1e-6,
    "mode": "learnability",
    "mastered": 0.9,
}


@dataclasses.dataclass(frozen=True)
class CompareConfig:
    # A study's pool starts from TaskConfig's defaults, not the main job's pool.
    experiment: GRPOExperimentConfig = dataclasses.field(
        default_factory=lambda: GRPOExperimentConfig(task=TaskConfig())
    )
    title: str = ""  # the pool's name in tables and plots
    seeds: int = 10
    generations: int = 600  # generation batches per run: the rollout budget
    eval_every: int = 25  # generation batches between held-out evaluations
    baseline: str = "uniform"  # the arm ratios are taken against
    arms: tuple[dict, ...] = DEFAULT_ARMS
    # Pass-rate diagnostics (0: off): at each evaluation, a free probe of `pass_rate_samples`
    # rollouts on each distinct pool task (at most `pass_rate_per_category` per category; 0:
    # every one) records which tasks are never, sometimes and always solved. Not charged, not
    # seen by the arm; it tells how much signal the pool held for any sampler to find.
    pass_rate_samples: int = 0
    pass_rate_per_category: int = 32
    # Groups of arms (lists of names), e.g. one curriculum at several learning rates: the
    # study also reports each group's best arm (lowest median rollouts to target) and the
    # ratio of the first group's best to each other group's best, so a gain is not a
    # disguised learning-rate change.
    best_of: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self):
        for name in ("seeds", "generations", "eval_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("pass_rate_samples", "pass_rate_per_category"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.generations % self.eval_every:
            raise ValueError(
                f"generations={self.generations} must be a multiple of eval_every={self.eval_every}"
            )
        names = []
        for i, arm in enumerate(self.arms):
            check_arm(arm, f"arms[{i}]")
            names.append(arm["name"])
            orc = arm_oracle(arm)
            if orc and (orc["every"] < 0 or (orc["every"] and self.eval_every % orc["every"])):
                raise ValueError(
                    f"arm {arm['name']!r}: oracle.every={orc['every']} must divide "
                    f"eval_every={self.eval_every} (0: probe at each evaluation)"
                )
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            raise ValueError(f"arm names must be unique, duplicated: {dups}")
        if self.best_of and (len(self.best_of) < 2 or not all(self.best_of)):
            raise ValueError("best_of must hold at least two non-empty groups of arm names")
        unknown = sorted({n for group in self.best_of for n in group} - set(names))
        if unknown:
            raise ValueError(f"best_of names arms that do not exist: {unknown}; arms: {names}")


def check_arm(arm: Mapping, where: str) -> None:
    """Raises a ValueError naming what is wrong with one ``[[arms]]`` table."""
    if not isinstance(arm, Mapping):
        raise ValueError(f"{where}: an arm is a table with a name and a curriculum, got {arm!r}")
    unknown = sorted(set(arm) - set(ARM_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; accepted keys are {list(ARM_KEYS)}")
    if not isinstance(arm.get("name"), str) or not arm["name"]:
        raise ValueError(f"{where}: every arm needs a non-empty 'name'")
    if ("curriculum" in arm) == ("oracle" in arm):
        raise ValueError(
            f"{where} ({arm['name']!r}): give exactly one of 'curriculum' (a sampler and gates) "
            "or 'oracle' (the oracle arm's probe settings)"
        )
    oracle_cfg = arm.get("oracle")
    if oracle_cfg is not None:
        bad = sorted(set(oracle_cfg) - set(ORACLE_KEYS) - {"gates"})
        if bad:
            raise ValueError(
                f"{where} ({arm['name']!r}): unknown oracle key(s) {bad}; accepted keys are "
                f"{[*ORACLE_KEYS, 'gates']}"
            )


def arm_oracle(arm: Mapping) -> dict | None:
    """The arm's oracle settings with defaults filled in (None: not an oracle arm)."""
    if "oracle" not in arm:
        return None
    return {**ORACLE_KEYS, **{k: v for k, v in arm["oracle"].items() if k != "gates"}}


def arm_experiment(config: CompareConfig, arm: Mapping) -> GRPOExperimentConfig:
    """The study's experiment config with the arm's ``experiment`` overrides applied."""
    return _cli.apply_mapping(
        config.experiment, arm.get("experiment", {}), where=f"arm {arm['name']!r}: experiment"
    )


def build_arm(config: CompareConfig, arm: Mapping, mesh=None):
    """``(built, every, probe)``: one arm's engine and pool, and for an oracle arm its probe
    (``probe(engine_state, key) -> engine_state``) and the generation batches between probes
    (``probe`` None and ``every = eval_every`` otherwise)."""
    exp = arm_experiment(config, arm)
    orc = arm_oracle(arm)
    if orc is None:
        return build(exp, mesh, curriculum=arm["curriculum"]), config.eval_every, None
    sampler = oracle(exp.task.size, floor=orc["floor"])
    built = build(exp, mesh, {"gates": arm["oracle"].get("gates", {})}, sampler=sampler)
    probe = make_probe(
        built,
        per_category=orc["per_category"],
        samples=orc["samples"],
        mode=orc["mode"],
        mastered=orc["mastered"],
    )
    return built, orc["every"] or config.eval_every, probe


def run_arm(config: CompareConfig, arm: Mapping, mesh=None) -> dict:
    """All seeds of one arm as one program. Returns per-seed curves (numpy), one point per
    evaluation: ``held_out`` (target score), ``levels`` (per level), ``rollouts``,
    ``updates``, ``draws`` (per category, in the chunk), ``signal`` (groups whose rewards
    differ, in the chunk), ``groups``, ``admitted``; with pass-rate diagnostics on, also
    ``pass_rate`` (each probed task's measured pass rate at the evaluation, ``[S, E, R]``)
    and ``probe_category`` (each probed task's category)."""
    exp = arm_experiment(config, arm)
    built, every, probe = build_arm(config, arm, mesh)
    engine, pool = built.engine, built.pool
    held_out = pool.held_out
    target = jnp.asarray(pool.target, jnp.float32)
    levels = jnp.asarray(held_out.level)
    num_levels = exp.task.num_levels
    category = jnp.asarray(pool.category)
    num_cat = pool.num_categories
    blocks = config.eval_every // every
    chunks = config.generations // config.eval_every
    measure, rows = None, None
    if config.pass_rate_samples:
        measure, rows = make_measure(
            built, per_category=config.pass_rate_per_category, samples=config.pass_rate_samples
        )

    def gen_stats(report):
        gen = report.generation
        r, v = gen.rewards, gen.valid
        hi = jnp.max(jnp.where(v, r, -jnp.inf), axis=1)
        lo = jnp.min(jnp.where(v, r, jnp.inf), axis=1)
        draws = jnp.zeros((num_cat,), jnp.int32).at[category[gen.task_ids]].add(1)
        return {
            "draws": draws,
            "signal": jnp.sum(hi > lo, dtype=jnp.int32),
            "groups": jnp.int32(gen.task_ids.shape[0]),
            "admitted": jnp.sum(gen.admitted, dtype=jnp.int32),
        }

    def one_seed(key):
        probe_key = jax.random.fold_in(key, 0x0AC1E)
        measure_key = jax.random.fold_in(key, 0x9A55)

        def block(state, _):
            if probe is not None:
                state = probe(state, jax.random.fold_in(probe_key, state.counters.generations))

            def step(s, _):
                s, report = engine.step(s)
                return s, gen_stats(report)

            state, stats = jax.lax.scan(step, state, None, length=every)
            return state, jax.tree.map(lambda x: jnp.sum(x, axis=0), stats)

        def chunk(state, _):
            state, stats = jax.lax.scan(block, state, None, length=blocks)
            stats = jax.tree.map(lambda x: jnp.sum(x, axis=0), stats)
            scores = engine.solver.evaluate(state.solver, held_out, key)
            out = {
                "held_out": jnp.sum(scores * target) / jnp.sum(target),
                "levels": per_level_mean(scores, levels, num_levels),
                "rollouts": state.counters.rollouts,
                "updates": state.counters.updates,
                **stats,
            }
            if measure is not None:
                k = jax.random.fold_in(measure_key, state.counters.generations)
                out["pass_rate"] = measure(state.solver, k)
            return state, out

        _, curve = jax.lax.scan(chunk, engine.init(key), None, length=chunks)
        return curve

    keys = jax.random.split(jax.random.key(config.experiment.seed), config.seeds)
    fn = jax.vmap(one_seed)
    if mesh is not None:
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        split = NamedSharding(mesh, P(mesh.axis_names[0]))
        fn = jax.jit(fn, in_shardings=split, out_shardings=split)
        keys = jax.device_put(keys, split)
    else:
        fn = jax.jit(fn)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    curves = jax.device_get(fn(keys))
    curves = {k: np.asarray(v) for k, v in curves.items()}
    curves["seconds"] = time.perf_counter() - t0
    curves["load"] = (load0, os.getloadavg()[0])
    curves["category_names"] = list(pool.category_names)
    curves["category_entries"] = np.bincount(pool.category, minlength=num_cat)
    if rows is not None:
        curves["probe_category"] = rows.category
    return curves


def diversity(
    config: CompareConfig,
    arm: Mapping,
    seed_index: int,
    *,
    samples: int = 8,
    generations: int = 200,
) -> str:
    """How varied the policy's sampled answers stay while one seed of ``arm`` trains (the
    study's own key for seed ``seed_index``, so it is the study's run): every ``eval_every``
    generation batches, ``samples`` answers at the run's temperature for every distinct task of
    the target levels (at most 32 per level). Returns a markdown table: the mean number of
    distinct answers per task, distinct answers over all of them, and the pass rate. A policy
    that answers the same whatever the prompt (a collapse) shows a handful of distinct answers
    over all tasks while its pass rate stays near 0."""
    if not 0 <= seed_index < config.seeds:
        raise ValueError(f"seed index must be in [0, {config.seeds}), got {seed_index}")
    built, every, probe = build_arm(config, arm)
    engine = built.engine
    rows = probe_rows(built.pool, 32)
    keep = np.isin(rows.category, config.experiment.task.target_levels)
    tasks = T.take(built.pool.train, jnp.asarray(rows.rows[keep]))
    key = jax.random.split(jax.random.key(config.experiment.seed), config.seeds)[seed_index]
    probe_key = jax.random.fold_in(key, 0x0AC1E)  # as run_arm draws it

    def step(state, i):
        if probe is not None:
            k = jax.random.fold_in(probe_key, state.counters.generations)
            state = jax.lax.cond(i % every == 0, lambda s: probe(s, k), lambda s: s, state)
        return engine.step(state)[0], None

    run = jax.jit(lambda s: jax.lax.scan(step, s, jnp.arange(config.eval_every))[0])

    @jax.jit
    def answers(state, k):
        out = built.rollout(state.solver, tasks, k, samples)
        return out.data.completion, out.rewards

    state = engine.init(key)
    lines = [
        f"{config.title}, arm {arm['name']!r}, seed index {seed_index}: {samples} sampled "
        f"answers on each of {int(keep.sum())} target-level tasks\n",
        "| generation batches | distinct answers per task (mean) | distinct over all | pass |",
        "|---:|---:|---:|---:|",
    ]
    chunks = config.generations // config.eval_every
    for chunk in range(chunks + 1):
        comp, rewards = (np.asarray(x) for x in answers(state, jax.random.key(chunk)))
        per_task = [len({c.tobytes() for c in group}) for group in comp]
        overall = len({c.tobytes() for group in comp for c in group})
        lines.append(
            f"| {chunk * config.eval_every} | {np.mean(per_task):.2f} | {overall} "
            f"| {rewards.mean():.3f} |"
        )
        print(lines[-1], file=sys.stderr, flush=True)
        if chunk < chunks:
            state = run(state)
    return "\n".join(lines)


def _reach(curve: dict, target: float, field: str = "rollouts") -> np.ndarray:
    return S.first_hit(curve[field], curve["held_out"], target)


def summarize(config: CompareConfig, curves: dict[str, dict]) -> tuple[str, dict]:
    """The markdown tables and the JSON data of a finished study."""
    exp = config.experiment
    target = exp.target
    g, k = exp.groups_per_generation, exp.group_size
    budget = _budget(config)
    base = curves.get(config.baseline)
    base_reach = _reach(base, target) if base is not None else None
    rows, data = [], {}
    for name, c in curves.items():
        reach = _reach(c, target)
        upd = _reach(c, target, "updates")
        final = c["held_out"][:, -1]
        med = S.bootstrap(reach, S.median)
        iq = S.bootstrap(reach, S.iqm)
        ratio_values = None
        if base_reach is not None and name != config.baseline:
            ratio_values = S.censored_ratio(base_reach, reach, budget, S.median)
            ratio = S.fmt_ratio(*ratio_values)
        else:
            ratio = "1 (baseline)" if name == config.baseline else "-"
        signal = c["signal"].sum() / c["groups"].sum()
        data[name] = {
            "rollouts_to_target": [None if np.isinf(x) else float(x) for x in reach],
            "updates_to_target": [None if np.isinf(x) else float(x) for x in upd],
            "final_held_out": final.tolist(),
            "final_levels": c["levels"][:, -1].tolist(),
            "final_updates": c["updates"][:, -1].tolist(),
            "signal_share": (c["signal"].sum(1) / c["groups"].sum(1)).tolist(),
            "admission_rate": (c["admitted"].sum(1) / c["groups"].sum(1)).tolist(),
            "draw_share": (c["draws"].sum(1) / c["draws"].sum((1, 2))[:, None]).tolist(),
            "category_names": c["category_names"],
            "curve_rollouts": c["rollouts"][0].tolist(),
            "curve_held_out": c["held_out"].tolist(),
            "seconds": c["seconds"],
            "load": list(c["load"]),
            "median": _finite(med),
            "iqm": _finite(iq),
            "ratio_to_baseline": None if ratio_values is None else _finite(ratio_values[:3]),
            "ratio_kind": None if ratio_values is None else ratio_values[3],
        }
        rows.append(
            f"| {_cell(name)} | {np.isfinite(reach).sum()}/{reach.size} "
            f"| {S.fmt_interval(*med, bound=budget)} | {S.fmt_interval(*iq, bound=budget)} "
            f"| {ratio} | {final.mean():.3f} ± {final.std():.3f} "
            f"| {S.fmt_count(S.median(upd), bound=c['updates'][:, -1].max())} "
            f"| {c['updates'][:, -1].mean():,.0f} | {signal:.2f} |"
        )
    levels = list(exp.task.target_levels)
    title = f"{config.title}: " if config.title else ""
    overrides = [n for n in curves if _arm(config, n).get("experiment")]
    header = (
        f"{title}{exp.task.family}, levels {list(exp.task.pool_levels)} with pool shares "
        f"{_shares(exp)}{_distractor_text(exp)}; pool of {exp.task.size} entries. "
        f"Budget {budget:,} rollouts per run ({config.generations} generation batches of {g} "
        f"groups x {k} rollouts); {config.seeds} seeds per arm; target: held-out exact match "
        f">= {target} on levels {levels}, evaluated every {config.eval_every} batches "
        f"({config.eval_every * g * k:,} rollouts). Intervals: bootstrap 95% over seeds; a seed "
        f"that misses counts as > budget. Ratios count a miss as the budget: >= marks a lower "
        f"bound (the baseline's median missed), <= an upper bound (the arm's did), - unknown."
        + (f" Arms with their own settings: {overrides}." if overrides else "")
        + "\n\n| arm | seeds at target | rollouts to target: median [95% CI] | IQM [95% CI] "
        f"| {_cell(config.baseline)} / arm (median) [95% CI] | final held-out (mean ± sd) "
        "| updates to target (median) | updates in budget (mean) | groups with signal |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    names = next(iter(curves.values()))["category_names"]
    pool_levels = list(exp.task.pool_levels)
    cats = _shown_categories(config, names)
    draw_rows = [
        f"| {_cell(name)} | "
        + " | ".join(f"{x:.2f}" for x in np.asarray(data[name]["draw_share"]).mean(0)[cats])
        + " |"
        for name in curves
    ]
    draws = (
        "\n\nShare of each arm's draws per category (mean over seeds):\n\n"
        f"| arm | {' | '.join(names[i] for i in cats)} |\n|---|{'---:|' * len(cats)}\n"
        + "\n".join(draw_rows)
    )
    levels_rows = [
        f"| {_cell(name)} | "
        + " | ".join(_fmt_level(x) for x in _mean_finite(c["levels"][:, -1])[pool_levels])
        + " |"
        for name, c in curves.items()
    ]
    per_level = (
        "\n\nFinal held-out exact match per level (mean over seeds; - : no held-out task):\n\n"
        f"| arm | {' | '.join(f'level {lv}' for lv in pool_levels)} |\n"
        f"|---|{'---:|' * len(pool_levels)}\n" + "\n".join(levels_rows)
    )
    wall = (
        "\n\nWall time per arm (all seeds, compile included): "
        + ", ".join(
            f"{n} {c['seconds']:.0f} s (load {c['load'][0]:.1f}-{c['load'][1]:.1f})"
            for n, c in curves.items()
        )
        + "\n"
    )
    rates = pass_rate_table(config, curves, data)
    best = best_of_text(config, curves)
    return header + "\n" + "\n".join(rows) + best + draws + per_level + rates + wall, data


def best_of(config: CompareConfig, curves: dict[str, dict]) -> list[dict]:
    """Per ``best_of`` group, its best arm (lowest median rollouts to target, a miss counting
    as infinite; ties: more seeds at target) and, after the first group, the first group's
    best over it: ``(point, low, high, kind)`` of :func:`~experiments._stats.censored_ratio`."""
    exp = config.experiment
    budget = _budget(config)
    out = []
    for group in config.best_of:
        reach = {n: _reach(curves[n], exp.target) for n in group if n in curves}
        if not reach:
            continue
        name = min(reach, key=lambda n: (S.median(reach[n]), -np.isfinite(reach[n]).sum()))
        entry = {"group": list(group), "best": name, "median": S.median(reach[name])}
        if out:
            first = _reach(curves[out[0]["best"]], exp.target)
            entry["ratio_from_first"] = S.censored_ratio(first, reach[name], budget, S.median)
        out.append(entry)
    return out


def _best_of_json(entry: dict) -> dict:
    """One :func:`best_of` entry, JSON-safe (a miss or an unbounded end as ``None``)."""
    out = {**entry, "median": _finite([entry["median"]])[0]}
    if "ratio_from_first" in entry:
        *ratio, kind = entry["ratio_from_first"]
        out.update(ratio_from_first=_finite(ratio), ratio_kind=kind)
    return out


def best_of_text(config: CompareConfig, curves: dict[str, dict]) -> str:
    """The ``best_of`` paragraph of the study's table ('' without two groups run)."""
    entries = best_of(config, curves)
    if len(entries) < 2:
        return ""
    budget = _budget(config)
    first = entries[0]["best"]
    parts = [f"{e['best']} (median {S.fmt_count(e['median'], bound=budget)})" for e in entries]
    ratios = [f"{first} / {e['best']}: {S.fmt_ratio(*e['ratio_from_first'])}" for e in entries[1:]]
    return (
        "\n\nEach group's best arm (lowest median rollouts to target): "
        + "; ".join(parts)
        + ". Best against best (median, 95% CI): "
        + "; ".join(ratios)
        + "."
    )


def pass_rate_split(c: dict) -> dict[str, np.ndarray] | None:
    """Shares of each category's probed tasks never (``never``), sometimes (``sometimes``) and
    always (``always``) solved by the probe, ``f[S, E, C]``, and ``offered``: the share of
    groups that would carry a signal if drawn uniformly over the pool's entries at that
    moment, ``f[S, E]`` (None without pass-rate diagnostics)."""
    if "pass_rate" not in c:
        return None
    p, cat = np.asarray(c["pass_rate"]), np.asarray(c["probe_category"])
    num_cat = len(c["category_names"])
    onehot = np.eye(num_cat)[cat]  # [R, C]
    count = np.maximum(onehot.sum(0), 1)
    out = {
        "never": (p == 0) @ onehot / count,
        "sometimes": ((p > 0) & (p < 1)) @ onehot / count,
        "always": (p == 1) @ onehot / count,
    }
    entries = np.asarray(c["category_entries"], np.float64)
    out["offered"] = out["sometimes"] @ (entries / entries.sum())
    return out


def pass_rate_table(config: CompareConfig, curves: dict[str, dict], data: dict) -> str:
    """The pass-rate diagnostics as markdown (empty when they are off), and per-seed numbers
    into ``data``."""
    splits = {n: pass_rate_split(c) for n, c in curves.items()}
    if not any(v is not None for v in splits.values()):
        return ""
    exp = config.experiment
    names = next(iter(curves.values()))["category_names"]
    cats = _shown_categories(config, names)
    target = list(exp.task.target_levels)
    rows = []
    for name, sp in splits.items():
        if sp is None:
            continue
        c = curves[name]
        cat = np.asarray(c["probe_category"])
        in_target = np.isin(cat, target)
        p = np.asarray(c["pass_rate"])[:, :, in_target]
        never, always = (p == 0).mean(), (p == 1).mean()
        sometimes = 1.0 - never - always
        # Tasks that went from never solved (first evaluation) to always solved (last): how
        # many evaluations they spent in between, sometimes solved.
        crossed = (p[:, 0] == 0) & (p[:, -1] == 1)
        between = ((p > 0) & (p < 1)).sum(1)[crossed]
        data[name]["pass_rates"] = {
            "sometimes_by_category": sp["sometimes"].mean(1).tolist(),
            "never_by_category": sp["never"].mean(1).tolist(),
            "always_by_category": sp["always"].mean(1).tolist(),
            "offered_signal_share": sp["offered"].mean(1).tolist(),
            "target_sometimes": float(sometimes),
            "evaluations_between": between.tolist(),
        }
        mid = f"{np.median(between):.0f} ({crossed.sum()} tasks)" if between.size else "-"
        own = c["signal"].sum() / c["groups"].sum()
        rows.append(
            f"| {_cell(name)} | {never:.2f} / {sometimes:.2f} / {always:.2f} | "
            + " | ".join(f"{x:.2f}" for x in sp["sometimes"].mean((0, 1))[cats])
            + f" | {sp['offered'].mean():.2f} | {own:.2f} | {mid} |"
        )
    probed = next(c for c in curves.values() if "pass_rate" in c)
    per_cat = np.bincount(np.asarray(probed["probe_category"]), minlength=len(names))
    return (
        f"\n\nPass rates measured by a free probe ({config.pass_rate_samples} rollouts per "
        f"distinct task at the run's temperature, at every evaluation; tasks probed per "
        f"category: {', '.join(f'{names[i]} {per_cat[i]}' for i in cats)}), mean over "
        "evaluations and seeds. A task with 0 < p < 1 in its probe is one whose group would "
        "carry a learning signal. 'Offered': the share of groups with a signal that uniform "
        "draws over the pool would have got at that moment; 'own': the arm's own share. "
        "'Between': evaluations a target task spent sometimes solved on its way from never "
        f"(first evaluation) to always (last), median over such tasks and seeds (an evaluation "
        f"every {config.eval_every * exp.groups_per_generation * exp.group_size:,} rollouts)."
        "\n\n"
        f"| arm | target levels {target}: never / sometimes / always solved | "
        + " | ".join(f"{names[i]}: sometimes" for i in cats)
        + " | offered | own | between |\n"
        + f"|---|---:|{'---:|' * len(cats)}---:|---:|---:|\n"
        + "\n".join(rows)
    )


def _finite(values) -> list[float | None]:
    """JSON-safe: ``inf`` (a miss, an unbounded end) and ``nan`` as ``None``."""
    return [float(x) if np.isfinite(x) else None for x in values]


def _mean_finite(x: np.ndarray) -> np.ndarray:
    """Mean over seeds (axis 0) per level; NaN where a level has no held-out task."""
    ok = np.isfinite(x)
    return np.where(ok.any(0), np.where(ok, x, 0).sum(0) / np.maximum(ok.sum(0), 1), np.nan)


def _fmt_level(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{x:.2f}"


def _arm(config: CompareConfig, name: str) -> Mapping:
    return next(a for a in config.arms if a["name"] == name)


def _shares(exp: GRPOExperimentConfig) -> str:
    m = exp.task.mass
    return "[" + ", ".join(f"{m[lv]:.2f}" for lv in exp.task.pool_levels) + "]"


def _distractor_text(exp: GRPOExperimentConfig) -> str:
    t = exp.task
    if not t.distractors:
        return ""
    return f", plus {t.distractors:.0%} coin-flip distractors (reward 1 w.p. {t.distractor_p})"


def plot(config: CompareConfig, curves: dict[str, dict], out_path: str) -> None:
    """Share of seeds at the target against rollouts (left) and the mean held-out success
    (right), one line per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    exp = config.experiment
    rates = any("pass_rate" in c for c in curves.values())
    fig, ax = plt.subplots(1, 3 if rates else 2, figsize=(16.5 if rates else 11, 4.2))
    budget = _budget(config)
    grid = np.linspace(0, budget, 401)
    colors = plt.get_cmap("tab20").colors
    for i, (name, c) in enumerate(curves.items()):
        gated = bool(_arm(config, name).get("curriculum", {}).get("gates"))
        style = {"color": colors[(2 * i) % 20 + (i >= 10)], "ls": "--" if gated else "-"}
        reach = _reach(c, exp.target)
        ax[0].step(grid, S.reached_curve(reach, grid), where="post", label=name, **style)
        x = c["rollouts"][0]
        ax[1].plot(x, c["held_out"].mean(axis=0), label=name, **style)
        if "pass_rate" in c:
            in_target = np.isin(c["probe_category"], exp.task.target_levels)
            p = c["pass_rate"][:, :, in_target]
            ax[2].plot(x, ((p > 0) & (p < 1)).mean(axis=(0, 2)), label=name, **style)
    ax[0].set(xlabel="solver rollouts", ylabel="share of seeds at target", ylim=(-0.02, 1.02))
    ax[1].axhline(exp.target, color="grey", lw=0.8, ls="--")
    ax[1].set(xlabel="solver rollouts", ylabel="held-out exact match (mean)", ylim=(0, 1))
    if rates:
        ax[2].set(
            xlabel="solver rollouts",
            ylabel="target-level tasks with 0 < p < 1 (probe)",
            ylim=(0, None),
        )
    for a in ax:
        a.grid(alpha=0.3)
    ax[0].legend(fontsize=8)
    fig.suptitle(config.title or "study")
    fig.tight_layout()
    fig.savefig(out_path, dpi=110)
    plt.close(fig)


def _budget(config: CompareConfig) -> int:
    """Rollouts per run: ``generations`` batches of ``groups_per_generation x group_size``."""
    exp = config.experiment
    return config.generations * exp.groups_per_generation * exp.group_size


def _shown_categories(config: CompareConfig, names: list[str]) -> list[int]:
    """The categories the tables show: the pool's levels and any extra (coin-flip) category."""
    task = config.experiment.task
    return [i for i in range(len(names)) if i in task.pool_levels or i >= task.num_levels]


def _cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell (an arm named ``(|advantage|)`` splits none)."""
    return text.replace("|", "\\|")


def _arm_fingerprint(config: CompareConfig, arm: Mapping) -> str:
    """What an arm's curves depend on: its experiment, curriculum or oracle, the seeds and
    the schedule (not its name, nor the other arms)."""
    exp = dataclasses.asdict(arm_experiment(config, arm))
    for key in MAIN_JOB_ONLY:
        exp.pop(key)
    spec = {
        "experiment": exp,
        "arm": {k: v for k, v in arm.items() if k not in ("name", "experiment")},
        "seeds": config.seeds,
        "generations": config.generations,
        "eval_every": config.eval_every,
    }
    if config.pass_rate_samples:
        spec["pass_rates"] = [config.pass_rate_samples, config.pass_rate_per_category]
    text = json.dumps(spec, sort_keys=True, default=_json)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _arm_path(run_dir: str, config: CompareConfig, arm: Mapping) -> str:
    return os.path.join(run_dir, "arms", f"{_arm_fingerprint(config, arm)}.npz")


def save_arm(run_dir: str, config: CompareConfig, arm: Mapping, curves: dict) -> None:
    """Keeps a finished arm's curves, so a rerun of the study (after a crash, or with arms
    added) reuses them instead of running them again."""
    path = _arm_path(run_dir, config, arm)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    extra = {k: np.asarray(curves[k]) for k in ("seconds", "load", "category_names")}
    np.savez(path, **{k: v for k, v in curves.items() if k not in extra}, **extra)


def load_arm(run_dir: str, config: CompareConfig, arm: Mapping) -> dict | None:
    """The curves ``save_arm`` kept for this arm with these settings, or None."""
    path = _arm_path(run_dir, config, arm)
    if not os.path.exists(path):
        return None
    with np.load(path) as f:
        curves = {k: f[k] for k in f.files}
    curves["seconds"] = float(curves["seconds"])
    curves["load"] = tuple(curves["load"].tolist())
    curves["category_names"] = curves["category_names"].tolist()
    return curves


def main(argv=None) -> None:
    parser = _cli.base_parser(__doc__.splitlines()[0], steps=0, run_dir="runs/compare")
    parser.add_argument("--arms", nargs="+", default=None, help="run only these arms (by name)")
    parser.add_argument(
        "--diversity",
        metavar="ARM",
        default=None,
        help="instead of the study: how varied one seed's answers stay while ARM trains",
    )
    parser.add_argument("--seed-index", type=int, default=0, help="the seed for --diversity")
    args = parser.parse_args(argv)
    _cli.refuse_unused(
        parser,
        args,
        [
            "--steps",
            "--resume",
            "--overwrite",
            "--allow-partial",
            "--checkpoint-every",
            "--tensorboard",
            "--wandb",
        ],
        "a study's budget is its TOML's generations, finished arms in RUN_DIR/arms are reused "
        "(delete that folder to rerun them), and it writes compare.md, compare.json and "
        "compare.png",
    )
    config = _cli.load_config(CompareConfig, args)
    if args.seed is not None:
        config = dataclasses.replace(
            config, experiment=dataclasses.replace(config.experiment, seed=args.seed)
        )
    if args.arms:
        names = [a["name"] for a in config.arms]
        unknown = sorted(set(args.arms) - set(names))
        if unknown:
            raise SystemExit(f"unknown arms {unknown}; choose from {names}")
        config = dataclasses.replace(
            config, arms=tuple(a for a in config.arms if a["name"] in args.arms)
        )
    if args.diversity is not None:
        arm = next((a for a in config.arms if a["name"] == args.diversity), None)
        if arm is None:
            raise SystemExit(
                f"no arm {args.diversity!r}; choose from {[a['name'] for a in config.arms]}"
            )
        print(diversity(config, arm, args.seed_index))
        return
    mesh = _cli.setup_devices(args)
    if mesh is not None and config.seeds % args.devices:
        raise SystemExit(f"--devices {args.devices} must divide the {config.seeds} seeds")
    os.makedirs(args.run_dir, exist_ok=True)
    curves = {}
    for arm in config.arms:
        name = arm["name"]
        c = load_arm(args.run_dir, config, arm)
        if c is not None:
            print(f"== {name}: reusing the finished run in {args.run_dir}", file=sys.stderr)
            curves[name] = c
            continue
        print(f"== {name}: {config.seeds} seeds ...", file=sys.stderr, flush=True)
        curves[name] = c = run_arm(config, arm, mesh)
        save_arm(args.run_dir, config, arm, c)
        reach = _reach(c, config.experiment.target)
        print(
            f"   {c['seconds']:.0f}s (load {c['load'][0]:.1f}-{c['load'][1]:.1f}); "
            f"{np.isfinite(reach).sum()}/{reach.size} at target; final held-out "
            f"{c['held_out'][:, -1].round(2).tolist()}",
            file=sys.stderr,
            flush=True,
        )
    table, data = summarize(config, curves)
    print(table)
    command = "python -m experiments.compare " + " ".join(sys.argv[1:] if argv is None else argv)
    with open(os.path.join(args.run_dir, "compare.md"), "w") as f:
        f.write(f"Made by `{command}`.\n\n{table}")
    with open(os.path.join(args.run_dir, "compare.json"), "w") as f:
        json.dump(
            {
                "config": dataclasses.asdict(config),
                "command": command,
                "arms": data,
                "best_of": [_best_of_json(e) for e in best_of(config, curves)],
            },
            f,
            indent=2,
            default=_json,
        )
    plot(config, curves, os.path.join(args.run_dir, "compare.png"))


def _json(x):
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"not JSON-able: {type(x).__name__}")


if __name__ == "__main__":
    _cli.entry(main)
