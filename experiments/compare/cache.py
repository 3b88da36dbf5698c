"""Finished arms kept in ``RUN_DIR/arms/``, keyed by what their curves depend on."""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import os
import sys
import zipfile
from collections.abc import Mapping

import numpy as np

from curriculax import _config
from curriculax._config import expand_preset
from curriculax._files import write_atomic
from experiments._base import base_spec, spec_hash
from experiments.compare.code import arm_code_digest
from experiments.compare.config import (
    MAIN_JOB_ONLY,
    CompareConfig,
    arm_experiment,
    arm_oracle,
    json_default,
)

# Experiment settings a run never reads: ``target`` is the score its curves are read against
# afterwards (changing it re-reads the kept curves, it does not rerun them).
NOT_RUN = (*MAIN_JOB_ONLY, "target")


def arm_fingerprint(config: CompareConfig, arm: Mapping) -> str:
    """What an arm's curves depend on: its experiment (less the settings a run never reads,
    :data:`NOT_RUN`), curriculum (a preset as its tables, each sampler and gate table with its
    factory's defaults written in: :func:`bound_curriculum`) or oracle, the seeds, the schedule
    and the code it runs (:func:`arm_code_digest`: an arm kept by other code is run again), not
    its name, nor the other arms."""
    exp = dataclasses.asdict(arm_experiment(config, arm))
    for key in NOT_RUN:
        exp.pop(key)
    arm_spec = {k: v for k, v in arm.items() if k not in ("name", "experiment")}
    if "oracle" in arm:  # the settings it runs with, defaults filled in, not only the table
        gates = arm["oracle"].get("gates", {})
        arm_spec["oracle"] = as_floats({**arm_oracle(arm), "gates": _bound_gates(gates)})
        code = arm_code_digest({"gates": gates}, oracle=True)
    else:
        arm_spec["curriculum"] = bound_curriculum(arm.get("curriculum"))
        code = arm_code_digest(arm.get("curriculum"))
    spec = {
        "experiment": exp,
        "arm": arm_spec,
        "seeds": config.seeds,
        "generations": config.generations,
        "eval_every": config.eval_every,
        "code": code,
    }
    if config.pass_rate_samples:
        spec["pass_rates"] = [config.pass_rate_samples, config.pass_rate_per_category]
    if config.step0_samples:
        spec["step0"] = [config.step0_samples, config.pass_rate_per_category]
    base = base_spec(arm_experiment(config, arm))
    if base is not None:  # what the named base is made of, not only its name
        spec["base"] = spec_hash(base)
    text = json.dumps(spec, sort_keys=True, default=json_default)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def bound_curriculum(curriculum: Mapping | None) -> dict:
    """A curriculum table as the arm runs it, for its cache key: a preset as the tables it
    stands for, the default sampler where none is named, every sampler table (``inner`` ones
    too) and gate table with its factory's defaults written in, and numbers as floats (a
    table that writes a default out, or ``4`` for ``4.0``, runs the same arm and gets its
    key).

    Raises:
      ValueError: a type no registry holds and no import path names (as building it would).
    """
    curriculum = dict(expand_preset(curriculum or {}))
    curriculum["sampler"] = _bound("sampler", curriculum.get("sampler", {"type": "sequential"}))
    curriculum["gates"] = _bound_gates(curriculum.get("gates") or {})
    return as_floats(curriculum)


def _bound_gates(gates):
    """A ``gates`` table with each gate's defaults written in (:func:`_bound`)."""
    if not isinstance(gates, Mapping):
        return gates
    return {name: _bound("gate", spec) for name, spec in gates.items()}


def _bound(kind: str, spec):
    """A sampler (``kind="sampler"``) or gate table with its factory's defaults written in;
    anything but a table with a ``type`` as it is (building the arm refuses it)."""
    if not isinstance(spec, Mapping) or "type" not in spec:
        return spec
    table, skip = (_config._SAMPLERS, 1) if kind == "sampler" else (_config._GATES, 0)
    factory = _config._resolve(kind, table, spec["type"], f"curriculum {kind}")
    spec = dict(spec)
    if kind == "sampler" and "inner" in spec:
        spec["inner"] = _bound("sampler", spec["inner"])
    try:
        params = list(inspect.signature(factory).parameters.values())[skip:]
    except (TypeError, ValueError):  # no signature: the table as written
        return spec
    for p in params:
        named = p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        # a default a config could not write (a dtype, a callable, an array: a user factory's)
        # stays out, as before defaults were written in: the key must be JSON and stable
        plain = _plain(p.default)
        if named and plain and p.default is not inspect.Parameter.empty and p.name not in spec:
            spec[p.name] = p.default
    return spec


def _plain(x) -> bool:
    """Whether a config (TOML) could write ``x``: None, a bool, number or string, or lists,
    tuples and string-keyed mappings of them."""
    if x is None or isinstance(x, bool | int | float | str):
        return True
    if isinstance(x, list | tuple):
        return all(_plain(v) for v in x)
    if isinstance(x, Mapping):
        return all(isinstance(k, str) and _plain(v) for k, v in x.items())
    return False


def as_floats(x):
    """``x`` with every int (not bool) that a float holds exactly written as a float, through
    mappings, lists and tuples."""
    if isinstance(x, Mapping):
        return {k: as_floats(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [as_floats(v) for v in x]
    if isinstance(x, int | np.integer) and not isinstance(x, bool | np.bool_):
        return float(x) if abs(int(x)) <= 2**53 else int(x)
    return x


def arm_path(run_dir: str, config: CompareConfig, arm: Mapping) -> str:
    """Where :func:`save_arm` keeps this arm's curves."""
    return os.path.join(run_dir, "arms", f"{arm_fingerprint(config, arm)}.npz")


def save_arm(run_dir: str, config: CompareConfig, arm: Mapping, curves: dict) -> None:
    """Keeps a finished arm's curves, so a rerun of the study (after a crash, or with arms
    added) reuses them instead of running them again. Written to a temporary file and renamed
    into place, so a kill mid-write leaves no arm file that looks finished."""
    path = arm_path(run_dir, config, arm)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    extra = {k: np.asarray(curves[k]) for k in ("seconds", "load", "category_names")}
    if curves.get("environment") is not None:  # as JSON text: npz holds no dicts
        extra["environment"] = np.asarray(json.dumps(curves["environment"], sort_keys=True))
    rest = {k: v for k, v in curves.items() if k not in extra and k != "environment"}
    write_atomic(path, lambda f: np.savez(f, **rest, **extra), binary=True)


# What numpy raises on an arm file cut short or emptied (a kill mid-write before writes were
# atomic, a full disk, a copy gone wrong): such a file is a miss, and the arm runs again.
UNREADABLE = (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError)


def load_arm(
    run_dir: str, config: CompareConfig, arm: Mapping, *, again: bool = True
) -> dict | None:
    """The curves ``save_arm`` kept for this arm with these settings, or None (none kept, or
    the file cannot be read: a note on stderr says so, and the caller runs the arm again;
    ``again=False``: the caller leaves the arm out, and the note says that)."""
    path = arm_path(run_dir, config, arm)
    if not os.path.exists(path):
        return None
    try:
        with np.load(path) as f:
            curves = {k: f[k] for k in f.files}
        curves["seconds"] = float(curves["seconds"])
        curves["load"] = tuple(curves["load"].tolist())
        curves["category_names"] = curves["category_names"].tolist()
        # absent from arms saved before environments were kept
        curves["environment"] = (
            json.loads(str(curves["environment"])) if "environment" in curves else None
        )
        if "noise_unit" in curves:  # absent from arms saved before the noise flags were kept
            curves["noise_unit"] = str(curves["noise_unit"])
    except UNREADABLE as e:
        then = "running arm {!r} again" if again else "leaving arm {!r} out"
        print(
            f"note: {path} cannot be read ({type(e).__name__}: {e}); " + then.format(arm["name"]),
            file=sys.stderr,
        )
        return None
    return curves
