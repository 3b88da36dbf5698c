"""Build samplers, gates and curricula from plain data (dicts, TOML) through a registry."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from curriculax._curriculum import curriculum
from curriculax._types import AdmissionGate, Curriculum, TaskSampler

_SAMPLERS: dict[str, Callable[..., TaskSampler]] = {}
_GATES: dict[str, Callable[..., AdmissionGate]] = {}


def _register(table: dict, kind: str, name: str, factory: Callable, overwrite: bool) -> None:
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"{kind} names must be non-empty strings without ':', got {name!r}")
    if not callable(factory):
        raise TypeError(f"{kind} factory for {name!r} must be callable, got {factory!r}")
    if name in table and table[name] is not factory and not overwrite:
        raise ValueError(
            f"a {kind} named {name!r} is already registered; pass overwrite=True to replace it"
        )
    table[name] = factory


def register_sampler(name: str, factory: Callable[..., TaskSampler], *, overwrite=False) -> None:
    """Makes ``factory(num_tasks, **kwargs) -> TaskSampler`` buildable as ``type = name``."""
    _register(_SAMPLERS, "sampler", name, factory, overwrite)


def register_gate(name: str, factory: Callable[..., AdmissionGate], *, overwrite=False) -> None:
    """Makes ``factory(**kwargs) -> AdmissionGate`` buildable as ``type = name``."""
    _register(_GATES, "gate", name, factory, overwrite)


def _resolve(kind: str, table: dict, type_name: Any, where: str) -> Callable:
    if not isinstance(type_name, str) or not type_name:
        raise ValueError(f"{where}: 'type' must be a non-empty string, got {type_name!r}")
    if ":" in type_name:
        module_name, _, attr = type_name.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise ValueError(f"{where}: cannot import module {module_name!r} ({e})") from e
        try:
            factory = getattr(module, attr)
        except AttributeError:
            raise ValueError(f"{where}: module {module_name!r} has no attribute {attr!r}") from None
        if not callable(factory):
            raise ValueError(f"{where}: {type_name!r} is not callable")
        return factory
    if type_name not in table:
        raise ValueError(
            f"{where}: unknown {kind} type {type_name!r}; registered types are "
            f"{sorted(table)} (or give an import path 'package.module:factory')"
        )
    return table[type_name]


def _call(factory: Callable, args: tuple, options: Mapping[str, Any], where: str, skip: int):
    try:
        params = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):  # builtins without a signature: let the call decide
        return factory(*args, **options)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return factory(*args, **options)
    accepted = [
        p.name
        for p in params[skip:]
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {unknown}; accepted keys are {['type', *accepted]}"
        )
    return factory(*args, **options)


def _split_type(spec: Any, where: str) -> tuple[Any, dict]:
    if not isinstance(spec, Mapping):
        raise TypeError(f"{where} must be a table/mapping with a 'type' key, got {spec!r}")
    if "type" not in spec:
        raise ValueError(f"{where}: missing 'type' (one of the registered names or 'pkg.mod:fn')")
    options = {k: v for k, v in spec.items() if k != "type"}
    return spec["type"], options


def sampler_from_config(spec: Mapping[str, Any], num_tasks: int | None) -> TaskSampler:
    """Builds a sampler from ``{"type": name, **factory_kwargs}`` for a pool of ``num_tasks``.

    Example:
      >>> sampler_from_config({"type": "sequential", "shuffle": False}, 10)
    """
    type_name, options = _split_type(spec, "sampler")
    factory = _resolve("sampler", _SAMPLERS, type_name, f"sampler (type {type_name!r})")
    sampler = _call(factory, (num_tasks,), options, f"sampler (type {type_name!r})", skip=1)
    if not isinstance(sampler, TaskSampler):
        raise TypeError(f"sampler factory {type_name!r} returned {type(sampler).__name__}")
    return sampler


def gate_from_config(spec: Mapping[str, Any], name: str = "gate") -> AdmissionGate:
    """Builds a gate from ``{"type": name, **factory_kwargs}``."""
    where = f"gates.{name}"
    type_name, options = _split_type(spec, where)
    factory = _resolve("gate", _GATES, type_name, f"{where} (type {type_name!r})")
    gate = _call(factory, (), options, f"{where} (type {type_name!r})", skip=0)
    if not isinstance(gate, AdmissionGate):
        raise TypeError(f"gate factory {type_name!r} returned {type(gate).__name__}")
    return gate


def curriculum_from_config(config: Mapping[str, Any] | None, num_tasks: int | None) -> Curriculum:
    """Builds a curriculum from plain data, e.g. a TOML table.

    Keys are the factories' argument names::

        {"sampler": {"type": "difficulty_pools",
                     "bands": {"hard": {"max_reward": 0.25, "weight": 0.2}, ...}},
         "gates": {"zero_advantage": {"type": "advantage_range", "low": 0.0, "high": 0.0}}}

    ``type`` is a registered name (:func:`register_sampler`, :func:`register_gate`) or an
    import path ``package.module:factory``. A missing ``sampler`` means the default
    ``sequential`` sampler. Unknown types or keys raise a ``ValueError`` naming the bad key
    and listing the accepted ones.

    Args:
      config: the mapping (``None`` or ``{}``: the default curriculum, no gates).
      num_tasks: pool size passed to the sampler factory.
    """
    config = {} if config is None else config
    if not isinstance(config, Mapping):
        raise TypeError(f"curriculum config must be a mapping, got {type(config).__name__}")
    unknown = sorted(set(config) - {"sampler", "gates"})
    if unknown:
        raise ValueError(
            f"curriculum config: unknown key(s) {unknown}; accepted keys are ['gates', 'sampler']"
        )
    sampler = sampler_from_config(config.get("sampler", {"type": "sequential"}), num_tasks)
    gate_specs = config.get("gates", {})
    if not isinstance(gate_specs, Mapping):
        raise TypeError(f"'gates' must be a table of name -> gate spec, got {gate_specs!r}")
    gates = {name: gate_from_config(spec, name) for name, spec in gate_specs.items()}
    return curriculum(sampler, gates)


def _register_builtins() -> None:
    from curriculax.gates import advantage_range
    from curriculax.samplers import difficulty_pools, learnability, sequential, uniform

    register_sampler("sequential", sequential)
    register_sampler("difficulty_pools", difficulty_pools)
    register_sampler("uniform", uniform)
    register_sampler("learnability", learnability)
    register_gate("advantage_range", advantage_range)


_register_builtins()
