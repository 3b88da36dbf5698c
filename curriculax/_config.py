"""Build samplers, gates and curricula from plain data (dicts, TOML) through a registry."""

from __future__ import annotations

import contextlib
import copy
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


def _call(
    factory: Callable,
    args: tuple,
    options: Mapping[str, Any],
    where: str,
    skip: int,
    context: Mapping[str, Any] | None = None,
    example: str = "cx.curriculum_from_config(config, num_tasks, {name}=...)",
    taken: set[str] | None = None,
):
    """``factory(*args, **options)`` after checking ``options`` against its signature, with
    the ``context`` entries it takes by name (their names added to ``taken``)."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # builtins without a signature: let the call decide
        return _named(where, factory, args, options)
    params = list(signature.parameters.values())
    named = [
        p
        for p in params[skip:]
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
    accepted = [p.name for p in named]
    # A factory with **kwargs takes any key; the context it names still reaches it.
    if taken is not None:
        taken.update(accepted)
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        unknown = sorted(set(options) - set(accepted))
        if unknown:
            raise ValueError(
                f"{where}: unknown key(s) {unknown}; accepted keys are {['type', *accepted]}"
            )
    options = dict(options)
    for name, value in (context or {}).items():
        if name not in accepted:
            continue  # context is offered to the factories that ask for it by name
        if name in options:
            raise ValueError(
                f"{where}: {name!r} is given both in the config and as context; give it once"
            )
        options[name] = value
    missing = [
        p.name for p in named if p.default is inspect.Parameter.empty and p.name not in options
    ]
    if missing:
        raise ValueError(
            f"{where}: missing {missing}; give them in the config or, for pool data a config "
            f"cannot hold (an array per task), as context, e.g. " + example.format(name=missing[0])
        )
    try:
        signature.bind(*args, **options)
    except TypeError as e:  # an import path to something that is not a factory (os:getcwd)
        call = "factory(num_tasks, **options)" if args else "factory(**options)"
        name = getattr(factory, "__qualname__", repr(factory))
        raise ValueError(
            f"{where}: {name} is not a factory: it cannot be called as {call} ({e})"
        ) from None
    return _named(where, factory, args, options)


def _named(where: str, factory: Callable, args: tuple, options: Mapping[str, Any]):
    """``factory(*args, **options)``; a ``ValueError`` or ``TypeError`` it raises is raised
    again with ``where`` (the table's path in the config) in front of its message."""
    try:
        return factory(*args, **options)
    except (ValueError, TypeError) as e:
        if type(e) not in (ValueError, TypeError):
            raise  # a subclass may carry more than its message: leave it as it is
        raise type(e)(f"{where}: {e}") from e


def _split_type(spec: Any, where: str) -> tuple[Any, dict]:
    if not isinstance(spec, Mapping):
        raise TypeError(f"{where} must be a table/mapping with a 'type' key, got {spec!r}")
    if "type" not in spec:
        raise ValueError(f"{where}: missing 'type' (one of the registered names or 'pkg.mod:fn')")
    options = {k: v for k, v in spec.items() if k != "type"}
    return spec["type"], options


def _sampler(
    spec: Any, num_tasks: int | None, context: Mapping[str, Any], name: str, taken: set[str]
):
    type_name, options = _split_type(spec, name)
    where = f"{name} (type {type_name!r})"
    factory = _resolve("sampler", _SAMPLERS, type_name, where)
    if isinstance(options.get("inner"), Mapping):
        options["inner"] = _sampler(options["inner"], num_tasks, context, f"{name}.inner", taken)
    sampler = _call(factory, (num_tasks,), options, where, skip=1, context=context, taken=taken)
    if not isinstance(sampler, TaskSampler):
        raise TypeError(
            f"{where}: the factory returned {type(sampler).__name__}, not a cx.TaskSampler"
        )
    return sampler


def sampler_from_config(
    spec: Mapping[str, Any], num_tasks: int | None, **context: Any
) -> TaskSampler:
    """Builds a sampler from ``{"type": name, **factory_kwargs}`` for a pool of ``num_tasks``.

    A wrapper's ``inner`` table is built the same way, for the same pool and context.

    Args:
      spec: the mapping.
      num_tasks: pool size passed to the factory.
      **context: pool information a config cannot hold, such as an array per task
        (``categories=levels`` for :func:`~curriculax.samplers.category_bandit`). Each
        entry goes to the factories (inner ones included) that take an argument of that
        name; the others ignore it. A name the config also gives a factory that takes it is
        refused (give it once).

    Example:
      >>> sampler = sampler_from_config({"type": "sequential", "shuffle": False}, 10)
      >>> type(sampler).__name__
      'TaskSampler'

    Raises:
      ValueError: an unknown type or key, a context name that no registered factory and no
        factory of this config takes (a misspelling would otherwise be ignored), or one the
        config gives too.
    """
    taken: set[str] = set()
    sampler = _sampler(spec, num_tasks, context, "sampler", taken)
    _check_context(context, taken)
    return sampler


def gate_from_config(spec: Mapping[str, Any], name: str = "gate", **context: Any) -> AdmissionGate:
    """Builds a gate from ``{"type": name, **factory_kwargs}``.

    Args:
      spec: the mapping.
      name: the gate's name, for error messages.
      **context: as for :func:`sampler_from_config`; :func:`curriculum_from_config` offers
        ``num_tasks`` this way to gates that keep per-task state.

    Example:
      >>> gate = gate_from_config({"type": "reward_consistency"}, num_tasks=10)
      >>> type(gate).__name__
      'AdmissionGate'
    """
    taken: set[str] = set()
    gate = _gate(spec, name, context, taken)
    _check_context(context, taken)
    return gate


def _check_context(context: Mapping[str, Any], taken: set[str]) -> None:
    """Refuses context that nothing could take: a name that is an argument of no registered
    sampler or gate factory and of none this config built (``taken``). Context that only this
    config's factories leave unused is fine (one call can serve many curricula)."""
    known = set(taken)
    for factory in (*_SAMPLERS.values(), *_GATES.values()):
        with contextlib.suppress(TypeError, ValueError):  # no signature: nothing known
            known.update(inspect.signature(factory).parameters)
    unknown = sorted(set(context) - known)
    if unknown:
        raise ValueError(
            f"context {unknown} is an argument of no sampler or gate factory (misspelled?); "
            f"this config's factories take {sorted(taken)}"
        )


def _gate(spec: Any, name: str, context: Mapping[str, Any], taken: set[str]) -> AdmissionGate:
    where = f"gates.{name}"
    type_name, options = _split_type(spec, where)
    factory = _resolve("gate", _GATES, type_name, f"{where} (type {type_name!r})")
    gate = _call(
        factory,
        (),
        options,
        f"{where} (type {type_name!r})",
        skip=0,
        context=context,
        example=f"cx.gate_from_config(spec, {name!r}, {{name}}=...)",
        taken=taken,
    )
    if not isinstance(gate, AdmissionGate):
        raise TypeError(
            f"{where} (type {type_name!r}): the factory returned {type(gate).__name__}, "
            "not a cx.AdmissionGate"
        )
    return gate


# Curricula by name: ``{"preset": name}`` in a config stands for the table here.
PRESETS: dict[str, dict[str, Any]] = {
    # Learnability with each task's prior from its category's pass rate, inside
    # reward_consistency, with its gate (docs/noise.md, "robust"). Not registered as "auto":
    # issue 16's condition for that (within 1.2x of the best arm on every cell) is not met.
    "robust": {
        "sampler": {"type": "reward_consistency", "inner": {"type": "hierarchical_learnability"}},
        "gates": {"consistency": {"type": "reward_consistency"}},
    },
}


def expand_preset(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """``config`` with ``{"preset": name}`` replaced by that preset's ``sampler`` and ``gates``
    tables (a copy); any other config unchanged.

    Raises:
      ValueError: an unknown preset name, or a preset given with other keys.
    """
    if "preset" not in config:
        return config
    name = config["preset"]
    if not isinstance(name, str) or name not in PRESETS:
        raise ValueError(
            f"curriculum config: unknown preset {name!r}; presets are {sorted(PRESETS)}"
        )
    others = sorted(set(config) - {"preset"})
    if others:
        raise ValueError(
            f"curriculum config: 'preset' stands for a whole curriculum, give it alone (got "
            f"{others} beside it); to change a part, write the preset's tables out: "
            f"{PRESETS[name]!r}"
        )
    return copy.deepcopy(PRESETS[name])


def robust_curriculum(
    num_tasks: int,
    categories: Any = None,
    *,
    entry_task: Any = None,
    axis_name: str | None = None,
) -> Curriculum:
    """The curriculum robust to noisy rewards, ``{"preset": "robust"}`` in a config.

    Its sampler is :func:`~curriculax.samplers.hierarchical_learnability` (learnability with
    each task's prior from its category's pass rate: per-task scores where tasks were
    measured, the category's where not; with no categories, the pool's) inside
    :func:`~curriculax.samplers.reward_consistency`, with the
    :func:`~curriculax.gates.reward_consistency` gate (named ``"consistency"``): a task whose
    reward is proven to ignore the answer is no longer drawn and none of its groups trains.
    The gate and the wrapper need answer ids in the results (``GroupResults.answers``):
    ``observe`` raises ``ValueError`` on results without them (the GRPO solver reports them;
    the host driver takes ``observe(..., answers=...)``). Measured for a policy that
    starts from a pretrained base (the GRPO studies, docs/noise.md; its record on each pool is
    in docs/what-to-use.md): on the chain of levels skipping solved tasks did far better (9/10
    seeds against 0-2/10). From random weights prefer ``skip_zero_variance(uniform,
    skip="solved", target_share=0)`` inside the same wrapper and gate: without informative
    labels this preset is per-task scoring, which from scratch reached the target on fewer
    seeds than uniform on hard-skew, balanced and the chain, while skipping solved tasks
    reached it on more seeds than uniform on every pool but hard-skew (a demonstrated win on
    the coin-flip pools only), where much of the pool is out of reach (there uniform in the
    wrapper and gate; where most of the pool is copies of a few tasks, as on easy-skew,
    ``uniform(distinct=True)`` in them did best).

    Args:
      num_tasks: pool size ``N``.
      categories: ``int[N]`` each entry's category (e.g. its difficulty level), or None.
      entry_task: ``int[N]`` for pools that repeat tasks (as for
        :func:`~curriculax.samplers.learnability`), or None.
      axis_name: the mesh axis the per-task state is split along, or None.

    Example:
      >>> import numpy as np
      >>> cur = robust_curriculum(100, np.repeat(np.arange(4), 25))
      >>> sorted(cur.gates)
      ['consistency']
    """
    context = {"categories": categories, "entry_task": entry_task, "axis_name": axis_name}
    context = {k: v for k, v in context.items() if v is not None}
    return curriculum_from_config({"preset": "robust"}, num_tasks, **context)


def curriculum_from_config(
    config: Mapping[str, Any] | None, num_tasks: int | None, **context: Any
) -> Curriculum:
    """Builds a curriculum from plain data, e.g. a TOML table.

    Keys are the factories' argument names::

        {"sampler": {"type": "difficulty_pools",
                     "bands": {"hard": {"max_reward": 0.25, "weight": 0.2}, ...}},
         "gates": {"zero_advantage": {"type": "advantage_range", "low": 0.0, "high": 0.0}}}

    ``{"preset": "robust"}`` stands for the :func:`robust_curriculum` tables (``PRESETS``).
    ``type`` is a registered name (:func:`register_sampler`, :func:`register_gate`) or an
    import path ``package.module:factory``. A missing ``sampler`` means the default
    ``sequential`` sampler. Unknown types or keys raise a ``ValueError`` naming the bad key
    and listing the accepted ones.

    Pool data a TOML file cannot hold (an array per task) is passed as keyword context and
    reaches the sampler factories that take an argument of that name, e.g. a category bandit
    over the pool's difficulty levels::

        cx.curriculum_from_config({"sampler": {"type": "category_bandit"}}, N, categories=levels)

    A context name that no registered factory and none of this config's takes is refused (a
    misspelling would be ignored); an error a factory raises names its table
    (``sampler.inner (type 'difficulty_pools'): ...``).

    Args:
      config: the mapping (``None`` or ``{}``: the default curriculum, no gates).
      num_tasks: pool size passed to the sampler factory (and to gates that take one).
      **context: see :func:`sampler_from_config`; gates are offered it too.
    """
    config = {} if config is None else config
    if not isinstance(config, Mapping):
        raise TypeError(f"curriculum config must be a mapping, got {type(config).__name__}")
    config = expand_preset(config)
    unknown = sorted(set(config) - {"sampler", "gates"})
    if unknown:
        raise ValueError(
            f"curriculum config: unknown key(s) {unknown}; accepted keys are ['gates', "
            "'preset', 'sampler']"
        )
    taken: set[str] = set()
    sampler = _sampler(
        config.get("sampler", {"type": "sequential"}), num_tasks, context, "sampler", taken
    )
    gate_specs = config.get("gates", {})
    if not isinstance(gate_specs, Mapping):
        raise TypeError(f"'gates' must be a table of name -> gate spec, got {gate_specs!r}")
    gate_context = {**context, "num_tasks": num_tasks}
    gates = {name: _gate(spec, name, gate_context, taken) for name, spec in gate_specs.items()}
    _check_context(context, taken)
    return curriculum(sampler, gates)


def _register_builtins() -> None:
    from curriculax import gates
    from curriculax.samplers import (
        category_bandit,
        category_learnability,
        difficulty_pools,
        floor,
        hierarchical_learnability,
        learnability,
        learning_progress,
        reward_consistency,
        sequential,
        skip_zero_variance,
        uniform,
    )

    register_sampler("sequential", sequential)
    register_sampler("difficulty_pools", difficulty_pools)
    register_sampler("uniform", uniform)
    register_sampler("learnability", learnability)
    register_sampler("hierarchical_learnability", hierarchical_learnability)
    register_sampler("learning_progress", learning_progress)
    register_sampler("category_bandit", category_bandit)
    register_sampler("category_learnability", category_learnability)
    register_sampler("floor", floor)
    register_sampler("skip_zero_variance", skip_zero_variance)
    register_sampler("reward_consistency", reward_consistency)
    register_gate("advantage_range", gates.advantage_range)
    register_gate("reward_consistency", gates.reward_consistency)


_register_builtins()
