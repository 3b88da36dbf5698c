"""The experiment CLI convention shared by every script under ``experiments/``.

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
import os
import sys
import tomllib
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from curriculax._checks import int_at_least

T = TypeVar("T")


def core_parser(description: str, *, steps: int, run_dir: str) -> argparse.ArgumentParser:
    """The flags every experiment takes, ``--run-dir --steps --seed --resume``: all that a
    script driving another library's trainer takes (the engine's flags do not apply there).
    ``--steps`` and ``--seed`` default to None (``args.default_steps`` holds ``steps``)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--run-dir", default=run_dir, help=f"output directory (default {run_dir})")
    p.add_argument("--steps", type=int, default=None, help=f"updates to train (default {steps})")
    p.add_argument("--seed", type=int, default=None, help="seed (default: the config's)")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint")
    p.set_defaults(default_steps=steps)
    return p


def base_parser(description: str, *, steps: int, run_dir: str) -> argparse.ArgumentParser:
    """The flags every experiment on the engine takes (:func:`core_parser`'s and more)."""
    p = core_parser(description, steps=steps, run_dir=run_dir)
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
        help="override one config value, e.g. --set engine.batch_groups=32 (repeatable)",
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
    over the processes, so the multi-device code path can run anywhere.
    """
    import jax

    from curriculax.engine import make_mesh

    if args.devices < 1:
        raise SystemExit(f"--devices must be >= 1, got {args.devices}")
    if args.num_processes > 1:
        if args.devices % args.num_processes:
            raise SystemExit("--devices must be a multiple of --num-processes")
        if not args.coordinator:
            raise SystemExit("--num-processes > 1 needs --coordinator host:port")
    per_process = args.devices // args.num_processes
    if per_process > 1:
        jax.config.update("jax_num_cpu_devices", per_process)
    if args.num_processes > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(
            args.coordinator, num_processes=args.num_processes, process_id=args.process_id
        )
    return make_mesh(args.devices) if args.devices > 1 else None


def _field_types(cls) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _coerce(value: Any, typ: Any, where: str) -> Any:
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
    if typ is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if typ is int and isinstance(value, bool):
        raise ValueError(f"{where}: expected an int, got {value!r}")
    if typ in (int, str, bool) and not isinstance(value, typ):
        raise ValueError(f"{where}: expected {typ.__name__}, got {value!r}")
    if origin is tuple and isinstance(value, list):
        return tuple(value)
    return value


def from_mapping(cls: type[T], data: Mapping[str, Any], where: str = "config") -> T:
    """Builds the frozen dataclass ``cls`` from a mapping (nested dataclasses from tables)."""
    types_ = _field_types(cls)
    unknown = sorted(set(data) - set(types_))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; accepted keys are {sorted(types_)}")
    kwargs = {k: _coerce(v, types_[k], f"{where}.{k}") for k, v in data.items()}
    return cls(**kwargs)


def _parse_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text  # a bare string


def override(config: T, assignments: list[str]) -> T:
    """Applies ``key.sub=value`` overrides (values in TOML syntax; bare words are strings)."""
    for item in assignments:
        if "=" not in item:
            raise ValueError(f"--set takes KEY=VALUE, got {item!r}")
        key, _, text = item.partition("=")
        config = _set(config, key.strip().split("."), _parse_value(text.strip()), key)
    return config


def _set(obj: Any, path: list[str], value: Any, full: str) -> Any:
    head = path[0]
    if isinstance(obj, Mapping):
        # A free-form table (a curriculum, say): any key may be set; whoever reads the table
        # (cx.curriculum_from_config) says what is wrong with it.
        if len(path) == 1:
            return {**obj, head: value}
        inner = obj.get(head, {})
        if not isinstance(inner, Mapping):
            raise ValueError(f"--set {full}: {head!r} holds {inner!r}, which is not a table")
        return {**obj, head: _set(inner, path[1:], value, full)}
    if not dataclasses.is_dataclass(obj):
        raise ValueError(f"--set {full}: {head!r} is set inside {obj!r}, which has no keys")
    types_ = _field_types(type(obj))
    if head not in types_:
        raise ValueError(f"--set {full}: unknown key {head!r}; accepted keys are {sorted(types_)}")
    if len(path) == 1:
        return dataclasses.replace(obj, **{head: _coerce(value, types_[head], full)})
    return dataclasses.replace(obj, **{head: _set(getattr(obj, head), path[1:], value, full)})


def load_config(cls: type[T], args: argparse.Namespace) -> T:
    """The config: defaults, then ``--config`` TOML, then ``--set``, then ``--seed``/``--steps``."""
    config = cls()
    if args.config:
        with open(args.config, "rb") as f:
            data = tomllib.load(f)
        config = apply_mapping(config, data, where=args.config)
    config = override(config, args.set)
    fields = _field_types(cls)
    if args.seed is not None:
        check_seed(args.seed, "--seed")
        if "seed" in fields:
            config = dataclasses.replace(config, seed=args.seed)
    if args.steps is not None and "steps" in fields:
        config = dataclasses.replace(config, steps=args.steps)
    every = getattr(args, "checkpoint_every", None)
    if every is not None:
        _check_int(every, "--checkpoint-every", 0, _HINTS["checkpoint_every"])
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


def _check_int(value: Any, key: str, minimum: int, hint: str) -> None:
    try:
        int_at_least(value, key, minimum)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{e} ({hint})") from None


def check_values(config: Any, where: str = "") -> None:
    """The convention's keys, wherever they sit in the config, hold values a run can use:
    ``seed`` in ``[0, 2**32)``, ``steps >= 0``, ``checkpoint_every >= 0`` and every other
    ``*_every >= 1``; a ValueError names the key otherwise."""
    for f in dataclasses.fields(config):
        value, key = getattr(config, f.name), where + f.name
        if dataclasses.is_dataclass(value):
            check_values(value, key + ".")
        elif f.name == "seed":
            check_seed(value, key)
        elif f.name in _HINTS:
            _check_int(value, key, 0, _HINTS[f.name])
        elif f.name.endswith("_every"):
            _check_int(value, key, 1, "updates between two of them")


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
    return dataclasses.replace(config, **changes)


def run_experiment(engine, args: argparse.Namespace, config, *, on_update=None, until=None):
    """``curriculax.engine.run`` with the convention's flags: run dir, resume, partial
    restore, checkpoint interval (``--checkpoint-every`` or the config's), progress bar; the
    config (a dataclass with ``steps`` and ``checkpoint_every``) is saved with the run.

    What the run directory or its checkpoints refuse (a failed save, say) ends the process
    with ``error: <the message>`` on stderr and exit status 1, without a traceback. A resume of
    a finished run says so and changes nothing (:func:`already_complete` is then true).
    ``on_update`` and ``until`` are passed through.
    """
    from curriculax.engine import (
        CheckpointMismatch,
        CheckpointSaveError,
        CheckpointUnreadable,
        RunDirError,
        run,
    )

    try:
        result = run(
            engine,
            steps=config.steps,
            run_dir=args.run_dir,
            resume=args.resume,
            overwrite=args.overwrite,
            allow_partial=args.allow_partial,
            checkpoint_every=args.checkpoint_every or config.checkpoint_every,
            progress=not args.no_progress,
            tensorboard=args.tensorboard,
            sinks=metric_sinks(args),
            on_update=on_update,
            until=until,
            config=dataclasses.asdict(config),
        )
    except (CheckpointMismatch, CheckpointSaveError, CheckpointUnreadable, RunDirError) as e:
        raise SystemExit(f"error: {e}") from None
    if already_complete(result):
        why = (
            "it stopped where it was asked to (at its target)"
            if result.summary.get("stopped") == "until"
            else f"--steps {config.steps}"
        )
        print(
            f"{args.run_dir}: the run is already complete (update {result.summary['steps']}, "
            f"{why}); nothing was changed. To train further, resume with a larger --steps "
            "(and no stop condition), or start over with --overwrite."
        )
    return result


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
    with open(os.path.join(run_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
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
