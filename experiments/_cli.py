"""The experiment CLI convention shared by every script under ``experiments/``.

``--run-dir DIR --steps N --seed S --resume --config FILE.toml`` (plus ``--set key=value``
overrides of the TOML config, ``--allow-partial``, ``--no-progress``), writing
``DIR/metrics.jsonl``, ``DIR/traces.jsonl``, ``DIR/checkpoints/`` and ``DIR/summary.json``.

Configs are frozen dataclasses; a TOML file and ``--set`` overrides are parsed into them, and
unknown keys are errors that list the accepted ones.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tomllib
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def base_parser(description: str, *, steps: int, run_dir: str) -> argparse.ArgumentParser:
    """The flags every experiment takes."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--run-dir", default=run_dir, help=f"output directory (default {run_dir})")
    p.add_argument("--steps", type=int, default=None, help=f"updates to train (default {steps})")
    p.add_argument("--seed", type=int, default=None, help="seed (default: the config's)")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint")
    p.add_argument("--allow-partial", action="store_true", help="resume with changed envs/gates")
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
        "--devices", type=int, default=1, help="data-parallel mesh over N devices (default 1)"
    )
    p.add_argument("--coordinator", default=None, help="multi-host: coordinator host:port")
    p.add_argument("--num-processes", type=int, default=1, help="multi-host: process count")
    p.add_argument("--process-id", type=int, default=0, help="multi-host: this process's id")
    p.add_argument("--checkpoint-every", type=int, default=None, help="save every N updates")
    p.set_defaults(default_steps=steps)
    return p


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
    types_ = _field_types(type(obj))
    head = path[0]
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
    if args.seed is not None and "seed" in fields:
        config = dataclasses.replace(config, seed=args.seed)
    if args.steps is not None and "steps" in fields:
        config = dataclasses.replace(config, steps=args.steps)
    return config


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
    ``on_update`` and ``until`` are passed through."""
    from curriculax.engine import run

    return run(
        engine,
        steps=config.steps,
        run_dir=args.run_dir,
        resume=args.resume,
        allow_partial=args.allow_partial,
        checkpoint_every=args.checkpoint_every or config.checkpoint_every,
        progress=not args.no_progress,
        on_update=on_update,
        until=until,
        config=dataclasses.asdict(config),
    )


def exit_for(stopped: str) -> None:
    """Exits with the conventional status of the signal that stopped the run, if any."""
    codes = {"SIGTERM": 128 + 15, "SIGINT": 128 + 2}
    if stopped in codes:
        print(f"stopped by {stopped}; checkpoint saved, resume with --resume", file=sys.stderr)
        sys.exit(codes[stopped])
