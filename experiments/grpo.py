"""The main job: a small transformer learns an embedded task family with GRPO.

    python -m experiments.grpo --run-dir runs/grpo

Trains with the curriculum of ``experiments/configs/grpo.toml`` on its pool, evaluates greedy
exact match on a held-out set (disjoint from the training pool by task key) every
``eval_rollouts`` rollouts (checked after each update; the policy only changes at updates, so
the curve is a step function with no holes however few groups the gates admit), optionally
stops once the held-out target is reached (``stop_at_target``), and writes ``metrics.jsonl``,
``traces.jsonl``, ``checkpoints/``, ``summary.json`` and ``curves.png`` (held-out success and
admission rate against rollouts consumed). The policy starts from ``init`` (random weights, or
a warm-started base built on first use: ``experiments/_base.py``). The result is printed next
to what the studies measured for this curriculum against uniform sampling: first best against
best (``evidence_best_of``: each arm at its own best learning rate, the fair comparison), then
at the study's shared learning rate (``evidence``), each with its interval, its regime and the
command that reproduces it, and a note naming what this run trains with that the quoted arm did
not (its curriculum, a setting). A study it cannot quote is refused before anything is built.
Follows the experiment CLI convention (``--steps --seed --resume --config --set --devices``).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys

import jax

from curriculax._files import write_json_atomic
from experiments import _cli, _plot
from experiments._builders import MAIN_JOB, GRPOExperimentConfig, build, held_out_report
from experiments._stats import fmt_p, fmt_ratio_interval
from experiments.compare.cache import bound_curriculum
from experiments.compare.report import run_settings, study_best_of, study_result


def plot_curves(metrics_path: str, out_path: str, title: str, start: dict | None = None) -> None:
    """``curves.png``: held-out success and admission rate against rollouts consumed (skipped,
    with a note, when matplotlib is not installed)."""
    fig = _plot.figure(os.path.basename(out_path), figsize=(10, 3.6), layout="constrained")
    if fig is None:
        return
    with open(metrics_path) as f:
        rows = [json.loads(x) for x in f]
    evals = ([start] if start else []) + [r for r in rows if "eval/held_out_success" in r]
    key = "eval/target" if evals and "eval/target" in evals[-1] else "eval/held_out_success"
    ax = fig.subplots(1, 2)
    ax[0].step([r["rollouts"] for r in evals], [r[key] for r in evals], "o-", where="post")
    ax[0].set(xlabel="solver rollouts", ylabel="held-out exact match (target levels)", ylim=(0, 1))
    ax[0].grid(alpha=0.3)
    ax[1].plot([r["rollouts"] for r in rows], [r["batch/admission_rate"] for r in rows])
    ax[1].set(xlabel="solver rollouts", ylabel="admission rate", ylim=(0, 1.05))
    ax[1].grid(alpha=0.3)
    fig.suptitle(title)
    fig.savefig(out_path, dpi=110)


def level_text(report: dict, levels) -> str:
    """``level 0 -, level 1 0.50, ...``: a dash for a level with no held-out task."""
    out = []
    for lv in levels:
        v = report.get(f"eval/level_{lv}")
        out.append(f"{lv}: {'-' if v is None or not math.isfinite(v) else f'{v:.2f}'}")
    return ", ".join(out)


def regime_text(init) -> str:
    """``init scratch`` or ``init base short-lengths``: where a run's policy started."""
    if init == "scratch":
        return "init scratch"
    base = init["base"]
    return f"init base {base if isinstance(base, str) else 'inline ' + repr(base)}"


def labels_text(labels) -> str:
    """``labels levels``, ``labels none`` or ``labels noise 0.5``: what a sampler was told."""
    return f"labels {labels}" if isinstance(labels, str) else f"labels noise {labels['noise']}"


def differences(
    config: GRPOExperimentConfig, experiment, curriculum, grid: dict | None = None
) -> list[str]:
    """What this run trains with that a study's arm did not: ``"curriculum"`` (compared as
    each runs it, :func:`~experiments.compare.cache.bound_curriculum`, so a default written out
    or a preset's name matches its tables; an oracle arm, ``curriculum=None``, matches none),
    then each setting of :func:`~experiments.compare.report.run_settings` that differs, then
    ``"target"`` (the score the quoted rollouts are counted to, which a study's runs never
    read but its numbers do). A setting in ``grid`` (what a ``best_of`` group chose among)
    differs only where this run's value is none of the group's.

    Args:
      config: this run's config.
      experiment: the arm's experiment config.
      curriculum: the arm's curriculum table, or None for an oracle arm.
      grid: per setting a ``best_of`` group's arms differ in, the values they ran.

    Returns:
      The differing keys, ``[]`` when this run trains as the arm did.
    """
    out = []
    if curriculum is None or bound_curriculum(config.curriculum) != bound_curriculum(curriculum):
        out.append("curriculum")
    ours, theirs, grid = run_settings(config), run_settings(experiment), grid or {}
    out += [k for k, v in ours.items() if v not in grid.get(k, [theirs[k]])]
    if config.target != experiment.target:
        out.append("target")
    return out


def differs_text(arm: str, keys: list[str]) -> str:
    """The note that this run is not the study's arm ``arm`` (``keys``: :func:`differences`)."""
    return (
        f"  (this run differs from {arm} in {', '.join(keys)}: the study's numbers are not "
        "evidence for this run)"
    )


def best_of_text(config: GRPOExperimentConfig) -> str | None:
    """The best-against-best comparison of the study named by ``config.evidence_best_of`` (each
    arm at its own best learning rate: the fair comparison), with its regime, and a note where
    this run does not train as the best arm of the last group (the arm the main job stands
    for) did."""
    if not config.evidence_best_of:
        return None
    result = study_best_of(config.evidence_best_of)
    if isinstance(result, str):
        return f"  ({result})"
    lines = []
    for r in result:
        cmp = r.comparison
        lines.append(
            f"  best against best ({config.evidence_best_of}, {regime_text(r.init)}): "
            f"'{r.first}' / '{r.best}', median rollouts to target: {r.text}: "
            f"{cmp['verdict']}; seeds at target, Fisher's exact p = {fmt_p(cmp['fisher_p'])} (the "
            "arms each its group's best on these seeds; the interval is not adjusted for that)"
        )
        if r.init != config.init:
            lines.append(
                f"  (that study ran with {regime_text(r.init)}; this run with "
                f"{regime_text(config.init)}: it is evidence from another regime)"
            )
    last = result[-1]
    keys = differences(config, last.experiment, last.curriculum, last.grid)
    if keys:
        lines.append(differs_text(repr(last.best), keys))
    return "\n".join(lines) + f"\n  reproduce: {result[0].command}"


def evidence_text(config: GRPOExperimentConfig) -> str | None:
    """What the study named by ``config.evidence`` measured for ``config.evidence_arm`` at the
    main job's learning rate; the ratio is called this run's curriculum's only where this run
    trains as that arm did (:func:`differences`), and a note names what differs otherwise."""
    if not config.evidence:
        return None
    result = study_result(config.evidence, config.evidence_arm)
    if isinstance(result, str):
        return f"  ({result})"
    keys = differences(config, result.experiment, result.curriculum)
    base = result.baseline
    regime = f"{regime_text(result.init)}, {labels_text(result.labels)}"
    text = (
        f"  at the study's shared learning rate ({config.evidence}, {regime}, "
        f"{result.seeds} seeds): '{result.arm}' reached the "
        f"target on {result.reached}/{result.seeds} seeds, median {_count(result.median)} "
        f"rollouts ({base}: {_count(result.baseline_median)}, "
        f"{result.baseline_reached}/{result.seeds} seeds)"
    )
    if result.ratio is not None:
        r = result.ratio
        bound = {">=": "at least ", "<=": "at most "}.get(r.bound, "")
        point = "unknown (both medians miss)" if math.isnan(r.point) else f"{bound}{r.point:.2f}x"
        paired = (
            f", paired {fmt_ratio_interval(result.paired)}" if result.paired is not None else ""
        )
        text += (
            f";\n  {base} / {'that arm' if keys else 'this curriculum'}, median rollouts to "
            f"target: {point} (95% CI {fmt_ratio_interval(r)}{paired}): {result.verdict}; seeds "
            f"at target, Fisher's exact p = {fmt_p(result.fisher_p)}"
        )
    if keys:
        text += "\n" + differs_text("that arm", keys)
    ours = f"{regime_text(config.init)}, {labels_text(config.task.labels)}"
    if ours != regime:
        text += f"\n  (this run: {ours}: it is evidence from another regime)"
    return text + f"\n  reproduce: {result.command}"


def check_evidence(config: GRPOExperimentConfig) -> None:
    """Refuses, before anything is built, a study the run would quote after training and
    cannot: an ``evidence_best_of`` study with no two ``best_of`` groups run, an
    ``evidence_arm`` the ``evidence`` study does not hold. A ValueError names the key and how
    to quote no study (the empty string). A study file that is not there (a run started
    outside the repository, whose ``docs/compare`` the default paths name) is only noted on
    stderr: the run goes on, and says so again where it would quote it."""
    for key, path in (("evidence_best_of", config.evidence_best_of), ("evidence", config.evidence)):
        if path and not os.path.exists(path):
            print(
                f"note: {key}: the study {path} is not there; nothing will be quoted",
                file=sys.stderr,
            )
    if config.evidence_best_of and os.path.exists(config.evidence_best_of):
        result = study_best_of(config.evidence_best_of)
        if isinstance(result, str):
            raise ValueError(_refusal("evidence_best_of", result))
    if config.evidence and os.path.exists(config.evidence):
        result = study_result(config.evidence, config.evidence_arm)
        if isinstance(result, str):
            raise ValueError(_refusal("evidence_arm", result))


def _refusal(key: str, why: str) -> str:
    off = "evidence_best_of" if key == "evidence_best_of" else "evidence"
    return f'{key}: {why} (set {off} = "" to quote no study)'


def _count(value) -> str:
    return "> budget" if value is None or math.isinf(value) else f"{value:,.0f}"


def missing_outputs(run_dir: str) -> list[str]:
    """What a finished run writes after training and ``run_dir`` lacks: ``curves.png`` (when
    matplotlib is installed; without it the figure is never drawn) and
    ``summary.json["final_eval"]`` (a run killed after its summary has neither)."""
    lacking = []
    plots = importlib.util.find_spec("matplotlib") is not None
    if plots and not os.path.exists(os.path.join(run_dir, "curves.png")):
        lacking.append("curves.png")
    try:
        with open(os.path.join(run_dir, "summary.json")) as f:
            has_eval = "final_eval" in json.load(f)
    except (OSError, json.JSONDecodeError):
        has_eval = False
    if not has_eval:
        lacking.append('summary.json["final_eval"]')
    return lacking


def main(argv=None) -> None:
    # The default --steps is the main job's (load_config keeps it when --steps is not given).
    parser = _cli.base_parser(__doc__.splitlines()[0], steps=MAIN_JOB.steps, run_dir="runs/grpo")
    args = parser.parse_args(argv)
    config = _cli.load_config(GRPOExperimentConfig, args, defaults=MAIN_JOB)
    if config.eval_rollouts < 1:
        raise SystemExit(f"error: eval_rollouts must be >= 1, got {config.eval_rollouts}")
    check_evidence(config)
    mesh = _cli.setup_devices(args)
    built = build(config, mesh)
    _cli.check_engine_memory(built.engine, config)
    engine, held_out, pool = built.engine, built.held_out, built.pool
    evaluate = jax.jit(engine.solver.evaluate)
    levels = config.task.pool_levels

    def report(state) -> dict:
        return held_out_report(evaluate, state, held_out, config.task.num_levels, pool.target)

    def on_update(state, record):
        # Evaluate at the update whose rollouts crossed a multiple of eval_rollouts; decided
        # from this record alone, so a resumed run evaluates exactly where the full run did.
        now = int(record["rollouts"])
        before = now - int(record["batch/finalized_groups"]) * config.group_size
        if now // config.eval_rollouts > before // config.eval_rollouts:
            return report(state)
        return None

    def until(record):
        return config.stop_at_target and record.get("eval/target", -1.0) >= config.target

    start = {"rollouts": 0, **report(engine.init())}

    def finish(result):
        # Under the run directory's lock (on_finish): a run started there meanwhile would
        # otherwise give this plot its metrics and this final_eval its summary.
        write_outputs(args, config, result, report(result.state), start, levels)

    result = _cli.run_experiment(
        engine,
        args,
        config,
        on_update=on_update,
        until=until,
        missing=lambda: missing_outputs(args.run_dir),
        on_finish=finish,
    )
    if _cli.already_complete(result):
        return
    _cli.exit_for(result.stopped)


def write_outputs(args, config, result, final: dict, start: dict, levels) -> None:
    """Reports the finished run and writes what it adds to the engine's files: ``curves.png``
    and the final held-out evaluation in ``summary.json`` (process 0 only)."""
    if jax.process_index() == 0:
        plot_curves(
            os.path.join(args.run_dir, "metrics.jsonl"),
            os.path.join(args.run_dir, "curves.png"),
            f"GRPO on {config.task.family}, levels {list(levels)} (seed {config.seed})",
            start,
        )
        s = result.summary
        stop = " (stopped at the target)" if result.stopped == "until" else ""
        took = f" in {s['wall_seconds']:.0f}s" if "wall_seconds" in s else ""
        # Stopped before its first update (Ctrl-C while the first batch was generated): no
        # admission rate yet, and no result to set beside the studies'.
        rate = result.metrics.get("batch/admission_rate", float("nan"))
        print(
            f"\n{s['steps']} updates, {s['rollouts']:,} rollouts{took}"
            f"{stop} -> {args.run_dir}\n  held-out exact match {final['eval/target']:.3f} on "
            f"levels {list(config.task.target_levels)} (target {config.target}); per level "
            f"({level_text(final, levels)})\n  admission rate (last update) "
            + (f"{rate:.2f}" if s["steps"] else "(no update yet)")
            + f"\n  curves: {os.path.join(args.run_dir, 'curves.png')}"
        )
        for text in (best_of_text(config), evidence_text(config)) if s["steps"] else ():
            if text:
                print(text)
        path = os.path.join(args.run_dir, "summary.json")
        with open(path) as f:  # the engine wrote it (a resume writes it if it was lost)
            summary = json.load(f)
        summary["final_eval"] = final
        write_json_atomic(path, summary, indent=2, sort_keys=True)


if __name__ == "__main__":
    _cli.entry(main)
