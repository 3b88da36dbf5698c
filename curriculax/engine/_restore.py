"""Saving an engine's state and restoring it strictly, partially, or onto a reordered pool."""

from __future__ import annotations

import gc
import hashlib
import json
import warnings
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec, make_single_device_sharding

from curriculax._types import AT_FIRST_ENTRY_ATTR, PER_TASK_ATTR
from curriculax.checkpoint import (
    CheckpointStore,
    assemble,
    is_read_failure,
    leaf_layout,
    quiet_abandoned_io,
    unreadable_reason,
)
from curriculax.engine._engine import Engine, EngineState
from curriculax.engine._env import key_ints

FORMAT = 1
# Bits of the task keys saved with a checkpoint (meta "key_bits"). Checkpoints written before
# 64-bit keys have no such entry and hold u32[N] keys: the low words of today's keys.
KEY_BITS = 64
_LOW32 = np.uint64(0xFFFFFFFF)
# Leaves renamed since format 1 was introduced: {old path: new path} (engine-relative). A
# checkpoint holding the old path (and not the new) restores with the leaf moved over.
RENAMED = {"since_progress": "since_progress_by_env"}


class CheckpointMismatch(ValueError):
    """The checkpoint does not fit this run (strict restore); the message says what differs."""


class CheckpointUnreadable(RuntimeError):
    """No checkpoint of the directory could be read back; the message lists each one and why."""


def engine_meta(engine: Engine, state: EngineState, extra: dict | None = None) -> dict:
    """The JSON item saved beside the arrays: layout facts, versions and the user's config."""
    import curriculax

    layout = leaf_layout(state)

    return {
        "format": FORMAT,
        "envs": {
            e.name: {
                "num_tasks": e.num_tasks,
                "group_size": e.group_size,
                "weight": e.weight,
                "gates": list(e.curriculum.gates),
            }
            for e in engine.envs
        },
        # The engine indexes envs by position (mixer, pending rows, no-progress counts).
        "env_order": list(engine.env_names),
        "batch_groups": engine.config.batch_groups,
        "groups_per_generation": engine.config.generation,
        "layout": {p: [list(shape), dtype] for p, (shape, dtype) in layout.items()},
        "pool_fingerprints": {e.name: _fingerprint(e.keys) for e in engine.envs},
        "key_bits": KEY_BITS,
        "versions": {
            "curriculax": curriculax.__version__,
            "jax": jax.__version__,
            "numpy": np.__version__,
        },
        "config": extra or {},
    }


def save(
    store: CheckpointStore,
    step: int,
    engine: Engine,
    state: EngineState,
    extra=None,
    *,
    logs: dict[str, int | None] | None = None,
    history: list | None = None,
    reached: bool = False,
):
    """Saves ``state`` with the pools' task keys and the run metadata as checkpoint ``step``.

    ``logs`` (``{file name: byte length}``) records how far each log of the run directory had
    been written (and synced) at this checkpoint, so a resume can cut them back to exactly this
    point. ``history`` lists the config changes earlier resumes accepted (``allow_partial``).
    ``reached``: the run's ``until`` ended it at this step (a resume then finds it complete).
    A checkpoint already at ``step`` is replaced once the new one is committed.
    """
    item = {"engine": state, "pool_keys": {e.name: engine.pool_keys[e.name] for e in engine.envs}}
    meta = engine_meta(engine, state, extra)
    if logs is not None:
        meta["logs"] = logs
    if history:
        meta["config_changes"] = history
    if reached:
        meta["reached"] = True
    store.save(step, item, meta)


def _diff(engine: Engine, meta: dict) -> tuple[list[str], set[str], set[str], set[str], bool]:
    """Human-readable differences, envs to start fresh, the state paths to start fresh (new
    gates), the saved paths the differences already account for (removed envs and gates),
    and whether a group size changed (the waiting groups then start fresh)."""
    lines, fresh_envs, resized = [], set(), False
    fresh_paths: set[str] = set()  # in this run only: start fresh
    dropped: set[str] = set()  # in the checkpoint only: dropped
    saved = meta.get("envs", {})
    now = {e.name: e for e in engine.envs}
    sizes = (
        ("batch_groups", engine.config.batch_groups),
        ("groups_per_generation", engine.config.generation),
    )
    for key, value in sizes:
        if key in meta and meta[key] != value:
            lines.append(f"{key}: {meta[key]} in the checkpoint, {value} in this run")
    order = _saved_order(engine, meta)
    if order is not None:
        lines.append(
            f"envs in the order {order} in the checkpoint, {list(engine.env_names)} in this "
            "run: list them in the checkpoint's order (the engine keeps per-env state by "
            "position; with allow_partial it is moved to the new order by name, but a solver "
            "state that indexes envs by position is not)"
        )
    removed = sorted(set(saved) - set(now))
    added = sorted(set(now) - set(saved))
    if removed:
        lines.append(
            f"envs in the checkpoint but not in this run: {removed} (their state is dropped)"
        )
        dropped.update(f"curricula/{n}" for n in removed)
    if added:
        lines.append(f"envs in this run but not in the checkpoint: {added} (they start fresh)")
        fresh_envs.update(added)
    for name in sorted(set(saved) & set(now)):
        s, e = saved[name], now[name]
        if s.get("group_size", e.group_size) != e.group_size:
            lines.append(
                f"env {name!r}: group size {s['group_size']} in the checkpoint, {e.group_size} "
                "now (the groups waiting to train are dropped)"
            )
            resized = True
        if s.get("weight", e.weight) != e.weight:
            lines.append(f"env {name!r}: weight {s['weight']} in the checkpoint, {e.weight} now")
        if s["num_tasks"] != e.num_tasks:
            lines.append(
                f"env {name!r}: pool size {s['num_tasks']} in the checkpoint, {e.num_tasks} now "
                "(its curriculum starts fresh)"
            )
            fresh_envs.add(name)
            continue
        saved_gates, gates = list(s["gates"]), list(e.curriculum.gates)
        gone = [g for g in saved_gates if g not in gates]
        new = [g for g in gates if g not in saved_gates]
        if gone and new:
            lines.append(
                f"env {name!r}: gates {gone} in the checkpoint and {new} in this run "
                f"(renamed? checkpoint gates {saved_gates}, run gates {gates})"
            )
        elif gone:
            lines.append(f"env {name!r}: gates {gone} are in the checkpoint but not in this run")
        elif new:
            lines.append(f"env {name!r}: gates {new} are in this run but not in the checkpoint")
        # Only the gates added start fresh; the others keep their state.
        fresh_paths.update(f"curricula/{name}/gates/{g}" for g in new)
        dropped.update(f"curricula/{name}/gates/{g}" for g in gone)
    return lines, fresh_envs, fresh_paths, dropped, resized


def _saved_order(engine: Engine, meta: dict) -> list[str] | None:
    """The checkpoint's env order when it holds this run's envs in another order, else
    ``None`` (also for checkpoints written before the order was saved)."""
    order = meta.get("env_order")
    if order is None or set(order) != set(engine.env_names):
        return None
    return None if list(order) == list(engine.env_names) else list(order)


def _reorder_envs(
    leaves: dict, order: list[str], names: tuple[str, ...], *, pending: bool = True
) -> int:
    """Moves the engine's per-env leaves from the checkpoint's env ``order`` to ``names`` by
    name: the ``[E]`` counts (zeros for an env the checkpoint lacks; a removed env's groups
    since progress leave the ``counters.since_progress`` total), and with ``pending`` the
    env index of each waiting group to its env's new index; the waiting groups of an env not
    in ``names`` are dropped, the others keep their order. Returns how many were dropped."""
    kept = np.array([n in order for n in names])
    take = np.array([order.index(n) if n in order else 0 for n in names])  # new -> saved
    new_index = np.array([names.index(n) if n in names else -1 for n in order])  # saved -> new
    total, by_env = "counters/since_progress", "since_progress_by_env"
    if total in leaves and by_env in leaves:
        # the total counts every env's groups: a removed env's leave with it (the stall guard
        # read them as this run's)
        gone = np.array([n not in names for n in order])
        counts = np.asarray(leaves[by_env]).astype(np.int64)
        left = int(np.asarray(leaves[total])) - int(counts[gone].sum())
        leaves[total] = np.asarray(max(left, 0), np.asarray(leaves[total]).dtype)
    for path in ("mixer/batches", "mixer/groups", by_env):
        if path in leaves:
            old = np.asarray(leaves[path])
            leaves[path] = np.where(kept, old[take], 0).astype(old.dtype)
    env_path, count_path = "pending/groups/env", "pending/count"
    if not pending or env_path not in leaves or count_path not in leaves:
        return 0
    env = np.asarray(leaves[env_path])
    count = int(np.asarray(leaves[count_path]))
    to = new_index[np.clip(env[:count], 0, len(order) - 1)]
    rows = np.flatnonzero(to >= 0)  # live rows of the envs this run keeps, in order
    for path in [p for p in leaves if p.startswith("pending/groups/")]:
        x = np.asarray(leaves[path])
        out = np.zeros_like(x)  # rows past the count are zeros, as the engine leaves them
        out[: rows.size] = x[rows]
        leaves[path] = out
    leaves[env_path][: rows.size] = to[rows]
    leaves[count_path] = np.asarray(rows.size, np.asarray(leaves[count_path]).dtype)
    return count - rows.size


# Keys of a run's config that may change on resume: how long it runs and how often it saves.
RESUMABLE_KEYS = ("steps", "checkpoint_every")
_ABSENT = "(absent)"


def _flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict) and tree:
        out = {}
        for k, v in tree.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: tree}


def _same(a: Any, b: Any) -> bool:
    """Equal config values; NaN equals NaN (compared as the JSON they are saved as)."""
    return a == b or json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def config_changes(saved: dict | None, now: dict | None) -> dict[str, list]:
    """``{dotted key: [in the checkpoint, now]}`` for every key of the run's config that differs
    (but :data:`RESUMABLE_KEYS`); ``{}`` when this run gives no config (``None``) or the
    checkpoint holds none (``{}`` is also what a run without one saved). A config of ``{}``
    given now is compared: every saved key then reads as removed."""
    if now is None or not saved:
        return {}
    old = _flat(json.loads(json.dumps(saved, default=str)))
    new = _flat(json.loads(json.dumps(now, default=str))) if now else {}
    return {
        k: [old.get(k, _ABSENT), new.get(k, _ABSENT)]
        for k in sorted(set(old) | set(new))
        if k not in RESUMABLE_KEYS and not _same(old.get(k, _ABSENT), new.get(k, _ABSENT))
    }


def _per_task_fields(state: Any, prefix: str) -> list[tuple[str, bool]]:
    """Paths of fields declared per-task (``PER_TASK``) in NamedTuples inside ``state``, each
    with whether its NamedTuple keeps a repeated task's state at its first entry
    (``AT_FIRST_ENTRY``)."""
    out = []

    def walk(node, path):
        if isinstance(node, tuple) and hasattr(node, "_fields"):
            first = bool(getattr(type(node), AT_FIRST_ENTRY_ATTR, False))
            for f in getattr(type(node), PER_TASK_ATTR, ()):
                out.append((f"{path}/{f}", first))
            for f in node._fields:
                walk(getattr(node, f), f"{path}/{f}")
        elif isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{path}/{k}")
        elif isinstance(node, list | tuple):
            for i, v in enumerate(node):
                walk(v, f"{path}/{i}")

    walk(state, prefix)
    return out


def _fingerprint(keys: np.ndarray, bits: int = KEY_BITS) -> str:
    dtype = "<u8" if bits == 64 else "<u4"
    return hashlib.sha256(np.ascontiguousarray(keys, dtype).tobytes()).hexdigest()[:24]


def _keys_as_saved(engine: Engine, bits: int) -> dict[str, np.ndarray]:
    """Each env's keys as a checkpoint with ``bits``-bit keys holds them: ``u64[N]``, or for
    a checkpoint from before 64-bit keys the low 32-bit words (its keys were exactly those)."""
    if bits == 64:
        return {e.name: e.keys for e in engine.envs}
    if bits != 32:
        raise CheckpointMismatch(
            f"the checkpoint's task keys have {bits} bits; this version reads 32 and 64: "
            "resume it with the curriculax version that wrote it"
        )
    return {e.name: (e.keys & _LOW32).astype(np.uint32) for e in engine.envs}


def _positions(old: np.ndarray, new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``new``'s keys its row in ``old`` (one sort, ``O(N log N)``), and which of
    ``new``'s keys ``old`` lacks."""
    order = np.argsort(old, kind="stable")
    at = np.clip(np.searchsorted(old[order], new), 0, len(old) - 1)
    pos = order[at]
    return pos.astype(np.int64), old[pos] != new


def first_entries_follow(perm: np.ndarray, entry_task: np.ndarray) -> np.ndarray:
    """``perm`` (each new entry's row in the saved pool) adjusted for state kept at a task's
    first entry: within each task's copies, the new first entry takes the saved first entry's
    row and the copy that would have taken it takes the new first entry's. Still a
    permutation; each copy's row stays among its task's rows. ``O(N log N)``.

    Args:
      perm: ``int[N]``.
      entry_task: ``int[N]`` each new entry's task (equal values: copies of one task).
    """
    perm = np.asarray(perm, np.int64)
    _, first, task = np.unique(np.asarray(entry_task), return_index=True, return_inverse=True)
    task = task.reshape(-1)
    saved_first = np.full(first.size, perm.size, np.int64)
    np.minimum.at(saved_first, task, perm)  # each task's first row in the saved pool
    holder = np.flatnonzero(perm == saved_first[task])  # the copy that maps to it
    new_first = first[task[holder]]
    out = perm.copy()
    out[new_first], out[holder] = perm[holder], perm[new_first]
    return out


def restore(
    store: CheckpointStore,
    engine: Engine,
    step: int | None = None,
    *,
    allow_partial: bool = False,
    config: dict | None = None,
    resumable: Sequence[str] = (),
) -> EngineState:
    """Restores an engine state saved by :func:`save`.

    Strict by default: a changed env set or env order, a renamed/added/removed gate, a
    changed pool size, group size or env weight, a changed ``batch_groups`` or
    ``groups_per_generation``, a changed state layout, or a run ``config`` that differs from
    the one saved (but for :data:`RESUMABLE_KEYS` and ``resumable``) raises
    :class:`CheckpointMismatch` saying exactly what differs, config keys as
    ``key: old -> new``; saved leaves this run has no place for (a sampler or solver with
    fewer state fields) are named too. With ``allow_partial=True`` new components start
    fresh (a new gate alone, not its env's other gates) and removed ones are dropped, with a
    warning; waiting groups laid out otherwise (another pending capacity) are all dropped,
    their count included; the engine's per-env
    state (mixer counts, no-progress counts, the env of each waiting group) follows the env
    names to this run's order, an added env's counts start at zero and a removed env's waiting
    groups are dropped (the warning counts them). Checkpoints written before the env order was
    saved are not checked for it, and start that per-env state fresh when the env set
    changed. A pool holding the
    same task keys in a different order is always fine: the per-task curriculum state follows
    the keys (a sampler given ``entry_task``, which keeps a repeated task's state at its first
    entry, finds it at the task's new first entry). With an
    engine mesh the state is restored onto the engine's shardings, whatever device count
    saved it; a partial or remapped restore reads the saved arrays onto this run's devices too.
    """
    if step is None:
        step = store.latest_step()
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {store.directory}")
    meta = store.meta(step)
    if meta.get("format") != FORMAT:
        raise CheckpointMismatch(f"checkpoint format {meta.get('format')!r}, expected {FORMAT}")
    lines, fresh_envs, new_paths, dropped, resized = _diff(engine, meta)
    saved_layout = dict(meta.get("layout", {}))
    renamed = {o: n for o, n in RENAMED.items() if o in saved_layout and n not in saved_layout}
    for old, new in renamed.items():
        saved_layout[new] = saved_layout.pop(old)
    changes = config_changes(meta.get("config"), config)
    lines[:0] = [
        f"config {k}: {old!r} -> {new!r}" for k, (old, new) in changes.items() if k not in resumable
    ]
    # Restore onto this run's devices, whatever topology saved the checkpoint.
    abstract = jax.eval_shape(engine.init, jax.random.key(0))
    if engine.state_sharding is not None:
        target_sharding = engine.state_sharding
        keys_sharding = NamedSharding(engine.mesh, PartitionSpec())
    else:
        keys_sharding = make_single_device_sharding(jax.devices()[0])
        target_sharding = jax.tree.map(lambda _: keys_sharding, abstract)
    abstract = jax.tree.map(
        lambda a, sh: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sh),
        abstract,
        target_sharding,
    )

    # Pool keys: the same set in another order is remapped; a different set is a mismatch.
    bits = int(meta.get("key_bits", 32))
    now_keys = _keys_as_saved(engine, bits)
    saved_prints = meta.get("pool_fingerprints", {})
    reordered = [
        e.name
        for e in engine.envs
        if e.name not in fresh_envs
        and saved_prints.get(e.name) != _fingerprint(now_keys[e.name], bits)
    ]
    # Onto this run's devices too: the saved shardings may name devices this process lacks.
    saved = store.restore_leaves(step, keys_sharding) if reordered or lines or renamed else None
    perms: dict[str, np.ndarray] = {}
    for e in engine.envs:
        if e.name not in reordered:
            continue
        old = np.asarray(saved[f"pool_keys/{e.name}"])
        old = key_ints(old) if bits == 64 else old.astype(np.uint64)
        pos, absent = _positions(old, now_keys[e.name].astype(np.uint64))
        if bits == 32 and np.unique(now_keys[e.name]).size < e.num_tasks:
            lines.append(
                f"env {e.name!r}: tasks of this pool share their low 32 key bits, which is all a "
                "checkpoint from before 64-bit keys holds (its curriculum starts fresh)"
            )
            fresh_envs.add(e.name)
            continue
        if absent.any():
            missing = now_keys[e.name][absent]
            lines.append(
                f"env {e.name!r}: {int(absent.sum())} of {e.num_tasks} task keys are not in the "
                f"checkpoint's pool (e.g. {[int(k) for k in missing[:3]]}): a different task "
                "set (its curriculum starts fresh)"
            )
            fresh_envs.add(e.name)
            continue
        perms[e.name] = pos

    # Leaf-level layout changes that the env-level diff did not explain.
    skip = {f"curricula/{n}" for n in fresh_envs} | new_paths
    # The engine's per-env state (mixer and no-progress counts, the env of each waiting group)
    # follows the env names to this run's envs; a checkpoint from before the order was saved
    # has it start fresh when the env set changed.
    per_env = {"pending", "mixer", "since_progress_by_env"}
    order = meta.get("env_order")
    if order is not None and set(order) != set(meta.get("envs", {})):
        order = None
    if set(meta.get("envs", {})) != set(engine.env_names) and order is None:
        skip |= per_env
    if resized:
        skip.add("pending")
    layout = leaf_layout(abstract)
    if saved_layout and "pending" not in skip:
        # Waiting groups are rows up to pending/count: with any of their leaves laid out
        # otherwise (another pending capacity), they all start fresh, count included.
        changed = [
            p
            for p in set(layout) | set(saved_layout)
            if p.startswith("pending/")
            and (
                p not in layout
                or p not in saved_layout
                or tuple(saved_layout[p][0]) != layout[p][0]
                or saved_layout[p][1] != layout[p][1]
            )
        ]
        if changed:
            skip.add("pending")
            lines.append(
                "engine/pending: the waiting groups' layout differs (another batch_groups, "
                "groups_per_generation, pending_capacity or largest group size; the groups "
                "waiting to train are dropped)"
            )

    def under(path: str, prefixes: set[str]) -> bool:
        return any(path == s or path.startswith(s + "/") for s in prefixes)

    # ``[E]`` leaves: their length changes with the env set, and they are moved by name.
    by_name = per_env - {"pending"} if order is not None else set()
    for path, (shape, dtype) in layout.items():
        if under(path, skip | by_name):
            continue
        got = saved_layout.get(path)
        if got is None:
            lines.append(f"engine/{path}: not in the checkpoint")
        elif tuple(got[0]) != shape or got[1] != dtype:
            lines.append(
                f"engine/{path}: {got[1]}{list(got[0])} in the checkpoint, "
                f"{dtype}{list(shape)} in this run"
            )
    # Saved leaves this run has no place for (a sampler, gate or solver with fewer fields).
    for path in sorted(set(saved_layout) - set(layout)):
        if not under(path, skip | dropped):
            lines.append(f"engine/{path}: in the checkpoint, not in this run")
    if lines and not allow_partial:
        raise CheckpointMismatch(
            f"checkpoint step {step} in {store.directory} does not match this run:\n  - "
            + "\n  - ".join(lines)
            + "\nPass allow_partial=True (--allow-partial) to resume anyway: new components "
            "start fresh, removed ones are dropped, and the changes are recorded in "
            "summary.json."
        )

    if not lines and not perms and not renamed:
        shape = (lambda n: (n, 2)) if bits == 64 else (lambda n: (n,))
        keys = {
            e.name: jax.ShapeDtypeStruct(shape(e.num_tasks), np.uint32, sharding=keys_sharding)
            for e in engine.envs
        }
        return store.restore(step, {"engine": abstract, "pool_keys": keys})["engine"]

    if saved is None:
        saved = store.restore_leaves(step, keys_sharding)
    leaves = {p[len("engine/") :]: v for p, v in saved.items() if p.startswith("engine/")}
    for old, new in renamed.items():
        leaves[new] = leaves.pop(old)
    if order is not None and list(order) != list(engine.env_names):
        # before the pool remap, which finds an env's rows by its index
        removed = _reorder_envs(leaves, order, engine.env_names, pending="pending" not in skip)
        if removed:
            gone = sorted(set(order) - set(engine.env_names))
            lines.append(
                f"{removed} admitted group(s) of the envs {gone} were waiting to train (they "
                "are dropped)"
            )
    for name, perm in perms.items():
        entry_task = engine.envs[engine.env_names.index(name)].curriculum.sampler.entry_task
        at_first = perm if entry_task is None else first_entries_follow(perm, entry_task)
        for path, first in _per_task_fields(abstract.curricula[name], f"curricula/{name}"):
            if path in leaves:
                # state kept at first entries: the sampler's (its entry_task says where)
                rows = at_first if first and path.startswith(f"curricula/{name}/sampler/") else perm
                leaves[path] = np.asarray(leaves[path])[rows]
        _remap_pending_ids(leaves, engine.env_names.index(name), perm)
    fresh = engine.init()
    state, fresh_paths = assemble(abstract, leaves, fresh, skip=frozenset(skip))
    if lines:
        warnings.warn(
            f"partial restore of checkpoint step {step}:\n  - "
            + "\n  - ".join(lines)
            + (f"\nfresh state for: {sorted(_summarize(fresh_paths))}" if fresh_paths else ""),
            stacklevel=2,
        )
    if engine.state_sharding is not None:
        return jax.device_put(state, engine.state_sharding)
    return jax.tree.map(jax.numpy.asarray, state)


def restore_latest(
    store: CheckpointStore,
    engine: Engine,
    *,
    allow_partial: bool = False,
    config=None,
    resumable: Sequence[str] = (),
) -> tuple[EngineState, int, dict]:
    """Restores the newest checkpoint that reads back, newest first.

    A checkpoint that cannot be read (truncated or garbage files, missing metadata) is skipped
    with a warning naming its step and the cause in one line; one that does not fit this run
    raises :class:`CheckpointMismatch` at once (an older one would not fit either), and so does
    any other error that is not a failure to read its files (:func:`is_read_failure`): it is
    raised as it is, not taken for damage.

    Returns:
      ``(state, step, meta)``: the state, its step, and its JSON item.

    Raises:
      CheckpointUnreadable: none of the checkpoints reads back (each is listed with its cause).
    """
    quiet_abandoned_io()  # a damaged checkpoint's other reads report as they finish
    skipped: list[tuple[int, str]] = []
    for step in reversed(store.steps()):
        with warnings.catch_warnings():
            # A failed read leaves Orbax coroutines that were never awaited; Python warns for
            # each when it collects them, at whatever line runs then. Collect them here.
            warnings.filterwarnings(
                "ignore", message=r"coroutine '.*' was never awaited", category=RuntimeWarning
            )
            failed = False
            try:
                meta = store.meta(step)
                state = restore(
                    store,
                    engine,
                    step,
                    allow_partial=allow_partial,
                    config=config,
                    resumable=resumable,
                )
            except CheckpointMismatch:
                raise
            except Exception as e:  # whatever Orbax, TensorStore or JSON raise on damaged files
                if not is_read_failure(e, store._step_dir(step)):
                    raise  # no sign of damage: the older checkpoints would fail the same way
                skipped.append((step, unreadable_reason(e, store._step_dir(step))))
                failed = True
            if failed:
                gc.collect()  # outside the handler, which still holds the failed read's frames
                continue
        if skipped:
            warnings.warn(
                f"resuming from checkpoint step {step} in {store.directory}: newer checkpoints "
                "could not be restored and were skipped:\n"
                + "\n".join(f"  - step {s}: {why}" for s, why in skipped),
                stacklevel=5,  # restore_latest, _Checkpoints.restore, _run, run -> run's caller
            )
        return state, step, meta
    raise CheckpointUnreadable(
        f"no checkpoint in {store.directory} can be restored:\n"
        + "\n".join(f"  - step {s}: {why}" for s, why in skipped)
        + "\nRestore a copy of the directory, or start over without resume and with "
        "overwrite=True (--overwrite), which deletes the run."
    )


def _remap_pending_ids(leaves: dict, env_index: int, perm: np.ndarray) -> None:
    """Pending rows refer to pool positions; map them to the reordered pool's positions.

    Only ids in ``[0, len(perm))`` are pool positions: a sampler's own tasks past the pool
    (a frontier sampler's generated tasks, ids ``N + slot``) and padding keep their ids.
    """
    ids_path, env_path = "pending/groups/task_ids", "pending/groups/env"
    if ids_path not in leaves or env_path not in leaves:
        return
    inverse = np.empty_like(perm)
    inverse[perm] = np.arange(len(perm))
    ids = np.asarray(leaves[ids_path]).copy()
    rows = (np.asarray(leaves[env_path]) == env_index) & (ids >= 0) & (ids < len(perm))
    ids[rows] = inverse[ids[rows]]
    leaves[ids_path] = ids


def _summarize(paths: list[str]) -> set[str]:
    out = set()
    for p in paths:
        parts = p.split("/")
        if parts[0] == "curricula" and len(parts) > 2:
            out.add("/".join(parts[:4] if parts[2] == "gates" else parts[:3]))
        else:
            out.add(parts[0])
    return out
