"""Orbax checkpoint helpers: arrays as one item, run metadata as a JSON item.

Arrays are restored against an abstract tree from ``jax.eval_shape`` (so NamedTuples come
back as NamedTuples, with shardings when given), or, for a partial restore, by matching leaf
paths between the saved tree and the expected one. Paths are strings like
``curricula/math/gates/zero_advantage/rejected``: NamedTuple fields and dict keys by name,
sequence items by index, the same on both sides of a save.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

__all__ = ["CheckpointStore", "assemble", "layout_diff", "leaf_layout", "path_str"]


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


def leaf_layout(tree: Any) -> dict[str, tuple[tuple[int, ...], str]]:
    """``{path: (shape, dtype name)}`` for every array leaf of ``tree`` (arrays or shapes)."""
    out = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        out[path_str(path)] = (tuple(int(d) for d in np.shape(leaf)), np.dtype(leaf.dtype).name)
    return out


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
            and np.dtype(got.dtype) == np.dtype(want.dtype)
        ):
            leaves.append(got)
        else:
            leaves.append(new)
            fresh_paths.append(p)
    return jax.tree_util.tree_unflatten(treedef, leaves), fresh_paths


class CheckpointStore:
    """A directory of checkpoints, each an array item (``state``) plus a JSON item (``meta``).

    Args:
      directory: where checkpoints live (made absolute; created on first save).
      max_to_keep: how many recent checkpoints to keep.
    """

    def __init__(self, directory: str | os.PathLike, *, max_to_keep: int = 3):
        if max_to_keep < 1:
            raise ValueError(f"max_to_keep must be >= 1, got {max_to_keep}")
        self.directory = os.path.abspath(os.fspath(directory))
        self._manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True),
            item_names=("state", "meta"),
        )

    def steps(self) -> list[int]:
        return sorted(self._manager.all_steps())

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def save(self, step: int, state: Any, meta: Mapping[str, Any]) -> None:
        """Saves (asynchronously; :meth:`wait` before reading back or exiting), replacing a
        checkpoint already at ``step`` (Orbax alone would skip the save silently)."""
        if step in self._manager.all_steps():
            self._manager.wait_until_finished()
            self._manager.delete(step)
        self._manager.save(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(dict(meta))
            ),
            force=True,
        )

    def wait(self) -> None:
        self._manager.wait_until_finished()

    def meta(self, step: int) -> dict:
        out = self._manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
        return dict(out["meta"])

    def restore(self, step: int, abstract: Any) -> Any:
        """Restores the array item into ``abstract``'s structure (exact layout required)."""
        out = self._manager.restore(
            step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract))
        )
        return out["state"]

    def restore_leaves(self, step: int) -> dict[str, Any]:
        """Restores the array item as saved: ``{path: array}``."""
        out = self._manager.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore()))
        flat = jax.tree_util.tree_flatten_with_path(out["state"])[0]
        return {path_str(p): leaf for p, leaf in flat}

    def close(self) -> None:
        self._manager.wait_until_finished()
        self._manager.close()
