"""``python -m experiments.compare``: run a study's arms (reusing finished ones), then write
its tables, numbers and figure."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shlex
import sys

import numpy as np

from curriculax._files import write_json_atomic, write_text_atomic
from curriculax.engine import RunDirError
from curriculax.engine._rundir import LOCK, RunLock
from experiments import _cli
from experiments.compare.cache import arm_fingerprint, load_arm, save_arm
from experiments.compare.config import (
    CompareConfig,
    check_main_job_only,
    json_default,
    select_arms,
)
from experiments.compare.diversity import diversity
from experiments.compare.plot import plot, stored_curves
from experiments.compare.report import (
    load_study,
    reach,
    seed_data,
    study_json,
    summarize,
    tables,
)
from experiments.compare.run import check_arms, progress_for, run_arm

DESCRIPTION = (
    "Curricula against uniform sampling: rollouts to a held-out target at an equal budget."
)


# What ``--report`` takes besides its JSON: ``--replace-arms``, ``--debug`` (read by
# ``_cli.entry``) and ``--no-progress`` (it shows no progress either way).
REPORT_FLAGS = ("help", "report", "replace_arms", "debug", "no_progress")


# The engine scripts' flags a study refuses (left out of its --help).
NEVER_USED = [
    "--steps",
    "--resume",
    "--allow-partial",
    "--checkpoint-every",
    "--tensorboard",
    "--wandb",
]


def main(argv=None) -> None:
    parser = _cli.base_parser(DESCRIPTION, steps=0, run_dir="runs/compare")
    parser.prog = "python -m experiments.compare"
    parser.add_argument(
        "--arms",
        nargs="+",
        default=None,
        help="run only these arms (by name; the baseline among them); the tables also hold the "
        "study's other arms kept in RUN_DIR/arms for these settings and code",
    )
    parser.add_argument(
        "--diversity",
        metavar="ARM",
        default=None,
        help="instead of the study: how varied one seed's answers stay while ARM trains",
    )
    parser.add_argument(
        "--seed-index", type=int, default=0, help="with --diversity: the seed (default 0)"
    )
    parser.add_argument(
        "--report",
        metavar="JSON",
        default=None,
        help="instead of running: redo a finished study's tables from its per-seed numbers "
        "(its compare.json, rewritten in place, the .md beside it, and the .png beside it "
        "where there is one and the JSON keeps every panel's curves)",
    )
    parser.add_argument(
        "--replace-arms",
        metavar="JSON",
        default=None,
        help="with --report: take the arms another run of the same study ran (its compare.json, "
        "e.g. a rerun with --arms after a fix to one sampler) in place of this study's; a "
        "baseline it reran must have the same per-seed numbers",
    )
    overwrite = next(a for a in parser._actions if a.dest == "overwrite")
    overwrite.help = (
        "write the tables over RUN_DIR/compare.json even where that drops or changes numbers of "
        "arms it holds that this run does not rerun (refused otherwise); RUN_DIR/arms is kept"
    )
    _cli.hide(parser, NEVER_USED)
    args = parser.parse_args(argv)
    if args.replace_arms is not None and args.report is None:
        raise SystemExit(
            "error: --replace-arms works with --report (the study whose arms it replaces)"
        )
    if args.report is not None:
        _cli.refuse_unused(
            parser,
            args,
            _flags_except(parser, REPORT_FLAGS),
            "--report redoes a finished study's tables from its compare.json alone, with the "
            "settings and arms stored there (other ones are a new run of the study), and "
            "writes beside that file",
        )
        report_only(args.report, argv, args.replace_arms)
        return
    if args.diversity is None:
        _cli.refuse_unused(parser, args, ["--seed-index"], "it picks the seed of --diversity ARM")
    else:
        _cli.refuse_unused(
            parser,
            args,
            ["--arms", "--run-dir", "--overwrite", *_cli.DEVICE_FLAGS],
            "--diversity runs one seed of one arm on one device and prints its table, "
            "writing nothing",
        )
    _cli.refuse_unused(
        parser,
        args,
        NEVER_USED,
        "a study's budget is its TOML's generations, finished arms in RUN_DIR/arms are reused "
        "by the same settings and code (delete that folder to rerun them), and it writes "
        "compare.md, compare.json and compare.png",
    )
    config = _cli.load_config(CompareConfig, args)
    if args.seed is not None:
        config = dataclasses.replace(
            config, experiment=dataclasses.replace(config.experiment, seed=args.seed)
        )
    check_main_job_only(config)
    study = config
    if args.arms:
        names = [a["name"] for a in config.arms]
        unknown = sorted(set(args.arms) - set(names))
        if unknown:
            raise SystemExit(f"error: unknown arms {unknown}; choose from {names}")
        if config.baseline not in args.arms:
            raise SystemExit(
                f"error: --arms leaves out the baseline {config.baseline!r}, which every ratio is "
                "taken against; add it (a finished run of it is reused)"
            )
        config = select_arms(config, args.arms)
    if args.diversity is not None:
        arm = next((a for a in config.arms if a["name"] == args.diversity), None)
        if arm is None:
            raise SystemExit(
                f"error: no arm {args.diversity!r}; choose from {[a['name'] for a in config.arms]}"
            )
        print(diversity(config, arm, args.seed_index))
        return
    if args.num_processes > 1:  # each process would write the study's files; seeds not gathered
        raise SystemExit(
            "error: a study runs in one process; its seeds shard over that host's devices "
            f"(--devices), not over {args.num_processes} processes (--num-processes)"
        )
    mesh = _cli.setup_devices(args)
    if mesh is not None and config.seeds % args.devices:
        raise SystemExit(f"error: --devices {args.devices} must divide the {config.seeds} seeds")
    check_arms(config)  # every arm it runs, before any runs
    os.makedirs(args.run_dir, exist_ok=True)
    with _study_lock(args.run_dir):
        _run_study(study, config, args, argv, mesh)


@contextlib.contextmanager
def _study_lock(run_dir: str):
    """Holds ``run_dir``'s lock (:class:`RunLock`) for the block, or ends the process saying
    which run holds it."""
    lock = RunLock(run_dir)
    try:
        lock.acquire()
    except RunDirError as e:
        raise SystemExit(f"error: {e}") from None
    try:
        yield
    finally:
        lock.release()


def _flags_except(parser, dests) -> list[str]:
    """The long names of the parser's flags but those whose destinations are ``dests``."""
    return [
        next(o for o in a.option_strings if o.startswith("--"))
        for a in parser._actions
        if a.option_strings and a.dest not in dests
    ]


def _run_study(study: CompareConfig, config: CompareConfig, args, argv, mesh) -> None:
    """Runs the arms of ``config`` (the study's, or those ``--arms`` selects) not kept in
    ``RUN_DIR/arms`` yet, then writes the tables, numbers and figure over every arm of
    ``study`` with a result kept there for these settings and code (under the study
    directory's lock): a subset run leaves the other arms' numbers in place. It says which
    arms have none, and refuses, before running anything, to drop or change an arm's numbers
    that ``RUN_DIR/compare.json`` holds and the run does not rerun (one it leaves out, or one
    it reuses from ``RUN_DIR/arms`` whose row the table took from another run), unless
    ``--overwrite``."""
    for arm in study.arms:  # the code digests now: of the code imported, before edits
        with contextlib.suppress(ValueError, TypeError):  # an arm not run: see _kept_result
            arm_fingerprint(study, arm)
    chosen = {a["name"] for a in config.arms}
    kept, missing = {}, []  # the study's other arms: their kept results, or none
    for arm in study.arms:
        if arm["name"] not in chosen:
            c = _kept_result(args.run_dir, study, arm)
            if c is None:
                missing.append(arm["name"])
            else:
                kept[arm["name"]] = c
    reused = {}  # the arms it runs that RUN_DIR/arms keeps: reused, not run again
    for arm in config.arms:
        c = load_arm(args.run_dir, config, arm)
        if c is not None:
            reused[arm["name"]] = c
    if not args.overwrite:
        _refuse_to_lose(
            args.run_dir, study, chosen, {**kept, **reused}, bool(kept or missing), set(reused)
        )
    curves = {}
    for arm in config.arms:
        name = arm["name"]
        if name in reused:
            print(f"== {name}: reusing the finished run in {args.run_dir}", file=sys.stderr)
            curves[name] = reused[name]
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
    if kept:
        print(
            f"== also in the tables, as kept in {args.run_dir}/arms: {list(kept)}",
            file=sys.stderr,
        )
    if missing:
        print(
            f"note: arms {missing} of the study have no result kept in {args.run_dir}/arms for "
            "these settings and code; the tables leave them out (run them with --arms, or run "
            "the whole study)",
            file=sys.stderr,
        )
    curves = {
        a["name"]: {**kept, **curves}[a["name"]] for a in study.arms if a["name"] not in missing
    }
    shown = select_arms(study, list(curves))
    table, data = summarize(shown, curves)
    print(table)
    command = command_line(argv)
    write_text_atomic(os.path.join(args.run_dir, "compare.md"), f"Made by `{command}`.\n\n{table}")
    write_json_atomic(
        os.path.join(args.run_dir, "compare.json"),
        study_json(shown, data, command),
        indent=2,
        default=json_default,
    )
    plot(shown, curves, os.path.join(args.run_dir, "compare.png"))


def _kept_result(run_dir: str, study: CompareConfig, arm) -> dict | None:
    """The curves kept in ``RUN_DIR/arms`` for an arm a subset run leaves out, or None (none
    kept for these settings and code, or the arm cannot even be fingerprinted: it is not
    checked)."""
    try:
        return load_arm(run_dir, study, arm, again=False)
    except (ValueError, TypeError):
        return None


# The per-seed numbers that say two results of an arm are the same run.
_SAME_RUN = ("rollouts_to_target", "final_held_out")
TAKEN_FROM = "taken_from"
"""The key ``--report --replace-arms`` adds to each arm's row it takes from another run: that
run's command."""


def _same(a, b) -> bool:
    """Per-seed numbers equal, a NaN (a seed with no held-out score) equal to a NaN, a miss
    (None) to a miss."""
    try:
        return np.array_equal(np.asarray(a, float), np.asarray(b, float), equal_nan=True)
    except (TypeError, ValueError):  # not numbers: as they are
        return a == b


def _refuse_to_lose(
    run_dir: str, study: CompareConfig, chosen: set, kept: dict, subset: bool, reused: set
):
    """Ends the process if ``RUN_DIR/compare.json`` holds an arm that a run of the arms
    ``chosen`` (``reused`` of them taken from ``RUN_DIR/arms``), taking the study's other arms'
    results from ``kept``, would change or drop (a whole-study run drops only arms the
    study's config does not have: removed or renamed, or another study's tables): nothing a
    user ran is lost without ``--overwrite``. An arm left out is checked
    against its kept result; a reused arm only where the table took its row from another run
    (``--report --replace-arms`` marks it :data:`TAKEN_FROM`): a row this directory's own
    earlier run wrote is one the finished run would write over too (a study resumed after a
    crash, say, under new settings)."""
    path = os.path.join(run_dir, "compare.json")
    if not os.path.exists(path):
        return
    try:
        with open(path) as f:
            table = json.load(f)
        stored = table["arms"]
        if not isinstance(stored, dict) or not all(isinstance(d, dict) for d in stored.values()):
            raise ValueError("its 'arms' is not a table of per-arm numbers")
        # the kept results read at the table's target: a run at another target (not part of
        # an arm's key) reads the same curves anew, and loses nothing
        target = table.get("config", {}).get("experiment", {}).get("target")
        if target is not None:
            experiment = dataclasses.replace(study.experiment, target=float(target))
            study = dataclasses.replace(study, experiment=experiment)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        if not subset:  # every arm of the study runs or is reused: its tables replace these
            return
        raise SystemExit(
            f"error: {path} cannot be read ({type(e).__name__}: {e}), and this run of some arms "
            "(--arms) writes its tables over it: move it away, give another --run-dir, or pass "
            "--overwrite"
        ) from None
    ran = chosen - {n for n in reused if TAKEN_FROM in stored.get(n, {})}
    others = [n for n in stored if n not in ran]
    now = seed_data(study, {n: kept[n] for n in others if n in kept})
    changed = {
        n: [k for k in _SAME_RUN if not _same(now[n][k], stored[n].get(k))]
        for n in others
        if n in now
    }
    changed = {n: keys for n, keys in changed.items() if keys}
    if changed:
        differ = "; ".join(
            f"{n!r}: {k} {stored[n].get(k)} in the table, {now[n][k]} kept"
            for n, keys in changed.items()
            for k in keys
        )
        raise SystemExit(
            f"error: {path} holds arms {list(changed)} that this run would change: it reuses "
            f"what {run_dir}/arms keeps of them for these settings and code, and the table holds "
            f"another run's numbers ({differ}; taken in by --report --replace-arms, say, or run "
            "by other code). Give this run another --run-dir (--report --replace-arms can then "
            "take its arms into this study's table), or pass --overwrite to write the kept "
            "results over the table's"
        )
    lost = [n for n in others if n not in now]
    gone = [n for n in lost if n not in {a["name"] for a in study.arms}]
    if gone and not subset:  # an arm removed or renamed since, or another study's tables
        raise SystemExit(
            f"error: {path} holds arms {gone} that the study's config does not have (an arm "
            "removed or renamed since, or another study's tables), and this run would drop "
            "them from it: give it another --run-dir, or pass --overwrite (its tables then hold "
            "the config's arms; RUN_DIR/arms keeps every arm's curves)"
        )
    if gone:
        raise SystemExit(
            f"error: {path} holds arms {gone} that the study's config no longer has, and this "
            "run of some arms (--arms) would drop them from it: give the subset another "
            "--run-dir, run the whole study, or pass --overwrite (its tables then hold the "
            "config's arms)"
        )
    if not subset:  # every arm of the study runs or is reused: the tables hold them all
        return
    if lost:
        raise SystemExit(
            f"error: {path} holds arms {lost} that this run of some arms (--arms) would drop "
            f"from it: {run_dir}/arms keeps no result of them for these settings and code. "
            "Name them in --arms too, or run the whole study, to run them again (the tables then "
            "hold their new run in place of the table's numbers), give the subset another "
            "--run-dir (--report --replace-arms can then take its arms into this study's "
            "table), or pass --overwrite to drop them"
        )


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
    data = {**data, **{n: {**other_data[n], TAKEN_FROM: other_command} for n in names}}
    shown = ", ".join(repr(n) for n in names)
    return data, f"{command}`, arms {shown} from `{other_command}"


def command_line(argv=None) -> str:
    """The command as a shell would take it back: arm names with spaces and parentheses
    quoted, so the line a study records can be pasted to rerun it."""
    return "python -m experiments.compare " + shlex.join(sys.argv[1:] if argv is None else argv)


def report_only(path: str, argv=None, replace: str | None = None) -> None:
    """Redoes a finished study's tables from the per-seed numbers its ``compare.json`` keeps
    (no arm runs): rewrites that file (same per-seed numbers, statistics redone) and the
    ``.md`` beside it, and redraws the ``.png`` beside it, where there is one, from the curves
    it keeps (a study stored before ``curve_sometimes`` was kept that probed pass rates has
    no curve for the figure's third panel: its figure is left as it is, with a note).

    ``replace``: another run's ``compare.json`` of the same study (the same settings and arm
    tables; it may have run a subset of the arms, ``--arms``): its arms other than the
    baseline replace this study's, and the command it was made by is added to this one's.
    If it reran the baseline, the baseline's per-seed numbers must equal this study's (else
    the two runs do not reproduce each other and their arms cannot share a table)."""
    for p in (path, replace):
        if p is not None and (not p.endswith(".json") or not os.path.isfile(p)):
            raise SystemExit(f"--report and --replace-arms take a study's compare.json, got {p!r}")
    folder = os.path.dirname(os.path.abspath(path))
    # A folder a study ran in holds its lock file: while a study runs there, the rewrite is
    # refused, as a second study would be. A stored copy (docs/compare) is given no lock file.
    locked = os.path.exists(os.path.join(folder, LOCK))
    with _study_lock(folder) if locked else contextlib.nullcontext():
        _report(path, argv, replace)


def _report(path: str, argv, replace: str | None) -> None:
    config, data, command = load_study(path)
    with open(path) as f:
        stored = json.load(f)["config"]
    if replace is not None:
        data, command = _replace_arms(config, data, command, *load_study(replace))
    table = tables(config, data)
    print(table)
    this = command_line(argv)
    write_text_atomic(
        path[: -len(".json")] + ".md",
        f"Made by `{command}`; tables redone from its per-seed numbers by `{this}`.\n\n{table}",
    )
    study = study_json(config, data, command)
    # The config as the study stored it: today's defaults for the keys it lacks would record
    # settings it never ran with (a default may have changed since).
    study["config"] = stored
    write_json_atomic(path, study, indent=2, default=json_default)
    figure = path[: -len(".json")] + ".png"
    curves = stored_curves(data)
    if not os.path.exists(figure):
        return  # a copy kept without its figure: none is added
    if curves is not None:
        plot(config, curves, figure)
        return
    print(
        f"{figure} not redrawn: its pass-rate panel needs the runs' probes, which "
        f"{os.path.basename(path)} does not keep"
        + (" (it still shows the replaced arms' earlier runs)" if replace else ""),
        file=sys.stderr,
    )
