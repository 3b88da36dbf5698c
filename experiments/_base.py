"""Warm-started base policies: supervised pretraining on a declared distribution, cached.

A user fine-tunes a pretrained model whose per-prompt pass rates are already spread (some
prompts always solved, many never, a band in between). A *base* here is that model's toy: the
experiments' transformer fitted by :func:`curriculax.rl.pretrain` (next-token cross-entropy on
prompt -> answer) to a declared mix of the task family's levels, for a few dozen steps.

An experiment says where its policy starts with ``init``:

- ``"scratch"``: random weights (every study before bases existed);
- ``{base = "NAME"}``: the base declared in ``experiments/configs/base/NAME.toml``;
- ``{base = {level_mass = [...], steps = ..., ...}}``: a base declared inline
  (:class:`BaseConfig`'s keys).

The base's task family, symbols, levels, held-out split and model are the experiment's own, so
the base and the RL policy are the same network over the same prompts; its training tasks are
the training side of the experiment's split (never a held-out task), drawn like a study pool
(:func:`experiments._builders.make_study_pool` with the base's ``level_mass``).

A base is built on first use and kept, like a downloaded model, in
``$CURRICULAX_CACHE/base/<hash>/`` (default ``~/.cache/curriculax``; ``$XDG_CACHE_HOME``
is honoured), where ``<hash>`` is the hash of everything it depends on (:func:`base_spec`). An
entry is written beside the cache under a temporary name and renamed into place once complete,
so a killed build never leaves a half-written entry under its hash; an entry that does not
read back whole (files missing or corrupt, a checksum that differs) is moved aside and rebuilt.

    python -m experiments.pretrain --config experiments/configs/grpo.toml   # build (or find) it
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import sys
import time
import tomllib
import uuid
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from curriculax import rl

# Bump when the way a base is built changes, so cached bases built the old way are not used.
FORMAT = 1
BASE_CONFIG_DIR = os.path.join(os.path.dirname(__file__), "configs", "base")
CACHE_ENV = "CURRICULAX_CACHE"


@dataclasses.dataclass(frozen=True)
class BaseConfig:
    """What a base is pretrained on, and how long.

    Attributes:
      level_mass: the share of training examples per level of the experiment's family (levels
        past the end of the list get 0).
      examples: distinct pool entries the base trains on (split over levels by ``level_mass``,
        as a study pool is).
      steps: AdamW steps of ``batch_size`` examples.
      batch_size: examples per step.
      learning_rate: AdamW step size.
      seed: the base's initial weights and batch draws.
    """

    level_mass: tuple[float, ...] = (1.0,)
    examples: int = 256
    steps: int = 60
    batch_size: int = 64
    learning_rate: float = 3e-3
    seed: int = 0

    def __post_init__(self):
        if not self.level_mass or any(not 0 <= m < math.inf for m in self.level_mass):
            raise ValueError(
                f"base.level_mass must be a non-empty list of finite shares >= 0, got "
                f"{self.level_mass}"
            )
        if not 0 < sum(self.level_mass) < math.inf:
            raise ValueError(
                f"base.level_mass needs a positive share and a finite sum, got {self.level_mass}"
            )
        for name in ("examples", "steps", "batch_size"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"base.{name} must be an int >= 1, got {getattr(self, name)!r}")
        if not self.learning_rate > 0:
            raise ValueError(f"base.learning_rate must be > 0, got {self.learning_rate!r}")


def check_init(init: Any, where: str = "init") -> None:
    """Raises a ValueError naming what is wrong with an ``init`` value (see the module doc)."""
    if init == "scratch":
        return
    ok = isinstance(init, Mapping) and set(init) == {"base"}
    ok = ok and isinstance(init["base"], str | Mapping)
    if not ok:
        keys = sorted(f.name for f in dataclasses.fields(BaseConfig))
        raise ValueError(
            f'{where} must be "scratch", {{base = "NAME"}} (a file in {BASE_CONFIG_DIR}) or '
            f"{{base = {{...}}}} (a table of {keys}), got {init!r}"
        )


def base_config(init: Any, where: str = "init") -> BaseConfig | None:
    """The :class:`BaseConfig` an ``init`` value names (None for ``"scratch"``)."""
    from experiments import _cli

    check_init(init, where)
    if init == "scratch":
        return None
    spec = init["base"]
    if isinstance(spec, str):
        path = os.path.join(BASE_CONFIG_DIR, f"{spec}.toml")
        if not os.path.exists(path):
            names = sorted(f[:-5] for f in os.listdir(BASE_CONFIG_DIR) if f.endswith(".toml"))
            raise ValueError(f"{where}: no base named {spec!r}; the named bases are {names}")
        with open(path, "rb") as f:
            spec = tomllib.load(f)
        where = path
    else:
        where = f"{where}.base"  # an inline table: its keys are init.base.KEY
    return _cli.from_mapping(BaseConfig, spec, where)


def base_task(config, base: BaseConfig):
    """The experiment's :class:`~experiments._builders.TaskConfig` with the base's levels:
    the base trains on this pool's entries."""
    task = config.task
    if len(base.level_mass) > task.num_levels:
        raise ValueError(
            f"base.level_mass has {len(base.level_mass)} shares but the experiment's family has "
            f"{task.num_levels} levels"
        )
    mass = tuple(base.level_mass) + (0.0,) * (task.num_levels - len(base.level_mass))
    return dataclasses.replace(
        task, level_mass=mass, pool_size=base.examples, eval_levels=(), distractors=0.0
    )


def base_spec(config) -> dict | None:
    """Everything a base depends on, JSON-able (None when ``config.init`` is ``"scratch"``):
    the base's config, its task pool's config, the model, and :data:`FORMAT`."""
    base = base_config(config.init)
    if base is None:
        return None
    pool_task = base_task(config, base)
    task = dataclasses.asdict(pool_task)
    # Only what the base's pool and training read, so experiments that differ elsewhere share
    # one base: what samplers are told (labels), fields base_task overrides (the pool's size
    # is base.examples, so train_per_level is unread; no distractors, so distractor_p is
    # unread; no target levels), and the level shares as the pool builder reads them
    # (TaskConfig.mass, normalised: [8, 8, 1] and [16, 16, 2] build one pool).
    for name in ("labels", "train_per_level", "distractors", "distractor_p", "eval_levels"):
        task.pop(name)
    task["level_mass"] = pool_task.mass.tolist()
    settings = dataclasses.asdict(base)
    del settings["level_mass"]  # in the task's, normalised
    return {
        "format": FORMAT,
        "base": settings,
        "task": task,
        "model": dataclasses.asdict(config.model),
    }


def spec_hash(spec: Mapping) -> str:
    """A short stable hash of a :func:`base_spec`."""
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_root() -> str:
    """``$CURRICULAX_CACHE``, else ``$XDG_CACHE_HOME/curriculax``, else ``~/.cache/curriculax``."""
    root = os.environ.get(CACHE_ENV)
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(xdg, "curriculax")
    return os.path.abspath(root)


def base_dir(config) -> str:
    """Where the base of ``config`` is (or will be) cached."""
    return os.path.join(cache_root(), "base", spec_hash(base_spec(config)))


def params_checksum(params) -> str:
    """sha256 over every leaf's path, dtype, shape and bytes."""
    from curriculax.checkpoint import path_str

    h = hashlib.sha256()
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        a = np.asarray(leaf)
        h.update(f"{path_str(path)}|{a.dtype.name}|{a.shape}|".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def _progress(total: int, stream=None):
    stream = stream or sys.stderr  # at call time (a redirected stderr), not at import
    t0 = time.perf_counter()

    def update(done: int, loss: float) -> None:
        filled = round(24 * done / total)
        end = "\n" if done >= total or not stream.isatty() else "\r"
        stream.write(
            f"  base [{'#' * filled}{'.' * (24 - filled)}] step {done}/{total} | loss "
            f"{loss:.3f} | {time.perf_counter() - t0:.0f}s{end}"
        )
        stream.flush()

    return update


def build_base(config, *, progress: bool = True) -> tuple[dict, dict]:
    """Pretrains the base of ``config`` (nothing cached). Returns ``(params, info)``."""
    from experiments._builders import family_spec, make_study_pool

    base = base_config(config.init)
    task = base_task(config, base)
    try:
        pool = make_study_pool(dataclasses.replace(config, task=task, init="scratch"))
    except ValueError as e:
        raise ValueError(f"base.examples={base.examples} with base.level_mass: {e}") from None
    spec = family_spec(task)
    t0 = time.perf_counter()
    params, losses = rl.pretrain(
        config.model,
        pool.train,
        jax.random.key(base.seed),
        steps=base.steps,
        batch_size=base.batch_size,
        learning_rate=base.learning_rate,
        output_tokens=spec.answer_tokens(),
        on_chunk=_progress(base.steps) if progress else None,
    )
    params = jax.device_get(params)
    losses = np.asarray(losses)
    info = {
        "seconds": round(time.perf_counter() - t0, 2),
        "first_loss": float(losses[0]),
        "final_loss": float(losses[-1]),
    }
    return params, info


def _abstract_params(model) -> Any:
    return jax.eval_shape(lambda: rl.init_policy(model, jax.random.key(0))[1])


def _read_entry(path: str, expected_hash: str, model) -> dict:
    """The params of a cache entry, or an exception if it does not read back whole."""
    import orbax.checkpoint as ocp

    with open(os.path.join(path, "meta.json")) as f:
        meta = json.load(f)
    if meta.get("hash") != expected_hash:
        raise ValueError(f"meta.json names hash {meta.get('hash')!r}, not {expected_hash!r}")
    with ocp.StandardCheckpointer() as ckpt:
        params = ckpt.restore(os.path.join(path, "params"), _abstract_params(model))
    params = jax.device_get(params)
    if params_checksum(params) != meta.get("checksum"):
        raise ValueError("the params' checksum differs from meta.json's")
    return params


def _write_entry(path: str, params, meta: dict) -> None:
    import orbax.checkpoint as ocp

    os.makedirs(path)
    with ocp.StandardCheckpointer() as ckpt:
        ckpt.save(os.path.join(path, "params"), params)
        ckpt.wait_until_finished()
    with open(os.path.join(path, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())


def _first_process() -> bool:
    return jax.process_index() == 0


def load_base(config, *, progress: bool = True) -> tuple[dict, str]:
    """The base params of ``config`` and their cache directory: read from the cache, or built,
    written (atomically) and read back on first use. A cache entry that does not read back
    whole is moved aside and rebuilt, with a line on stderr saying so. On several processes
    only process 0 shows the build's progress (each process builds or reads the same base)."""
    from curriculax.checkpoint import quiet_abandoned_io

    progress = progress and _first_process()

    spec = base_spec(config)
    if spec is None:
        raise ValueError('load_base: config.init is "scratch"; there is no base to load')
    digest = spec_hash(spec)
    root = os.path.join(cache_root(), "base")
    path = os.path.join(root, digest)
    quiet_abandoned_io()  # a failed read or write of the entry reports once, not per array
    if os.path.isdir(path):
        try:
            return _read_entry(path, digest, config.model), path
        except Exception as e:  # any failure to read back: the entry is not used
            from curriculax.checkpoint import one_line

            print(f"base {path} is unreadable ({one_line(e)}); rebuilding it", file=sys.stderr)
            aside = os.path.join(root, f".bad-{digest}-{uuid.uuid4().hex[:8]}")
            try:
                os.rename(path, aside)
                shutil.rmtree(aside, ignore_errors=True)
            except FileNotFoundError:
                pass  # another process moved it first
    if progress:
        print(f"building the base policy {digest} (first use) -> {path}", file=sys.stderr)
    params, info = build_base(config, progress=progress)
    os.makedirs(root, exist_ok=True)
    tmp = os.path.join(root, f".building-{digest}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    meta = {"hash": digest, "spec": spec, "checksum": params_checksum(params), **info}
    try:
        _write_entry(tmp, params, meta)
        try:
            os.rename(tmp, path)
        except OSError:
            # Another process committed the same base first: theirs is as good as ours.
            if not os.path.isdir(path):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return _read_entry(path, digest, config.model), path
