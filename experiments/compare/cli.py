"""``python -m experiments.compare``: run a study's arms (reusing finished ones), then write
its tables, numbers and figure."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import sys

import numpy as np

from curriculax.engine import RunDirError
from curriculax.engine._rundir import RunLock
from experiments import _cli
from experiments.compare.cache import load_arm, save_arm
from experiments.compare.config import CompareConfig, json_default
from experiments.compare.diversity import diversity
from experiments.compare.plot import plot
from experiments.compare.report import load_study, reach, study_json, summarize, tables
from experiments.compare.run import check_arms, progress_for, run_arm

DESCRIPTION = (
    "Curricula against uniform sampling: rollouts to a held-out target at an equal budget."
)


def main(argv=None) -> None:
    parser = _cli.base_parser(DESCRIPTION, steps=0, run_dir="runs/compare")
    parser.prog = "python -m experiments.compare"
    parser.add_argument("--arms", nargs="+", default=None, help="run only these arms (by name)")
    parser.add_argument(
        "--diversity",
        metavar="ARM",
        default=None,
        help="instead of the study: how varied one seed's answers stay while ARM trains",
    )
    parser.add_argument("--seed-index", type=int, default=0, help="the seed for --diversity")
    parser.add_argument(
        "--report",
        metavar="JSON",
        default=None,
        help="instead of running: redo a finished study's tables from its per-seed numbers "
        "(its compare.json, rewritten in place, and the .md beside it)",
    )
    parser.add_argument(
        "--replace-arms",
        metavar="JSON",
        default=None,
        help="with --report: take the arms another run of the same study ran (its compare.json, "
        "e.g. a rerun with --arms after a fix to one sampler) in place of this study's; a "
        "baseline it reran must have the same per-seed numbers",
    )
    args = parser.parse_args(argv)
    if args.replace_arms is not None and args.report is None:
        raise SystemExit("--replace-arms works with --report (the study whose arms it replaces)")
    if args.report is not None:
        report_only(args.report, argv, args.replace_arms)
        return
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
        if config.baseline not in args.arms:
            raise SystemExit(
                f"--arms leaves out the baseline {config.baseline!r}, which every ratio is taken "
                "against; add it (a finished run of it is reused)"
            )
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
    check_arms(config)  # every arm, before any runs
    os.makedirs(args.run_dir, exist_ok=True)
    lock = RunLock(args.run_dir)
    try:
        lock.acquire()
    except RunDirError as e:
        raise SystemExit(f"error: {e}") from None
    try:
        _run_study(config, args, argv, mesh)
    finally:
        lock.release()


def _run_study(config: CompareConfig, args, argv, mesh) -> None:
    """Runs the arms not kept in ``RUN_DIR/arms`` yet, then writes the tables, numbers and
    figure (under the study directory's lock)."""
    curves = {}
    for arm in config.arms:
        name = arm["name"]
        c = load_arm(args.run_dir, config, arm)
        if c is not None:
            print(f"== {name}: reusing the finished run in {args.run_dir}", file=sys.stderr)
            curves[name] = c
            continue
        print(f"== {name}: {config.seeds} seeds ...", file=sys.stderr, flush=True)
        progress = None if args.no_progress else progress_for(config, arm)
        curves[name] = c = run_arm(config, arm, mesh, progress)
        save_arm(args.run_dir, config, arm, c)
        hits = reach(c, config.experiment.target)
        print(
            f"   {c['seconds']:.0f}s (load {c['load'][0]:.1f}-{c['load'][1]:.1f}); "
            f"{np.isfinite(hits).sum()}/{hits.size} at target; final held-out "
            f"{c['held_out'][:, -1].round(2).tolist()}",
            file=sys.stderr,
            flush=True,
        )
    table, data = summarize(config, curves)
    print(table)
    command = command_line(argv)
    with open(os.path.join(args.run_dir, "compare.md"), "w") as f:
        f.write(f"Made by `{command}`.\n\n{table}")
    with open(os.path.join(args.run_dir, "compare.json"), "w") as f:
        json.dump(study_json(config, data, command), f, indent=2, default=json_default)
    plot(config, curves, os.path.join(args.run_dir, "compare.png"))


def _replace_arms(config, data, command, other_config, other_data, other_command):
    """``(data, command)`` with ``other_data``'s arms (its baseline's aside) in place of
    ``data``'s: see :func:`report_only`."""
    mine = {a["name"]: a for a in config.arms}
    theirs = {a["name"]: a for a in other_config.arms}
    same = dataclasses.replace(other_config, arms=config.arms, best_of=config.best_of)
    if same != config:
        raise SystemExit("--replace-arms: the two runs are not of the same study (settings differ)")
    names = [n for n in theirs if n != config.baseline]
    differ = [n for n in theirs if n not in mine or theirs[n] != mine[n]]
    if differ or not names:
        raise SystemExit(
            f"--replace-arms: arms {differ} are not this study's arms as it ran them"
            if differ
            else "--replace-arms: the other run has no arm but the baseline"
        )
    base = config.baseline
    if base in other_data and (
        other_data[base]["rollouts_to_target"] != data[base]["rollouts_to_target"]
        or other_data[base]["final_held_out"] != data[base]["final_held_out"]
    ):
        raise SystemExit(
            f"--replace-arms: the other run's baseline {base!r} has other per-seed numbers than "
            "this study's: the runs do not reproduce each other"
        )
    data = {**data, **{n: other_data[n] for n in names}}
    shown = ", ".join(repr(n) for n in names)
    return data, f"{command}`, arms {shown} from `{other_command}"


def command_line(argv=None) -> str:
    """The command as a shell would take it back: arm names with spaces and parentheses
    quoted, so the line a study records can be pasted to rerun it."""
    return "python -m experiments.compare " + shlex.join(sys.argv[1:] if argv is None else argv)


def report_only(path: str, argv=None, replace: str | None = None) -> None:
    """Redoes a finished study's tables from the per-seed numbers its ``compare.json`` keeps
    (no arm runs): rewrites that file (same per-seed numbers, statistics redone) and the
    ``.md`` beside it. The figure needs the arms' curves and is left as it is.

    ``replace``: another run's ``compare.json`` of the same study (the same settings and arm
    tables; it may have run a subset of the arms, ``--arms``): its arms other than the
    baseline replace this study's, and the command it was made by is added to this one's.
    If it reran the baseline, the baseline's per-seed numbers must equal this study's (else
    the two runs do not reproduce each other and their arms cannot share a table)."""
    for p in (path, replace):
        if p is not None and (not p.endswith(".json") or not os.path.isfile(p)):
            raise SystemExit(f"--report and --replace-arms take a study's compare.json, got {p!r}")
    config, data, command = load_study(path)
    if replace is not None:
        data, command = _replace_arms(config, data, command, *load_study(replace))
    table = tables(config, data)
    print(table)
    this = command_line(argv)
    with open(path[: -len(".json")] + ".md", "w") as f:
        f.write(
            f"Made by `{command}`; tables redone from its per-seed numbers by `{this}`.\n\n{table}"
        )
    with open(path, "w") as f:
        json.dump(study_json(config, data, command), f, indent=2, default=json_default)
