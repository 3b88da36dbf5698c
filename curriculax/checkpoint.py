"""Orbax checkpoint helpers: arrays as one item, run metadata as a JSON item.

Arrays are restored against an abstract tree from ``jax.eval_shape`` (so NamedTuples come
back as NamedTuples, with shardings when given), or, for a partial restore, by matching leaf
paths between the saved tree and the expected one. Paths are strings like
``curricula/math/gates/zero_advantage/rejected``: NamedTuple fields and dict keys by name,
sequence items by index, the same on both sides of a save.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

from curriculax._processes import agree, sync

__all__ = [
    "CheckpointSaveError",
    "CheckpointStore",
    "assemble",
    "layout_diff",
    "leaf_layout",
    "path_str",
]


class CheckpointSaveError(RuntimeError):
    """A checkpoint could not be written; the message names the step, the directory and the
    cause. The checkpoints committed before it are untouched."""


def one_line(error: BaseException | str, limit: int = 240) -> str:
    """A short one-line account of ``error`` (TensorStore messages carry a long JSON spec)."""
    if isinstance(error, BaseException):
        text = str(error).split(" [tensorstore_spec")[0].split(" See full TensorStore")[0]
        text = text.strip()
        lines = [x.strip() for x in text.splitlines() if x.strip()]
        text = f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    else:
        text = error
    if len(text) > limit:
        text = text[: limit // 2 - 3] + " ... " + text[-(limit // 2 - 2) :]
    return text


# TensorStore's status codes for a data file that cannot be read, in words.
_STATUS_WORDS = {
    "OUT_OF_RANGE": "is shorter than the checkpoint records (a truncated file)",
    "DATA_LOSS": "is corrupt (its bytes do not decode)",
    "NOT_FOUND": "is missing",
    "INVALID_ARGUMENT": "does not hold what the checkpoint records (a damaged file)",
}


def _chain(error: BaseException):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


# Where Orbax renames a step it deletes (beyond max_to_keep), whole, before it is removed.
_DELETING = ".deleting"
# Orbax writes step N in "N.orbax-checkpoint-tmp" (older versions add "-<timestamp>") and
# renames it to "N" once committed; one left behind is a save a killed process never finished.
_UNFINISHED_STEP = re.compile(r"\d+\.orbax-checkpoint-tmp(-\d+)?")


def unfinished_save(name: str) -> bool:
    """Whether ``name`` (an entry of a checkpoint directory) is a step Orbax is writing, or was
    when its process stopped (``N.orbax-checkpoint-tmp``)."""
    return _UNFINISHED_STEP.fullmatch(name) is not None


# check_writable's probe folders: "<prefix><process index>-<random>".
_PROBE = ".write-probe-"

# Files every committed step holds (relative to the step's directory).
_STEP_FILES = ("meta/metadata", "state/_METADATA", "state/manifest.ocdbt")


# The items of each checkpoint a run saves (subfolders of its step folder).
ITEMS = ("state", "meta")


def holds_items(folder: str | os.PathLike, item_names: tuple[str, ...] = ITEMS) -> bool:
    """Whether step ``folder`` is a checkpoint of a store of ``item_names``: it holds a folder
    for each item. Any other numbered folder (another Orbax manager's step, a user's folder)
    is foreign: a store refuses to save beside it, and ``--overwrite`` does not delete it."""
    return all(os.path.isdir(os.path.join(folder, n)) for n in item_names)


def is_step_name(name: str) -> bool:
    """Whether ``name`` is what Orbax names a committed step: a number written without
    leading zeros (``7``, not ``007``)."""
    return name.isascii() and name.isdigit() and str(int(name)) == name


def staging_dir(directory: str | os.PathLike) -> str:
    """Where a store of ``directory`` writes the replacement of an existing step before it
    swaps it in: a hidden folder beside the directory's real path (``checkpoints/`` may be a
    link to another file system; a rename does not cross one)."""
    real = os.path.realpath(os.path.abspath(os.fspath(directory)))
    parent, name = os.path.split(real)
    return os.path.join(parent, f".{name}.replacing")


def recover_replacement(directory: str | os.PathLike) -> bool:
    """Finishes a replacement a crash interrupted between its two renames: each committed new
    copy in :func:`staging_dir` whose step is missing from ``directory`` moves in (nothing is
    deleted). Returns whether a step moved in. Process 0 only; others return ``False``."""
    staging = staging_dir(directory)
    if jax.process_index() != 0 or not os.path.isdir(staging):
        return False
    directory = os.path.abspath(os.fspath(directory))
    moved = False
    for name in os.listdir(staging):
        target = os.path.join(directory, name)
        if is_step_name(name) and not os.path.lexists(target):
            # A live run between its renames (a reader opened beside it) does the same.
            with contextlib.suppress(FileNotFoundError):
                os.rename(os.path.join(staging, name), target)
                moved = True
    return moved


# What glob (which Orbax finds a step's files with) does not take literally in a path.
_PATTERN_CHARS = "[*?\\"


def unsafe_path(directory: str | os.PathLike) -> str | None:
    """Why Orbax cannot write checkpoints in ``directory`` (or in its :func:`staging_dir`), in
    a sentence, or ``None``. Orbax finds a step's data files with ``glob``, the path taken as a
    pattern: where the path holds a pattern character (``[``, ``*``, ``?``) or a backslash, it
    finds none (or another folder's) and commits the step without its data."""
    directory = os.path.abspath(os.fspath(directory))
    for path in (directory, staging_dir(directory)):
        chars = sorted({c for c in path if c in _PATTERN_CHARS})
        if chars:
            where = "its path" if path == directory else f"the folder of its replacements {path}"
            return (
                f"cannot keep checkpoints in {directory}: {where} holds "
                f"{' '.join(repr(c) for c in chars)}, which Orbax takes for a file name "
                "pattern (its checkpoints would be saved without their data). Choose a path "
                "without [ * ? or \\"
            )
    return None


def _required_files(items: Mapping[str, Any]) -> tuple[str, ...]:
    """The files a committed step of these save args must hold (relative to its folder)."""
    files = []
    for name, args in items.items():
        if isinstance(args, ocp.args.StandardSave | ocp.args.PyTreeSave):
            files.append(f"{name}/_METADATA")
            if jax.tree.leaves(args.item):  # a tree of only None writes no data
                files.append(f"{name}/manifest.ocdbt")
        elif isinstance(args, ocp.args.JsonSave):
            files.append(f"{name}/metadata")
        else:
            files.append(name)
    return tuple(files)


def unreadable_reason(error: BaseException, step_dir: str | None = None) -> str:
    """Why a checkpoint could not be read, in words: a file of ``step_dir`` that is missing,
    which array and data file cannot be read and what is wrong with it (TensorStore's status,
    not its spec), or :func:`one_line`'s account when the cause is none of those."""
    if step_dir is not None:
        for name in _STEP_FILES:
            if not os.path.exists(os.path.join(step_dir, name)):
                return f"a file is missing: {os.path.join(step_dir, name)}"
    for e in _chain(error):
        text = str(e)
        status = re.match(r"^([A-Z_]+): ", text)
        if status and status.group(1) in _STATUS_WORDS:
            array = re.search(r'Error reading "([^"/]+)/', text)
            data = re.search(r'local file "([^"]*/d/[^"/]+)"', text)
            what = f"array {array.group(1).replace('.', '/')}" if array else "an array"
            where = f" (data file {os.path.basename(data.group(1))})" if data else ""
            return f"the data of {what}{where} {_STATUS_WORDS[status.group(1)]}"
    for e in _chain(error):
        index = _index_damage(str(e))
        if index is not None:
            return (
                f"the index of data file {os.path.basename(index)} is corrupt (it does not decode)"
            )
        if isinstance(e, FileNotFoundError):
            return f"a file is missing: {str(e).strip()}"
        if isinstance(e, json.JSONDecodeError):
            return f"its metadata is not valid JSON ({e.msg} at line {e.lineno})"
    return one_line(error)


# TensorStore's status codes for a file that cannot be read: those above, a file whose bytes
# do not parse (FAILED_PRECONDITION) and one this process may not read.
_READ_STATUSES = (*_STATUS_WORDS, "FAILED_PRECONDITION", "PERMISSION_DENIED")


def is_read_failure(error: BaseException, step_dir: str | None = None) -> bool:
    """Whether ``error`` (raised restoring the checkpoint of ``step_dir``) is a failure to read
    its files: a file missing, unreadable or damaged (TensorStore's status, an OS error, JSON
    that does not decode). An error of any other kind (a checkpoint that reads back but cannot
    be restored here, say Orbax's topology mismatch) is not: it is no sign of damage."""
    files = () if step_dir is None else _STEP_FILES
    if any(not os.path.exists(os.path.join(step_dir, n)) for n in files):
        return True
    for e in _chain(error):
        if isinstance(e, OSError | json.JSONDecodeError | UnicodeDecodeError):
            return True
        status = re.match(r"^([A-Z_]+): ", str(e))
        if status and status.group(1) in _READ_STATUSES:
            return True
        if _index_damage(str(e)):
            return True
    return False


def _index_damage(text: str) -> str | None:
    """The data file whose index (an OCDBT b-tree node) does not decode, when ``text`` says
    so: TensorStore reports it with no status code (one flipped bit in a data file's last
    bytes, measured)."""
    if "Error decoding b-tree node" not in text and "Data corruption detected" not in text:
        return None
    data = re.search(r'local file "([^"]*/d/[^"/]+)"', text)
    return data.group(1) if data else "?"


class _NoTracebacks(logging.Filter):
    """Orbax logs every failed background save with a traceback of a hundred lines; the
    store raises the cause itself, so its logs keep one line each."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "orbax" in record.pathname:
            record.exc_info = None
            record.exc_text = None
        return True


class _AbandonedOrbaxRead(logging.Filter):
    """Drops asyncio's "exception was never retrieved" records for Orbax reads (a failed
    restore's other reads); every other asyncio record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "never retrieved" not in str(record.msg) or not record.exc_info:
            return True
        # A TensorStore read's error can reach the future with no Python frames at all; its
        # message always carries the TensorStore spec it failed on.
        if "tensorstore_spec" in str(record.exc_info[1]):
            return False
        tb = record.exc_info[2]
        while tb is not None:
            if "orbax" in tb.tb_frame.f_code.co_filename:
                return False
            tb = tb.tb_next
        return True


def quiet_abandoned_io() -> None:
    """Drops the noise of a failed restore or save (one traceback per array still in flight).

    When one array of a checkpoint fails to read or write (a damaged file, a full disk), Orbax
    closes its event loop while TensorStore is still reading or writing the others; each of
    those then reports "Event loop is closed" as an unraisable exception, tens of tracebacks in
    all, printed from TensorStore's threads whenever they finish (so it is installed before the
    first save or restore, not when the failure is noticed). Only that exception is dropped;
    every other one reaches the previous hook. Installed once.
    """
    previous = sys.unraisablehook
    if getattr(previous, "_curriculax_quiet", False):
        return
    # The same abandoned reads can also end as asyncio futures whose Orbax exception nobody
    # retrieves; asyncio logs each with its traceback when the future is collected.
    logging.getLogger("asyncio").addFilter(_AbandonedOrbaxRead())

    def hook(unraisable):
        e = unraisable.exc_value
        if isinstance(e, RuntimeError) and str(e) == "Event loop is closed":
            return
        if _from_orbax(unraisable):  # an abandoned read's coroutine, collected later
            return
        previous(unraisable)

    hook._curriculax_quiet = True
    sys.unraisablehook = hook


def _from_orbax(unraisable) -> bool:
    """An unraisable exception of an Orbax coroutine (``Exception ignored in: <coroutine
    ... _read_array_index_and_device_put>``) or raised through Orbax's code."""
    code = getattr(unraisable.object, "cr_code", None) or getattr(
        unraisable.object, "gi_code", None
    )
    if code is not None and "orbax" in code.co_filename:
        return True
    tb = unraisable.exc_traceback
    while tb is not None:
        if "orbax" in tb.tb_frame.f_code.co_filename:
            return True
        tb = tb.tb_next
    return False


def path_str(path: tuple) -> str:
    """``a/b/0/c`` for a jax key path (attribute, dict key and sequence index entries)."""
    parts = []
    for entry in path:
        if isinstance(entry, jax.tree_util.GetAttrKey):
            parts.append(entry.name)
        elif isinstance(entry, jax.tree_util.DictKey):
            parts.append(str(entry.key))
        elif isinstance(entry, jax.tree_util.SequenceKey):
            parts.append(str(entry.idx))
        elif isinstance(entry, jax.tree_util.FlattenedIndexKey):
            parts.append(str(entry.key))
        else:
            parts.append(str(entry))
    return "/".join(parts)


def dtype_name(dtype: Any) -> str:
    """A leaf dtype's name: numpy's (``float32``), or for a JAX extended dtype, which numpy
    does not know (a typed PRNG key, ``key<fry>``), JAX's."""
    if jax.dtypes.issubdtype(dtype, jax.dtypes.extended):
        return str(dtype)
    return np.dtype(dtype).name


def leaf_layout(tree: Any) -> dict[str, tuple[tuple[int, ...], str]]:
    """``{path: (shape, dtype name)}`` for every array leaf of ``tree`` (arrays or shapes)."""
    out = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        out[path_str(path)] = (tuple(int(d) for d in np.shape(leaf)), dtype_name(leaf.dtype))
    return out


def refuse_zero_size(tree: Any, what: str) -> None:
    """Raises ``ValueError`` naming each zero-size array leaf of ``tree`` (by
    :func:`path_str`): Orbax refuses to save one, and only once the save is under way (its
    other writers then wait minutes for it before the process can exit). ``what`` is what
    could not be saved, as the message's first words (``cannot save <what>: ...``).
    """
    empty = [
        f"{path_str(path) or '(the whole tree)'} ({dtype_name(leaf.dtype)}{list(np.shape(leaf))})"
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]
        if 0 in np.shape(leaf)
    ]
    if empty:
        raise ValueError(
            f"cannot save {what}: Orbax cannot save zero-size arrays, and {len(empty)} "
            f"leaf(s) of the state have size 0: {', '.join(empty[:5])}"
            f"{' ...' if len(empty) > 5 else ''}. Give each at least one element (a "
            "placeholder of shape (1,) will do) or keep it out of the state"
        )


def layout_diff(
    saved: Mapping[str, tuple[tuple[int, ...], str]],
    expected: Mapping[str, tuple[tuple[int, ...], str]],
) -> list[str]:
    """One line per leaf path that differs between two :func:`leaf_layout` results: in the
    checkpoint only, expected only, or saved with another shape or dtype."""
    lines = []
    for p in sorted(set(saved) | set(expected)):
        if p not in expected:
            lines.append(f"{p}: in the checkpoint, not in this state")
        elif p not in saved:
            lines.append(f"{p}: in this state, not in the checkpoint")
        else:
            (s_shape, s_dtype), (e_shape, e_dtype) = saved[p], expected[p]
            if tuple(s_shape) != tuple(e_shape) or s_dtype != e_dtype:
                lines.append(
                    f"{p}: {s_dtype}{list(s_shape)} in the checkpoint, "
                    f"{e_dtype}{list(e_shape)} expected"
                )
    return lines


def assemble(
    like: Any, saved: Mapping[str, Any], fresh: Any, *, skip: frozenset[str] = frozenset()
) -> tuple[Any, list[str]]:
    """Builds a tree shaped like ``like`` from saved leaves by path, else from ``fresh``.

    Args:
      like: the expected tree (arrays or ``ShapeDtypeStruct``), e.g. from ``jax.eval_shape``.
      saved: ``{path: array}`` restored leaves.
      fresh: a concrete tree with ``like``'s structure, used where nothing fits.
      skip: path prefixes never taken from ``saved``.

    Returns:
      ``(tree, fresh_paths)``: the tree and the paths that came from ``fresh``.
    """
    like_flat, treedef = jax.tree_util.tree_flatten_with_path(like)
    fresh_leaves = jax.tree.leaves(fresh)
    leaves, fresh_paths = [], []
    for (path, want), new in zip(like_flat, fresh_leaves):
        p = path_str(path)
        got = saved.get(p)
        skipped = any(p == s or p.startswith(s + "/") for s in skip)
        if (
            got is not None
            and not skipped
            and tuple(np.shape(got)) == tuple(want.shape)
            and dtype_name(got.dtype) == dtype_name(want.dtype)
        ):
            leaves.append(got)
        else:
            leaves.append(new)
            fresh_paths.append(p)
    return jax.tree_util.tree_unflatten(treedef, leaves), fresh_paths


class CheckpointStore:
    """A directory of checkpoints, each an array item (``state``) plus a JSON item (``meta``).

    Saves are asynchronous; a failed save raises :class:`CheckpointSaveError` from the next
    call to :meth:`check`, :meth:`wait`, :meth:`save` or :meth:`close`. A save never starts in
    a directory it cannot write to (it raises at once instead), and a good checkpoint is never
    deleted before its replacement is committed. Opening one installs
    :func:`quiet_abandoned_io` (process-wide, once): a failed save's other writes, still in
    flight, would each print a traceback.

    Orbax takes every numbered folder in the directory for a checkpoint and deletes the oldest
    beyond ``max_to_keep``: a save refuses (before writing anything) to run where a numbered
    folder lacks this store's items, naming each, so nothing else kept there is deleted. An old
    step is first renamed, whole, into the hidden folder ``.deleting`` of the directory and
    removed from there, so a process killed while deleting leaves no half-deleted numbered
    folder behind. What a killed process leaves (that folder, a step it was writing, a write
    probe) is removed by the next store that saves there, before its save and after it; a store
    that only reads deletes nothing, so opening one beside a live run is safe.

    A committed step is checked for the files its items write (Orbax can commit a step
    without its data, as where the path holds glob characters; such paths are refused when
    the store opens, see :func:`unsafe_path`): one that lacks any fails the save.

    Args:
      directory: where checkpoints live (made absolute; created on first save). A path
        holding ``[``, ``*``, ``?`` or ``\\`` is refused (ValueError).
      max_to_keep: how many recent checkpoints to keep (None: all).
      item_names: the items of each checkpoint (subfolders of its step folder);
        :meth:`save` writes ``("state", "meta")``, :meth:`save_items` any.
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        *,
        max_to_keep: int | None = 3,
        item_names: tuple[str, ...] = ITEMS,
    ):
        if max_to_keep is not None and max_to_keep < 1:
            raise ValueError(f"max_to_keep must be >= 1, got {max_to_keep}")
        self.directory = os.path.abspath(os.fspath(directory))
        problem = unsafe_path(self.directory)
        if problem is not None:
            raise ValueError(problem)
        self._max_to_keep = max_to_keep
        self._item_names = tuple(item_names)
        # Replacements of an existing step are written here first (outside Orbax's directory).
        self._staging = staging_dir(self.directory)
        self._required: tuple[str, ...] = ()  # the files the save in flight must commit
        self._recover_replacement()
        self._filter = _NoTracebacks()
        logging.getLogger("absl").addFilter(self._filter)
        quiet_abandoned_io()  # a failed save's other writes report as they finish
        self._in_flight: int | None = None
        self._closed = False
        self._manager = self._open(self.directory)

    def _open(self, directory: str) -> ocp.CheckpointManager:
        return ocp.CheckpointManager(
            directory,
            options=ocp.CheckpointManagerOptions(
                max_to_keep=self._max_to_keep, create=True, todelete_subdir=_DELETING
            ),
            item_names=self._item_names,
        )

    def steps(self) -> list[int]:
        return sorted(self._manager.all_steps())

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def _failed(self, step: int | None, cause: BaseException | str) -> CheckpointSaveError:
        at = "" if step is None else f" step {step}"
        return CheckpointSaveError(
            f"could not save checkpoint{at} in {self.directory}: {one_line(cause)}"
        )

    def check_writable(self) -> None:
        """Raises :class:`CheckpointSaveError` if a save could not start in the directory (it
        is a file, or read-only). Orbax would start the save anyway and leave threads waiting
        for a directory that never appears."""
        prefix = f"{_PROBE}{jax.process_index()}-"
        try:
            os.makedirs(self.directory, exist_ok=True)
            for name in os.listdir(self.directory):  # this process's, left by a kill
                if name.startswith(prefix):
                    os.rmdir(os.path.join(self.directory, name))
            os.rmdir(tempfile.mkdtemp(prefix=prefix, dir=self.directory))
        except OSError as e:
            raise self._failed(None, e) from None

    def foreign_steps(self) -> list[str]:
        """The numbered folders of the directory that are not checkpoints of this store's
        items (each lacks one of them): Orbax would count them as steps and delete them."""

        return [
            self._step_dir(step)
            for step in self.steps()
            if not holds_items(self._step_dir(step), self._item_names)
        ]

    def save(self, step: int, state: Any, meta: Mapping[str, Any]) -> None:
        """Saves (asynchronously; :meth:`wait` before reading back or exiting), replacing a
        checkpoint already at ``step`` only once the new one is committed (Orbax alone would
        skip the save silently).

        Raises:
          ValueError: a numbered folder of the directory is not a checkpoint of this store
            (:meth:`foreign_steps`), or a leaf of ``state`` has size 0 (Orbax cannot save
            it, see :func:`refuse_zero_size`); nothing is written.
        """
        self.save_items(
            step, state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(dict(meta))
        )

    def save_items(self, step: int, **items: Any) -> None:
        """:meth:`save` with each item's Orbax save args given (``item_names`` as keys)."""
        if set(items) != set(self._item_names):
            raise ValueError(f"save_items takes the items {self._item_names}, got {sorted(items)}")
        for args in items.values():  # else Orbax refuses once the save is under way
            if isinstance(args, ocp.args.StandardSave | ocp.args.PyTreeSave):
                refuse_zero_size(args.item, f"checkpoint step {step} in {self.directory}")
        self.wait()
        self._finish_replacement()  # one of its own this store failed to finish
        foreign = self.foreign_steps()
        if foreign:
            raise ValueError(
                f"refusing to save in {self.directory}: {len(foreign)} numbered folder(s) there "
                f"are not checkpoints of this kind ({', '.join(foreign[:5])}"
                f"{' ...' if len(foreign) > 5 else ''}), and Orbax would delete them as old "
                "steps; move them or save elsewhere (one holding some of this store's items and "
                "no _CHECKPOINT_METADATA is an old step whose deletion was cut short by an "
                "earlier version: delete it)"
            )
        self.check_writable()
        self._remove_leftovers()
        args = ocp.args.Composite(**items)
        self._required = _required_files(items)
        if step in self._manager.all_steps():
            self._replace(step, args)
            return
        try:
            self._manager.save(step, args=args, force=True)
        except Exception as e:
            raise self._failed(step, e) from e
        self._in_flight = step

    def _replace(self, step: int, args: Any) -> None:
        """Writes ``step`` beside the directory, waits for the commit, then swaps it in."""
        primary = jax.process_index() == 0
        if primary and os.path.isdir(self._staging):
            shutil.rmtree(self._staging)
        sync("curriculax-replace-start")
        staging = self._open(self._staging)
        try:
            staging.save(step, args=args, force=True)
            staging.wait_until_finished()
        except Exception as e:
            raise self._failed(step, e) from e
        finally:
            staging.close()
        new = os.path.join(self._staging, str(step))
        # Process 0 checks the copy and moves it in, and every process raises with it or goes
        # on: a check on each process raced process 0's renames (the copy had moved), and the
        # one that raised left the others waiting forever.
        problem = None
        if primary:
            try:
                if not os.path.isdir(new):
                    raise self._failed(step, "the replacement was not committed")
                self._check_committed(step, new)  # else the good copy stays
                old, target = os.path.join(self._staging, f"old-{step}"), self._step_dir(step)
                try:
                    os.rename(target, old)  # from here to the next rename, recovery moves `new` in
                    try:
                        os.rename(new, target)
                    except FileNotFoundError:  # a store opened meanwhile moved it in
                        if not os.path.isdir(target):
                            raise
                    shutil.rmtree(self._staging)
                except OSError as e:
                    raise self._failed(step, e) from e
            except CheckpointSaveError as e:
                problem = e
        if agree(problem is not None):
            raise problem or self._failed(step, "process 0 could not move the replacement in")
        self._manager.reload()

    def _remove_leftovers(self) -> None:
        """Removes (on the primary process) the old steps Orbax renamed into ``.deleting``, the
        unfinished steps a killed process left (``N.orbax-checkpoint-tmp``) and the staging
        folder of a replacement it cut short.

        Called only by a store that saves, with none of its saves in flight: Orbax renames into
        ``.deleting`` only while finishing a save, and one process saves in a directory at a
        time. Called before each save starts and after each finishes.
        """
        if jax.process_index() != 0:
            return
        self._finish_replacement()  # a committed copy whose step is missing moves in first
        shutil.rmtree(self._staging, ignore_errors=True)
        if not os.path.isdir(self.directory):
            return
        for name in os.listdir(self.directory):
            if name == _DELETING or unfinished_save(name):
                shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)

    def _finish_replacement(self) -> None:
        """:meth:`_recover_replacement` for an open store (its Orbax manager relists steps)."""
        if self._recover_replacement():
            self._manager.reload()

    def _step_dir(self, step: int) -> str:
        return os.path.join(self.directory, str(step))

    def _recover_replacement(self) -> bool:
        """:func:`recover_replacement` of this directory; the rest of the staging folder is
        left to the next save (:meth:`_remove_leftovers`). Returns whether a step moved in."""
        return recover_replacement(self.directory)

    def _check_committed(self, step: int, folder: str) -> None:
        """Raises :class:`CheckpointSaveError` if committed step ``folder`` lacks a file its
        items write (Orbax commits a step whose data it could not find without a word)."""
        missing = [f for f in self._required if not os.path.exists(os.path.join(folder, f))]
        if missing:
            raise self._failed(
                step,
                f"it was committed without {', '.join(os.path.join(folder, f) for f in missing)}"
                " (its data is missing)",
            )

    def check(self) -> None:
        """Raises :class:`CheckpointSaveError` if the last save has finished and failed; returns
        at once while it is still in progress."""
        if self._in_flight is not None and not self._manager.is_saving_in_progress():
            self.wait()

    def wait(self) -> None:
        """Waits for the last save; raises :class:`CheckpointSaveError` if it failed."""
        step, self._in_flight = self._in_flight, None
        try:
            self._manager.wait_until_finished()
        except Exception as e:
            raise self._failed(step, e) from e
        if step is not None:
            if not os.path.isdir(self._step_dir(step)):
                raise self._failed(step, "it was not committed")
            self._check_committed(step, self._step_dir(step))
            self._remove_leftovers()

    def meta(self, step: int) -> dict:
        out = self._manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
        return dict(out["meta"])

    def restore(self, step: int, abstract: Any) -> Any:
        """Restores the array item into ``abstract``'s structure (exact layout required)."""
        out = self._manager.restore(
            step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract))
        )
        return out["state"]

    def restore_items(self, step: int, **items: Any) -> dict[str, Any]:
        """The items of ``step`` restored with the Orbax restore args given per item name."""
        return dict(self._manager.restore(step, args=ocp.args.Composite(**items)))

    def restore_leaves(
        self, step: int, sharding: jax.sharding.Sharding | None = None
    ) -> dict[str, Any]:
        """Restores the array item as saved: ``{path: array}``, each array saved with a
        sharding whole on ``sharding`` (default: this process's first device), whatever
        devices saved it (Orbax refuses a saved sharding over devices this process lacks)."""
        if sharding is None:
            sharding = jax.sharding.make_single_device_sharding(jax.local_devices()[0])
        # The saved arrays' shapes and dtypes, read from the item's own files: the manager
        # knows an item's metadata only once an earlier save or restore registered its handler.
        handler = ocp.StandardCheckpointHandler()
        try:
            saved = handler.metadata(epath.Path(self._step_dir(step)) / "state")
        finally:
            handler.close()

        def target(m: Any) -> Any:
            if not isinstance(m, ocp.metadata.ArrayMetadata):
                return m
            # An array saved from numpy (no sharding) is restored as numpy.
            on = None if m.sharding is None else sharding
            return jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=on)

        saved = getattr(saved, "tree", saved)  # the tree of a TreeMetadata (or the tree itself)
        item = jax.tree.map(target, saved, is_leaf=lambda m: isinstance(m, ocp.metadata.Metadata))
        out = self._manager.restore(
            step, args=ocp.args.Composite(state=ocp.args.StandardRestore(item))
        )
        flat = jax.tree_util.tree_flatten_with_path(out["state"])[0]
        return {path_str(p): leaf for p, leaf in flat}

    def close(self) -> None:
        """Waits for the last save and closes the store (raising if that save failed); a
        second call does nothing."""
        if self._closed:
            return
        self._closed = True
        try:
            self.wait()
        finally:
            with contextlib.suppress(Exception):  # a failed save was raised by wait() above
                self._manager.close()
            logging.getLogger("absl").removeFilter(self._filter)
