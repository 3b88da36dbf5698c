"""The experiment CLI convention (docs/engine.md says which scripts take it), and how a script
ends an error (:func:`entry`).

``--run-dir DIR --steps N --seed S --resume --config FILE.toml`` (plus ``--set key=value``
overrides of the TOML config, ``--overwrite``, ``--allow-partial``, ``--no-progress``,
``--tensorboard``, ``--wandb PROJECT``), writing
``DIR/metrics.jsonl``, ``DIR/traces.jsonl``, ``DIR/checkpoints/`` and ``DIR/summary.json``.

Configs are frozen dataclasses; a TOML file and ``--set`` overrides are parsed into them, and
unknown keys are errors that list the accepted ones.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import sys
import tomllib
import types
import typing
import warnings
from collections.abc import Mapping
from typing import Any, TypeVar

from curriculax._checks import int_at_least
from curriculax._files import write_json_atomic

T = TypeVar("T")


def core_parser(description: str, *, steps: int, run_dir: str) -> argparse.ArgumentParser:
    """The flags every experiment takes, ``--run-dir --steps --seed --resume``: all that a
    script driving another library's trainer takes (the engine's flags do not apply there).
    ``--steps`` and ``--seed`` default to None (``args.default_steps`` holds ``steps``); such a
    script reads them with :func:`trainer_steps_and_seed`, which checks them."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--run-dir", default=run_dir, help=f"output directory (default {run_dir})")
    p.add_argument("--steps", type=int, default=None, help=f"updates to train (default {steps})")
    p.add_argument(
        "--seed", type=int, default=None, help="seed (default 0; a resume keeps the run's seed)"
    )
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint")
    add_debug_flag(p)
    p.set_defaults(default_steps=steps)
    return p


def trainer_steps_and_seed(args: argparse.Namespace, *, resuming: bool) -> tuple[int, int]:
    """The ``--steps`` and the seed of a run of a script that takes :func:`core_parser`'s flags
    alone, checked before anything is built: ``--steps`` must be >= 1 (a trainer reads 0 or
    less as no limit) and ``--seed`` an int in ``[0, 2**32)`` (ValueErrors naming the flag).

    The seed is the run's: a fresh run (``resuming`` False) stores it (``--seed``, else 0) in
    ``RUN_DIR/seed.json``; a resumed run takes the stored one when ``--seed`` is not given and
    refuses another (the script rebuilds its tasks from the seed, and the restored curriculum
    scored the tasks of the stored one). A resumed run that stored none stores its own. A
    fresh run refuses a directory holding an earlier run's ``metrics.jsonl`` or
    ``summary.json`` (nothing a user ran is overwritten)."""
    steps = args.default_steps if args.steps is None else args.steps
    check_int(steps, "--steps", 1, "updates to train")
    if args.seed is not None:
        check_seed(args.seed, "--seed")
    path = os.path.join(args.run_dir, "seed.json")
    if resuming and os.path.exists(path):
        with open(path) as f:
            stored = check_seed(json.load(f).get("seed"), f"{path}: seed")
        if args.seed is not None and args.seed != stored:
            raise SystemExit(
                f"error: --seed {args.seed}, but the run in {args.run_dir} started with seed "
                f"{stored} (its tasks are built from it); resume with --seed {stored} or no "
                "--seed, or start another --run-dir"
            )
        return steps, stored
    if not resuming:
        earlier = [
            name
            for name in ("metrics.jsonl", "summary.json")
            if os.path.exists(os.path.join(args.run_dir, name))
        ]
        if earlier:
            raise SystemExit(
                f"error: {args.run_dir} holds an earlier run's {' and '.join(earlier)} and no "
                "checkpoint to resume from; choose another --run-dir, or move them away"
            )
    seed = 0 if args.seed is None else args.seed
    os.makedirs(args.run_dir, exist_ok=True)
    write_json_atomic(path, {"seed": seed})
    return steps, seed


DEBUG_ENV = "CURRICULAX_DEBUG"


def add_debug_flag(p: argparse.ArgumentParser) -> None:
    """``--debug``: :func:`entry` shows an error's traceback (as ``CURRICULAX_DEBUG=1`` does)."""
    p.add_argument(
        "--debug",
        action="store_true",
        help=f"show the traceback of an error (or set {DEBUG_ENV}=1)",
    )


def debug_requested(argv: list[str]) -> bool:
    """``--debug`` among the arguments, or ``CURRICULAX_DEBUG`` set to anything but 0."""
    return "--debug" in argv or os.environ.get(DEBUG_ENV, "0") not in ("", "0")


def error_text(e: BaseException) -> str:
    """``error: <message>`` and, on a second line, its cause: what a script prints for an
    error instead of a traceback. A message that does not say what kind of error it is (a
    TypeError's, say) is prefixed with the exception's type."""
    from curriculax.engine._rundir import os_error_text

    def text(x: BaseException) -> str:
        if isinstance(x, OSError):
            return os_error_text(x)
        message = str(x).strip() or type(x).__name__
        plain = (ValueError, RuntimeError, SystemExit)
        return message if isinstance(x, plain) else f"{type(x).__name__}: {message}"

    lines = [f"error: {text(e)}"]
    cause = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    if cause is not None:
        lines.append(f"  cause: {text(cause).splitlines()[0][:300]}")
    return "\n".join(lines)


def _no_orbax_errors(record: logging.LogRecord) -> bool:
    return not (record.levelno >= logging.ERROR and "orbax" in record.pathname)


def _warning_text(message, category, filename, lineno, line=None) -> str:
    """A warning as a command shows it: ``warning: <message>``, without the file, line and
    source line of the code that warned."""
    kind = "" if category is UserWarning else f" ({category.__name__})"
    return f"warning{kind}: {message}\n"


def entry(main, argv: list[str] | None = None) -> None:
    """Runs a script's ``main(argv)`` as a command: an error ends the process with
    :func:`error_text` on stderr and exit status 1, without a traceback unless ``--debug`` or
    ``CURRICULAX_DEBUG=1`` asks for one. Scripts call it as
    ``if __name__ == "__main__": _cli.entry(main)``."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if debug_requested(argv):
        main(argv)
        return
    warnings.formatwarning = _warning_text
    # Orbax logs a failed background save on several lines; the run's error names it.
    logging.getLogger("absl").addFilter(_no_orbax_errors)
    try:
        main(argv)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except Exception as e:  # every error ends in its message, not a traceback
        print(error_text(e), file=sys.stderr)
        print(f"(--debug or {DEBUG_ENV}=1 shows the traceback)", file=sys.stderr)
        raise SystemExit(1) from None


def base_parser(description: str, *, steps: int, run_dir: str) -> argparse.ArgumentParser:
    """The flags every experiment on the engine takes (:func:`core_parser`'s and more)."""
    p = core_parser(description, steps=steps, run_dir=run_dir)
    next(a for a in p._actions if a.dest == "seed").help = "seed (default: the config's)"
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="start fresh even if the run directory holds an earlier run (deletes it)",
    )
    p.add_argument(
        "--allow-partial",
        action="store_true",
        help="resume with changed envs, gates or config (the changes go in summary.json)",
    )
    p.add_argument("--config", default=None, help="a TOML config file")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one config value, e.g. --set batch_groups=32 (repeatable)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--tensorboard",
        action="store_true",
        help="also log metrics to RUN_DIR/tensorboard (pip install 'curriculax[tensorboard]')",
    )
    p.add_argument(
        "--wandb",
        default=None,
        metavar="PROJECT",
        help="also log metrics to this Weights & Biases project; WANDB_MODE=offline keeps them "
        "on this machine (pip install 'curriculax[wandb]')",
    )
    p.add_argument(
        "--devices", type=int, default=1, help="data-parallel mesh over N devices (default 1)"
    )
    p.add_argument("--coordinator", default=None, help="multi-host: coordinator host:port")
    p.add_argument("--num-processes", type=int, default=1, help="multi-host: process count")
    p.add_argument("--process-id", type=int, default=0, help="multi-host: this process's id")
    p.add_argument("--checkpoint-every", type=int, default=None, help="save every N updates")
    return p


# The device and multi-host flags, for a script that runs in one process on one device to
# refuse (:func:`refuse_unused`).
DEVICE_FLAGS = ("--devices", "--coordinator", "--num-processes", "--process-id")


def require(modules: tuple[str, ...], install: str) -> None:
    """Ends the process, before anything is written, when a trainer script's client library is
    missing: which modules, and how to install them (``install``)."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise SystemExit(f"error: this script needs {', '.join(missing)}: {install}")


def hide(parser: argparse.ArgumentParser, flags: list[str]) -> None:
    """Leaves ``flags`` out of ``--help``: the shared parsers add them, and this script refuses
    them (:func:`refuse_unused`)."""
    for action in parser._actions:
        if set(action.option_strings) & set(flags):
            action.help = argparse.SUPPRESS


def refuse_unused(
    parser: argparse.ArgumentParser, args: argparse.Namespace, flags: list[str], why: str
) -> None:
    """Ends the process naming each of ``flags`` that was given but that the script does not
    use (a flag silently ignored would leave the user believing it acted)."""
    given = [
        f
        for f in flags
        if getattr(args, f[2:].replace("-", "_")) != parser.get_default(f[2:].replace("-", "_"))
    ]
    if given:
        raise SystemExit(f"error: {', '.join(given)} not used by this script: {why}")


def setup_devices(args: argparse.Namespace):
    """Starts JAX's distributed runtime when asked and returns the engine mesh (or None).

    Call before any JAX computation. On CPU, ``--devices N`` makes N (fake) CPU devices, split
    over the processes, so the multi-device code path can run anywhere. With several
    processes the mesh takes ``--devices / --num-processes`` devices from each
    (:func:`curriculax.engine.make_mesh`), however many each process has. A flag out of
    place ends the process with ``error: <the flag and why>`` (as :func:`refuse_unused`).
    """
    import jax

    from curriculax.engine import make_mesh

    if args.devices < 1:
        raise SystemExit(f"error: --devices must be >= 1, got {args.devices}")
    if args.num_processes < 1:
        raise SystemExit(f"error: --num-processes must be >= 1, got {args.num_processes}")
    if args.num_processes > 1:
        if args.devices % args.num_processes:
            raise SystemExit("error: --devices must be a multiple of --num-processes")
        if not args.coordinator:
            raise SystemExit("error: --num-processes > 1 needs --coordinator host:port")
        if not 0 <= args.process_id < args.num_processes:
            raise SystemExit(
                f"error: --process-id must lie in [0, {args.num_processes}) for --num-processes "
                f"{args.num_processes}, got {args.process_id}"
            )
    else:
        for flag, given in (
            ("--coordinator", args.coordinator is not None),
            ("--process-id", args.process_id != 0),
        ):
            if given:
                raise SystemExit(
                    f"error: {flag} only means something with --num-processes > 1 (a multi-host "
                    f"run); got --num-processes {args.num_processes}"
                )
    if args.num_processes == 1:
        return local_mesh(args.devices)
    if args.devices > args.num_processes:
        jax.config.update("jax_num_cpu_devices", args.devices // args.num_processes)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        args.coordinator, num_processes=args.num_processes, process_id=args.process_id
    )
    return make_mesh(args.devices)


def local_mesh(devices: int):
    """The engine mesh over ``devices`` devices of this one process (None for one device).

    Call before any JAX computation: on CPU it makes ``devices`` (fake) CPU devices. For the
    scripts that take ``--devices`` but no multi-host flags; :func:`setup_devices` is the rest.
    """
    import jax

    from curriculax.engine import make_mesh

    check_int(devices, "--devices", 1, "data-parallel devices")
    if devices == 1:
        return None
    jax.config.update("jax_num_cpu_devices", devices)
    return make_mesh(devices)


def _field_types(cls) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _coerce(value: Any, typ: Any, where: str) -> Any:
    """``value`` as a field of type ``typ`` holds it, or a ValueError naming ``where``."""
    origin = typing.get_origin(typ)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(typ) if a is not type(None)]
        if value is None:
            return None
        return _coerce(value, args[0], where) if len(args) == 1 else value
    if dataclasses.is_dataclass(typ):
        if not isinstance(value, Mapping):
            raise ValueError(f"{where}: expected a table, got {value!r}")
        return from_mapping(typ, value, where)
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if typ is float:
        if not number:
            raise ValueError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if typ is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"{where}: expected an int, got {value!r}")
    if typ in (str, bool) and not isinstance(value, typ):
        raise ValueError(f"{where}: expected {typ.__name__}, got {value!r}")
    if typ is dict or origin is dict:
        if not isinstance(value, Mapping):
            raise ValueError(
                f"{where}: expected a table (in TOML, {{key = value, ...}}; with --set, set its "
                f"keys one by one, e.g. --set {where.rsplit('.', 1)[-1]}.KEY=VALUE), "
                f"got {value!r}"
            )
        return value
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ValueError(f"{where}: expected a list, got {value!r}")
        args = typing.get_args(typ)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
        if args and len(args) != len(value):
            raise ValueError(f"{where}: expected {len(args)} entries, got {value!r}")
        return tuple(_coerce(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(args, value)))
    return value


def from_mapping(cls: type[T], data: Mapping[str, Any], where: str = "config") -> T:
    """Builds the frozen dataclass ``cls`` from a mapping (nested dataclasses from tables)."""
    types_ = _field_types(cls)
    unknown = sorted(set(data) - set(types_))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; accepted keys are {sorted(types_)}")
    kwargs = {}
    for k, v in data.items():
        kwargs[k] = _coerce(v, types_[k], f"{where}.{k}")
        check_key(k, kwargs[k], f"{where}.{k}")
    return cls(**kwargs)


def _parse_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text  # a bare string


def override(config: T, assignments: list[str]) -> T:
    """Applies ``key.sub=value`` overrides (values in TOML syntax; bare words are strings).

    The assignments are gathered into one set of changes and applied at once, as the same
    values in a TOML file are (:func:`apply_mapping`): the configs check their values together
    (``task.num_levels=4`` with a ``task.level_mass`` of 4 shares is accepted in either
    order), once. A table given whole to a config (``grpo={learning_rate=0.01}``) changes the
    keys it names and keeps the others, as the same TOML table does.

    Inside a free-form table (a curriculum, say) a ``type`` starts its table afresh (the old
    type's arguments would not fit the new one), a ``preset`` its curriculum, and a table given
    whole replaces the one there. Such a reset is applied before every assignment inside the
    table it starts, wherever that stands on the command line (an outer table's before an
    inner one's), so an argument given before its table's new type is kept; otherwise a later
    assignment wins over an earlier one.
    """
    parsed = []
    for item in assignments:
        if "=" not in item:
            raise ValueError(f"--set takes KEY=VALUE, got {item!r}")
        key, _, text = item.partition("=")
        key = key.strip()
        parsed.extend(_split(config, key, key.split("."), _parse_value(text.strip())))
    if not parsed:
        return config
    # By the depth of what each replaces (stable: in the order given at one depth): a table's
    # reset before the assignments inside it, and the later of two at one depth wins.
    order = sorted(range(len(parsed)), key=lambda i: (_reset_depth(config, parsed[i][1]), i))
    changes: dict[str, Any] = {}
    for i in order:
        key, path, value = parsed[i]
        _assign(config, changes, path, value, key)
    return apply_mapping(config, changes, where="--set")


def _split(config: Any, key: str, path: list[str], value: Any) -> list[tuple]:
    """``(key, path, value)`` assignments: a table given whole to a nested config becomes one
    assignment per key it names (recursively), so a free-form table inside it (a curriculum,
    ``task.labels``) is a reset of its own, ordered as if it had been named directly
    (``experiment={curriculum={...}}`` is ``experiment.curriculum={...}``)."""
    field = config
    for head in path:
        if not dataclasses.is_dataclass(field) or not hasattr(field, head):
            return [(key, path, value)]  # a free-form table, or a key _assign refuses by name
        field = getattr(field, head)
    if not (dataclasses.is_dataclass(field) and isinstance(value, Mapping)):
        return [(key, path, value)]
    return [a for k, v in value.items() for a in _split(config, f"{key}.{k}", [*path, k], v)]


# The keys whose ``--set`` in a free-form table starts that table afresh.
_RESETS = ("type", "preset")


def _reset_depth(config: Any, path: list[str]) -> int:
    """How deep the table lies that an assignment replaces: a ``type`` or ``preset`` in a
    free-form table starts the table holding it afresh (``len(path) - 1``); any other value
    replaces what ``path`` holds (``len(path)``). Applied shallowest first (in the order given
    at one depth), a replacement comes before every assignment inside what it replaces, and of
    two assignments to one table the later wins. (A table given whole to a nested config was
    split into its keys by :func:`_split`.)"""
    parent = config
    for head in path[:-1]:
        if not dataclasses.is_dataclass(parent) or not hasattr(parent, head):
            parent = None  # inside a free-form table (or a key the assignment refuses)
            break
        parent = getattr(parent, head)
    if path[-1] in _RESETS and not dataclasses.is_dataclass(parent):
        return len(path) - 1
    return len(path)


def _assign(obj: Any, changes: dict, path: list[str], value: Any, full: str) -> None:
    """Records ``path = value`` in ``changes``, the changes to the config ``obj`` as
    :func:`apply_mapping` takes them: a nested config's as a table of its own changes, any
    other field's as its new value (a free-form table's with the assignment merged in, see
    :func:`_set`). The value is checked here, naming ``full`` (the key as given)."""
    head = path[0]
    types_ = _field_types(type(obj))
    if head not in types_:
        raise ValueError(f"--set {full}: unknown key {head!r}; accepted keys are {sorted(types_)}")
    current = getattr(obj, head)
    if dataclasses.is_dataclass(current) and len(path) > 1:
        inner = changes.get(head)
        if not isinstance(inner, dict):
            inner = changes[head] = {}
        _assign(current, inner, path[1:], value, full)
        return
    if len(path) == 1:  # (a nested config given anything but a table: "expected a table")
        value = _coerce(value, types_[head], full)
        check_key(head, value, full)  # before the dataclass's own checks, which name no path
        changes[head] = value
        return
    changes[head] = _set(changes.get(head, current), path[1:], value, full)


def _set(obj: Any, path: list[str], value: Any, full: str) -> Any:
    """``obj``, a free-form table, with ``path = value`` merged in."""
    head = path[0]
    if not isinstance(obj, Mapping):
        raise ValueError(f"--set {full}: {head!r} is set inside {obj!r}, which has no keys")
    # Any key may be set; whoever reads the table (cx.curriculum_from_config) says what is
    # wrong with it. A new `type` starts its table afresh, as a `preset` does its curriculum.
    if len(path) == 1:
        return {head: value} if head in _RESETS else {**obj, head: value}
    inner = obj.get(head, {})
    if not isinstance(inner, Mapping):
        raise ValueError(f"--set {full}: {head!r} holds {inner!r}, which is not a table")
    return {**obj, head: _set(inner, path[1:], value, full)}


def read_toml(path: str) -> dict:
    """The table of the ``--config`` file ``path``; a ValueError naming it if it cannot be
    read or is not TOML."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise ValueError(f"--config {path}: cannot read it ({e.strerror})") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"--config {path}: not valid TOML ({e})") from None


def load_config(cls: type[T], args: argparse.Namespace, defaults: T | None = None) -> T:
    """The config: defaults (``defaults``, or ``cls()``), then ``--config`` TOML, then
    ``--set``, then ``--seed``/``--steps``. ``--resume`` with ``--overwrite`` is refused
    first: one continues the run directory's run, the other deletes it."""
    if getattr(args, "resume", False) and getattr(args, "overwrite", False):
        raise ValueError(
            "--resume and --overwrite ask for opposite things (--resume continues the run in "
            "the run directory, --overwrite deletes it and starts over); pass one of them. "
            "`make run` passes --resume: start over with `make run RUN_ARGS=--overwrite`"
        )
    config = cls() if defaults is None else defaults
    if args.config:
        config = apply_mapping(config, read_toml(args.config), where=args.config)
    config = override(config, args.set)
    fields = _field_types(cls)
    if args.seed is not None:
        check_seed(args.seed, "--seed")
        if "seed" in fields:
            config = dataclasses.replace(config, seed=args.seed)
    if args.steps is not None and "steps" in fields:
        check_int(args.steps, "--steps", 0, _HINTS["steps"])
        config = dataclasses.replace(config, steps=args.steps)
    every = getattr(args, "checkpoint_every", None)
    if every is not None:
        check_int(every, "--checkpoint-every", 0, _HINTS["checkpoint_every"])
    check_values(config)
    return config


SEED_LIMIT = 2**32
_HINTS = {
    "steps": "updates to train",
    "checkpoint_every": "updates between checkpoints; 0 saves only at the end and on a signal",
}


def check_seed(seed: Any, key: str = "seed") -> int:
    """A seed JAX keys can hold: an int in ``[0, 2**32)`` (larger ones keep only 32 bits)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < SEED_LIMIT:
        raise ValueError(
            f"{key} must be an int in [0, 2**32) (a JAX key holds 32 bits of seed; a larger "
            f"one would repeat a smaller one's run), got {seed!r}"
        )
    return seed


def check_int(value: Any, key: str, minimum: int, hint: str) -> None:
    """A ValueError unless ``value`` is an int ``>= minimum``: ``<key> must be >= <minimum>,
    got <value> (<hint>)``. A script checks its own count flags with it (``--seeds``, say)
    before it builds anything; :func:`entry` prints the error as one ``error: ...`` line."""
    try:
        int_at_least(value, key, minimum)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{e} ({hint})") from None


# Ranges of the experiments' config keys, by name wherever they sit: (low, high, low open,
# high open, what the key is); None is unbounded. Checked before anything is built.
_POSITIVE_INT = (1, None, False, False)
_COUNT = (0, None, False, False)
_SHARE = (0.0, 1.0, False, False)
LIMITS: dict[str, tuple] = {
    "batch_groups": (*_POSITIVE_INT, "groups per update"),
    "groups_per_generation": (*_POSITIVE_INT, "groups per generation batch"),
    "group_size": (*_POSITIVE_INT, "rollouts per task"),
    "tasks_per_env": (*_POSITIVE_INT, "tasks in each env's pool"),
    "stall_windows": (*_POSITIVE_INT, "batches without an admitted group before the run stops"),
    "eval_rollouts": (*_POSITIVE_INT, "rollouts between held-out evaluations"),
    "num_levels": (*_POSITIVE_INT, "task levels"),
    "num_symbols": (*_POSITIVE_INT, "symbols of the task family"),
    "train_per_level": (*_POSITIVE_INT, "pool entries per level"),
    "held_out_per_level": (*_POSITIVE_INT, "held-out tasks per level"),
    "pool_size": (*_COUNT, "pool entries; 0 = train_per_level per level"),
    "width": (*_POSITIVE_INT, "model width"),
    "depth": (*_POSITIVE_INT, "transformer blocks"),
    "heads": (*_POSITIVE_INT, "attention heads"),
    "seeds": (*_POSITIVE_INT, "seeds per arm"),
    "generations": (*_POSITIVE_INT, "generation batches per run"),
    "rounds": (*_POSITIVE_INT, "self-play rounds"),
    "steps_per_round": (*_POSITIVE_INT, "updates per round"),
    "generated_per_round": (*_POSITIVE_INT, "tasks the challenger proposes per round"),
    "max_attempts": (*_POSITIVE_INT, "attempts per frontier task"),
    "start_level": (*_COUNT, "the challenger's first level"),
    "pass_rate_samples": (*_COUNT, "rollouts per task of the pass-rate probe; 0 = off"),
    "pass_rate_per_category": (*_COUNT, "tasks probed per category"),
    "step0_samples": (*_COUNT, "rollouts per task of the step-0 pass-rate histogram; 0 = off"),
    "pending_capacity": (*_POSITIVE_INT, "rows of the pending batch"),
    "vocab_size": (*_POSITIVE_INT, "token ids"),
    "max_len": (*_POSITIVE_INT, "longest sequence the position table covers"),
    "mlp_ratio": (*_POSITIVE_INT, "MLP width as a multiple of the model width"),
    "examples": (*_POSITIVE_INT, "pool entries the base trains on"),
    "batch_size": (*_POSITIVE_INT, "examples per pretraining step"),
    "learning_rate": (0.0, None, True, False, "the optimizer's step size"),
    "temperature": (0.0, None, True, False, "the sampling temperature"),
    "max_grad_norm": (0.0, None, True, False, "the global gradient norm clipped to"),
    "entropy_coef": (0.0, None, False, False, "weight of the entropy bonus; 0 = off"),
    "kl_coef": (0.0, None, False, False, "weight of the KL penalty; 0 = off"),
    "weight_decay": (0.0, None, False, False, "AdamW's decoupled weight decay"),
    "clip_eps": (0.0, None, True, False, "the PPO ratio clip"),
    "std_eps": (0.0, None, True, False, "added to a group's standard deviation"),
    "b1": (0.0, 1.0, False, True, "AdamW's first-moment decay"),
    "b2": (0.0, 1.0, False, True, "AdamW's second-moment decay"),
    "target": (*_SHARE, "held-out exact match to reach"),
    "held_out_frac": (0.0, 1.0, True, True, "share of the task space held out"),
    "distractors": (0.0, 1.0, False, True, "share of the pool that is coin-flip tasks"),
    "distractor_p": (*_SHARE, "P(reward 1) of a coin-flip task"),
    "frontier_share": (*_SHARE, "share of each batch drawn from the frontier"),
    "pools_weight": (0.0, None, False, False, "mixing weight of the pools env"),
    "steady_weight": (0.0, None, False, False, "mixing weight of the steady env"),
}


def _check_range(value: Any, key: str, limit: tuple) -> None:
    low, high, low_open, high_open, hint = limit
    below = low is not None and (value <= low if low_open else value < low)
    above = high is not None and (value >= high if high_open else value > high)
    if below or above:
        lo = "" if low is None else ("(" if low_open else "[") + f"{low}"
        hi = "" if high is None else f"{high}" + (")" if high_open else "]")
        bounds = (
            f"in {lo}, {hi}"
            if low is not None and high is not None
            else (f"> {low}" if low_open else f">= {low}")
        )
        raise ValueError(f"{key} must be {bounds}, got {value!r} ({hint})")


def check_key(name: str, value: Any, key: str) -> None:
    """One value, by the name of its key wherever it sits (``key`` is its full path, for the
    message): numbers finite, ``seed`` in ``[0, 2**32)``, ``steps >= 0``,
    ``checkpoint_every >= 0``, every other ``*_every >= 1``, the keys of :data:`LIMITS` in
    their ranges. Run on every value set (``--config``, ``--set``) before the dataclass that
    holds it checks it (the library's configs name no path), and again on the whole config."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{key} must be a finite number, got {value!r}")
    if name == "seed":
        check_seed(value, key)
    elif name in _HINTS:
        check_int(value, key, 0, _HINTS[name])
    elif name.endswith("_every"):
        check_int(value, key, 1, "updates between two of them")
    elif name in LIMITS and value is not None:
        _check_range(value, key, LIMITS[name])


def check_values(config: Any, where: str = "") -> None:
    """Every key of the config holds a value a run can use, before anything is built: each
    value has its field's type and passes :func:`check_key`, nested configs (``model.*``,
    ``grpo.*``, ``task.*``, a study's ``experiment.*``) included, and an ``init`` that names a
    base (``{base = ...}``) names one whose keys pass too; a ValueError names the key
    otherwise."""
    types_ = _field_types(type(config))
    for f in dataclasses.fields(config):
        value, key = getattr(config, f.name), where + f.name
        if dataclasses.is_dataclass(value):
            check_values(value, key + ".")
            continue
        _coerce(value, types_[f.name], key)
        check_key(f.name, value, key)
        if f.name == "init" and isinstance(value, Mapping):
            from experiments._base import base_config  # reads a named base's TOML

            check_values(base_config(value, key), key + ".base.")


def available_memory() -> int:
    """Bytes of memory a run can still take: the host's available memory, and on an
    accelerator the least free on its devices."""
    import jax

    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    host = int(line.split()[1]) * 1024
    except OSError:
        pass
    limits = [host]
    for d in jax.local_devices():
        stats = d.memory_stats() if d.platform != "cpu" else None
        if stats and "bytes_limit" in stats:
            limits.append(stats["bytes_limit"] - stats.get("bytes_in_use", 0))
    return min(limits)


def engine_bytes(engine) -> int:
    """Bytes an engine holds: its task pools and keys, and its state (shapes only, nothing is
    allocated)."""
    import jax
    import numpy as np

    state = jax.eval_shape(engine.init)
    pools = [e.tasks for e in engine.envs] + [e.keys for e in engine.envs]
    leaves = jax.tree.leaves(state) + jax.tree.leaves(pools)
    return int(sum(np.prod(x.shape, dtype=np.int64) * np.dtype(x.dtype).itemsize for x in leaves))


def check_memory(key: str, size: int, build, *, peak: float = 1.0, above: int = 1 << 20) -> None:
    """Refuses a pool too large for memory before anything of its size is allocated.

    ``build(n)`` returns the experiment's engine with pools of ``n`` tasks; two small builds
    give the bytes per task the pools and state keep (:func:`engine_bytes`), ``peak`` is how
    many times that building them takes at its height (the caller measures it), and the
    estimate for ``size`` tasks is compared with :func:`available_memory`. Pools below
    ``above`` tasks are not checked.
    """
    if size < above:
        return
    small = (256, 512)
    used = [engine_bytes(build(n)) for n in small]
    per_task = (used[1] - used[0]) / (small[1] - small[0])
    kept = used[0] + per_task * (size - small[0])
    available = available_memory()
    if kept * peak > available:
        gib = 2**30
        building = f"; building them takes about {peak:g}x that" if peak != 1 else ""
        raise ValueError(
            f"{key}={size:,} needs about {kept * peak / gib:.1f} GiB of memory (the task pools "
            f"and the engine state keep {kept / gib:.1f} GiB, {per_task:.0f} bytes per task "
            f"measured on pools of {small[0]} and {small[1]}{building}), more than the "
            f"{available / gib:.1f} GiB available; use a smaller {key}"
        )


# Config keys that size the engine's state (the pending batch and its buffers).
STATE_KEYS = ("batch_groups", "groups_per_generation", "group_size")


def check_engine_memory(engine, config) -> None:
    """Refuses an engine whose state cannot fit in memory before it is allocated: the bytes of
    its pools and state (:func:`engine_bytes`, shapes only) against :func:`available_memory`,
    naming the keys that size the state, with their values."""
    need, available = engine_bytes(engine), available_memory()
    if need <= available:
        return
    gib = 2**30
    keys = ", ".join(f"{k}={getattr(config, k):,}" for k in STATE_KEYS if hasattr(config, k))
    raise ValueError(
        f"this run needs about {need / gib:.1f} GiB of memory for its engine state and task "
        f"pools ({keys} size the state), more than the {available / gib:.1f} GiB available; "
        "use a smaller batch_groups, groups_per_generation or group_size"
    )


def apply_mapping(config: T, data: Mapping[str, Any], where: str = "config") -> T:
    """Replaces the fields of ``config`` named in ``data``; nested dataclass fields are updated
    key by key, any other field (a free-form table, say) is replaced whole."""
    types_ = _field_types(type(config))
    unknown = sorted(set(data) - set(types_))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; accepted keys are {sorted(types_)}")
    changes = {}
    for k, v in data.items():
        current = getattr(config, k)
        if dataclasses.is_dataclass(current) and isinstance(v, Mapping):
            changes[k] = apply_mapping(current, v, f"{where}.{k}")
        else:
            changes[k] = _coerce(v, types_[k], f"{where}.{k}")
            check_key(k, changes[k], f"{where}.{k}")
    return dataclasses.replace(config, **changes)


def report(*lines: str) -> None:
    """Prints on process 0 only: a multi-host run's report, once."""
    import jax

    if jax.process_index() == 0:
        print(*lines, sep="\n")


# Config keys a resume may change (recorded in summary.json's config_changes): they change no
# state, only when the run stops (``until``) and which study the report quotes.
RESUMABLE = ("target", "stop_at_target", "evidence", "evidence_arm", "evidence_best_of")


def run_experiment(
    engine,
    args: argparse.Namespace,
    config,
    *,
    on_update=None,
    until=None,
    missing=None,
    on_finish=None,
):
    """``curriculax.engine.run`` with the convention's flags: run dir, resume, partial
    restore, checkpoint interval (``--checkpoint-every`` or the config's), progress bar; the
    config (a dataclass with ``steps`` and ``checkpoint_every``) is saved with the run.

    What the run directory or its checkpoints refuse (a failed save, say) ends the process
    with ``error: <the message>`` on stderr and exit status 1, without a traceback. A resume of
    a finished run says so and changes nothing (:func:`already_complete` is then true), unless
    ``missing()`` (what the script writes after training and cannot find, e.g.
    ``["curves.png"]``) lists something: a run killed after training but before those were
    written is not complete, so the resume says what it writes and the result is returned as
    a finished run's (``stopped`` as the run ended), for the script to write them.
    ``on_update`` and ``until`` are passed through. ``on_finish(result)`` is what the script
    writes after training (a final evaluation, its plot): it is called with the result
    returned here, while the run directory is still held (``engine.run``'s ``on_finish``), so
    a run started in the same directory meanwhile cannot interleave with it; not called for a
    run already complete with nothing missing.
    """
    from curriculax.engine import (
        CheckpointMismatch,
        CheckpointSaveError,
        CheckpointUnreadable,
        RunDirError,
        run,
    )

    finished = []

    def finish(result):
        if already_complete(result) and missing is not None and (lacking := missing()):
            report(
                f"{args.run_dir}: training is complete (update {result.summary['steps']}), but "
                f"the run was stopped before it wrote {', '.join(lacking)}; writing them now."
            )
            result = dataclasses.replace(result, stopped=result.summary.get("stopped", "completed"))
        finished.append(result)
        if on_finish is not None and not already_complete(result):
            on_finish(result)

    try:
        returned = run(
            engine,
            steps=config.steps,
            run_dir=args.run_dir,
            resume=args.resume,
            overwrite=args.overwrite,
            allow_partial=args.allow_partial,
            checkpoint_every=(
                config.checkpoint_every if args.checkpoint_every is None else args.checkpoint_every
            ),
            progress=not args.no_progress,
            tensorboard=args.tensorboard,
            sinks=metric_sinks(args),
            on_update=on_update,
            until=until,
            on_finish=finish,
            config=(saved := dataclasses.asdict(config)),
            resumable=[k for k in RESUMABLE if k in saved],
        )
    except (CheckpointMismatch, CheckpointSaveError, CheckpointUnreadable, RunDirError) as e:
        raise SystemExit(f"error: {e}") from None
    # What finish saw (a resume that writes what is missing returns a finished run's result);
    # a run that never called it (a stand-in for run, say) is taken as returned.
    result = finished[0] if finished else returned
    if already_complete(result):
        at_target = result.summary.get("stopped") == "until"
        why = (
            "it stopped where it was asked to (at its target)"
            if at_target
            else f"--steps {config.steps}"
        )
        further = "a larger --steps"
        if at_target and hasattr(config, "stop_at_target"):
            further = "--set stop_at_target=false (or a higher target) and a larger --steps"
        report(
            f"{args.run_dir}: the run is already complete (update {result.summary['steps']}, "
            f"{why}); nothing was changed. To train further, resume with {further}, or start "
            "over with --overwrite."
        )
    return result


def refuse_earlier_output(
    path: str, overwrite: bool, what: str = "an earlier run's results"
) -> None:
    """Refuses, before a script's work starts, to replace a results file an earlier run left
    (``path``) unless ``overwrite``: a script that writes one file (no run directory lock, no
    resume) would otherwise replace it after minutes of work."""
    if os.path.exists(path) and not overwrite:
        raise SystemExit(
            f"error: {path} holds {what}; pass another --run-dir, or --overwrite to replace them"
        )


def already_complete(result) -> bool:
    """A resume found the run already done: the script has nothing to report or write."""
    return result.stopped == "already_complete"


def finish_trainer_run(
    run_dir: str,
    *,
    steps: int,
    resumed_from: int,
    draws: int,
    seconds: float,
    curriculum: dict[str, float],
) -> dict:
    """Writes ``run_dir/summary.json`` for a script that drives another library's trainer
    with a curriculum, prints a one-line report and returns the summary."""
    summary = {
        "steps": steps,
        "resumed_from": resumed_from,
        "draws": draws,
        "wall_seconds": round(seconds, 1),
        "curriculum": curriculum,
    }
    write_json_atomic(os.path.join(run_dir, "summary.json"), summary, indent=2)
    m, pool = curriculum, "sampler/pool/"
    bands = {k[len(pool) :]: v for k, v in m.items() if k.startswith(pool)}
    pools = (
        "; pools " + "/".join(bands) + " " + "/".join(f"{v:.0f}" for v in bands.values())
        if bands
        else ""
    )
    print(
        f"steps {resumed_from} -> {steps} in {seconds:.1f}s; curriculum: {m['groups']:.0f} groups "
        f"observed, {m['admitted']:.0f} admitted{pools} -> {run_dir}"
    )
    return summary


def metric_sinks(args: argparse.Namespace) -> list:
    """The metric sinks the flags ask for (``--wandb PROJECT``; ``--tensorboard`` is run's
    own flag)."""
    from curriculax.engine import WandbSink

    return [WandbSink(args.wandb)] if args.wandb else []


def exit_for(stopped: str) -> None:
    """Exits with the conventional status of the signal that stopped the run, if any."""
    codes = {"SIGTERM": 128 + 15, "SIGINT": 128 + 2}
    if stopped in codes:
        print(f"stopped by {stopped}; checkpoint saved, resume with --resume", file=sys.stderr)
        sys.exit(codes[stopped])
