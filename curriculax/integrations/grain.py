"""grain: a dataset whose batches a curriculum chooses, checkpointed with grain's iterator state.

:class:`CurriculumDataset` is a ``grain.IterDataset``; each ``next()`` of its iterator draws
``batch_size`` task ids from a :class:`curriculax.HostCurriculum`, looks the records up and
stacks them into one batch ``{field: np.ndarray[batch_size, ...], "task_id": np.int32[B]}``.
Feed the finished groups back with :meth:`CurriculumIterator.observe`. The iterator's
``get_state()`` / ``set_state()`` (JSON, as grain requires) hold the draws still in flight;
the curriculum's arrays go in an Orbax item beside it, and :class:`CurriculumCheckpoints`
saves both in one Orbax step (grain's ``CheckpointSave`` plus a ``StandardSave``).

Example:
  >>> import numpy as np, curriculax as cx
  >>> from curriculax.integrations.grain import CurriculumDataset, CurriculumCheckpoints
  >>> records = [{"prompts": f"task {i}"} for i in range(100)]
  >>> cur = cx.HostCurriculum(cx.curriculum(cx.samplers.difficulty_pools(100)), seed=0)
  >>> it = iter(CurriculumDataset(cur, records, batch_size=4))
  >>> batch = next(it)                       # {"prompts": str[4], "task_id": int32[4]}
  >>> it.observe(batch["task_id"], np.ones((4, 8)))      # rewards of 4 groups of 8
  >>> ckpt = CurriculumCheckpoints("/tmp/cx-grain-example")
  >>> ckpt.save(1, it); ckpt.restore(it, step=1)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import grain
import numpy as np
import orbax.checkpoint as ocp

from curriculax._checks import int_at_least
from curriculax.checkpoint import CheckpointStore
from curriculax.host import COPY_MAP, digest_str, one_process
from curriculax.integrations._ledger import DrawLedger, check_pool

__all__ = ["CurriculumCheckpoints", "CurriculumDataset", "CurriculumIterator"]

_NUM_TASKS = "num_tasks"
"""The entry of a checkpoint's ``data`` item (beside the iterator state) holding the pool size
it was saved for: the curriculum's ``num_tasks`` (None: unknown)."""
_COPY_MAP = COPY_MAP
"""The entry beside it holding the digest of the sampler's copy map (``entry_task``; None: the
sampler has none), as :meth:`curriculax.HostCurriculum.save` keeps it."""


class CurriculumDataset(grain.IterDataset):
    """Batches of records chosen by a curriculum, as a ``grain.IterDataset``.

    Args:
      curriculum: a :class:`curriculax.HostCurriculum`; its task ids index ``records`` (a
        bare ``cx.curriculum(...)`` is refused with a TypeError: wrap it).
      records: anything with ``len()`` and ``records[i] -> Mapping`` (a list of dicts, a
        ``grain.MapDataset``, a Hugging Face ``datasets.Dataset``).
      batch_size: tasks per batch (one ``curriculum.sample(batch_size, exact=True)`` per
        batch, through the :class:`~curriculax.integrations.DrawLedger`).
      task_field: the batch field that carries the task ids (``np.int32[batch_size]``); a
        record holding it is refused (name another). The records of a batch must have the
        same fields (a batch holding records with different ones is refused).
      num_batches: stop after this many batches (default: never).

    Each ``iter()`` makes an independent iterator over the same curriculum; train from one.
    Do not run it under grain's multiprocessing prefetch: the curriculum must live in the
    process that observes the rewards.
    """

    def __init__(
        self,
        curriculum: Any,
        records: Any,
        *,
        batch_size: int,
        task_field: str = "task_id",
        num_batches: int | None = None,
    ):
        super().__init__()
        self.curriculum = curriculum
        self.records = records
        self.batch_size = int_at_least(batch_size, "batch_size")
        self.task_field = str(task_field)
        self.num_batches = None if num_batches is None else int_at_least(num_batches, "num_batches")
        check_pool(curriculum, len(records))

    def __iter__(self) -> CurriculumIterator:
        return CurriculumIterator(self)

    def __str__(self) -> str:
        return f"CurriculumDataset(batch_size={self.batch_size}, records={len(self.records)})"


class CurriculumIterator(grain.DatasetIterator):
    """The iterator of a :class:`CurriculumDataset`: draws, looks up, stacks; observes.

    Attributes:
      ledger: the :class:`~curriculax.integrations.DrawLedger` of draws in flight.
      dataset: the :class:`CurriculumDataset`.
    """

    def __init__(self, dataset: CurriculumDataset):
        super().__init__()
        self.dataset = dataset
        self.ledger = DrawLedger(dataset.curriculum, len(dataset.records))

    @property
    def curriculum(self) -> Any:
        return self.dataset.curriculum

    def __next__(self) -> dict[str, np.ndarray]:
        d = self.dataset
        limit = d.num_batches
        if limit is not None and self.ledger.draws >= limit and not self.ledger.replaying:
            raise StopIteration
        ids = self.ledger.draw(d.batch_size)
        try:
            rows = [d.records[int(i)] for i in ids]
            for i, row in zip(ids, rows):
                if not isinstance(row, Mapping):
                    raise TypeError(
                        f"records[{int(i)}] must be a mapping of fields, got {type(row)}"
                    )
                if d.task_field in row:
                    raise ValueError(
                        f"records[{int(i)}] has a {d.task_field!r} field, where the batch carries "
                        "the curriculum's task ids; pass task_field= another name to keep yours"
                    )
            fields = list(rows[0])
            _check_same_fields(ids, rows)
            batch = {}
            for k in fields:
                values = [row[k] for row in rows]
                try:
                    batch[k] = np.asarray(values)
                except ValueError as e:  # ragged values: numpy's message names no field
                    raise ValueError(
                        f"field {k!r} of records {ids.tolist()} does not stack into one array "
                        f"(values of different shapes? pad them to one shape): {e}"
                    ) from e
        except BaseException:
            # The batch never left: the next next() hands the same draw out again (not
            # counted twice) instead of leaving it in flight ahead of every later batch.
            self.ledger.put_back(ids)
            raise
        batch[d.task_field] = ids
        return batch

    def observe(
        self,
        task_ids: Any,
        rewards: Any,
        valid: Any = None,
        advantages: Any = None,
        *,
        answers: Any = None,
    ) -> np.ndarray:
        """Feeds finished groups to the curriculum, in the order they were drawn.

        Args:
          task_ids: ``int[G]``; rewards: ``float[G, K]``; valid: ``bool[G, K]`` or None;
          advantages: ``float[G, K]`` the trainer's credit, or None.
          answers: ``int[G, K]`` each rollout's answer id (equal for equal answers), or None:
            for :func:`~curriculax.samplers.reward_consistency`.

        Returns:
          ``np.bool_[G]`` the admitted groups.
        """
        return self.ledger.observe(task_ids, rewards, valid, advantages, answers=answers)

    def get_state(self) -> dict[str, Any]:
        return self.ledger.state()

    def set_state(self, state: dict[str, Any]) -> None:
        self.ledger.set_state(state)

    def __str__(self) -> str:
        return f"CurriculumIterator(draws={self.ledger.draws})"


def _check_same_fields(ids: np.ndarray, rows: list[Mapping]) -> None:
    """Refuses a batch whose records do not all have the same fields (the batch's fields are
    the first record's: a field missing there would be dropped for the whole batch)."""
    groups: dict[frozenset, list[int]] = {}
    for i, row in zip(ids.tolist(), rows):
        groups.setdefault(frozenset(row), []).append(i)
    if len(groups) > 1:
        found = "; ".join(f"{sorted(k, key=str)} in records {v}" for k, v in groups.items())
        raise ValueError(
            f"records {ids.tolist()} of one batch have different fields ({found}): give every "
            "record the same fields (an optional one with a placeholder, e.g. '')"
        )


def _nested(flat: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """``{"a/b": x}`` -> ``{"a": {"b": x}}`` (Orbax stores nested dicts of arrays)."""
    out: dict[str, Any] = {}
    for name, value in flat.items():
        node = out
        *head, last = name.split("/")
        for part in head:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def _flat(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in tree.items():
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{prefix}{name}/"))
        else:
            out[f"{prefix}{name}"] = value
    return out


class CurriculumCheckpoints:
    """A directory of checkpoints of a curriculum iterator: its grain state (``data``, JSON,
    with the curriculum's ``num_tasks`` beside it) and its curriculum's
    :meth:`~curriculax.HostCurriculum.state_dict` (``curriculum``, an Orbax array item), written
    together as one Orbax step. A restore refuses a checkpoint saved for another pool size or
    copy map.

    Written through :class:`curriculax.checkpoint.CheckpointStore`: a save that replaces a step
    deletes the old one only once the new one is committed, and refuses to run where a
    numbered folder of the directory is not such a checkpoint (Orbax would delete it).

    One process only: on several JAX processes each process's iterator and curriculum hold a
    state of their own, and Orbax would keep process 0's for all (each process then restored
    process 0's state) or fail; it is refused there (keep each process's
    ``get_state()`` and its curriculum's ``state_dict()`` in your trainer's checkpoint).

    Args:
      directory: where checkpoints live (made absolute; created on first save).
      max_to_keep: how many recent steps to keep (None: all).

    Raises:
      ValueError: this is one of several JAX processes.
    """

    def __init__(self, directory: str | os.PathLike, *, max_to_keep: int | None = 3):
        one_process(
            "CurriculumCheckpoints",
            keep="the iterator's get_state() / set_state() and its curriculum's state_dict() / "
            "load_state_dict()",
        )
        if max_to_keep is not None:
            max_to_keep = int_at_least(max_to_keep, "max_to_keep")
        self._store = CheckpointStore(
            directory, max_to_keep=max_to_keep, item_names=("curriculum", "data")
        )
        self.directory = self._store.directory

    def steps(self) -> list[int]:
        return self._store.steps()

    def latest_step(self) -> int | None:
        return self._store.latest_step()

    def save(self, step: int, iterator: CurriculumIterator) -> None:
        """Saves the iterator's state and its curriculum at ``step`` (replacing a save already
        there once this one is written); blocks until written.

        Raises:
          ValueError: a numbered folder of the directory is not a curriculum checkpoint;
            nothing is written.
        """
        if not isinstance(iterator, CurriculumIterator):
            raise TypeError(f"save takes a CurriculumIterator, got {type(iterator).__name__}")
        step = int_at_least(step, "step", 0)
        # One snapshot of the curriculum and the draws in flight, taken under the ledger's lock
        # (Orbax writes from other threads, which must not wait on that lock).
        with iterator.ledger.lock:
            arrays = _nested(iterator.curriculum.state_dict())
            data = _Frozen(
                {
                    **iterator.get_state(),
                    _NUM_TASKS: _num_tasks(iterator.curriculum),
                    _COPY_MAP: _copy_map(iterator.curriculum),
                }
            )
        self._store.save_items(
            step,
            curriculum=ocp.args.StandardSave(arrays),
            data=grain.checkpoint.CheckpointSave(data),
        )
        self._store.wait()

    def restore(self, iterator: CurriculumIterator, step: int | None = None) -> int:
        """Restores ``step`` (default: the latest) into ``iterator`` and its curriculum.

        Returns:
          the step restored.

        Raises:
          FileNotFoundError: no checkpoint (at ``step``) in the directory.
          ValueError: the checkpoint was saved from a different curriculum: another pool
            size (``num_tasks``, as :meth:`curriculax.HostCurriculum.restore` refuses) or
            another copy map (the sampler's ``entry_task``; a checkpoint written before the
            size or the map was saved is not checked for it), or entries
            that differ (naming each). Nothing is restored then.
        """
        if not isinstance(iterator, CurriculumIterator):
            raise TypeError(f"restore takes a CurriculumIterator, got {type(iterator).__name__}")
        steps = self.steps()
        if step is None:
            if not steps:
                raise FileNotFoundError(f"no curriculum checkpoint in {self.directory}")
            step = steps[-1]
        if step not in steps:
            raise FileNotFoundError(
                f"no curriculum checkpoint at step {step} in {self.directory} (steps: {steps})"
            )
        saved = _Frozen({})
        out = self._store.restore_items(
            step,
            curriculum=ocp.args.StandardRestore(),
            data=grain.checkpoint.CheckpointRestore(saved),
        )
        state = saved.get_state()
        # Saved since the pool check came in; a checkpoint written before has none (loaded
        # unchecked: load_state_dict still refuses per-task state of another size).
        # The same for the copy map, saved since session 34.
        if isinstance(state, Mapping) and (_NUM_TASKS in state or _COPY_MAP in state):
            state = dict(state)
            lines = []
            if _NUM_TASKS in state:
                num_tasks, here = state.pop(_NUM_TASKS), _num_tasks(iterator.curriculum)
                if num_tasks != here:
                    lines.append(f"pool of {num_tasks} tasks, this one {here}")
            if _COPY_MAP in state:
                digest, here = state.pop(_COPY_MAP), _copy_map(iterator.curriculum)
                if digest != here:
                    lines.append(
                        f"copy map (the sampler's entry_task) {digest_str(digest)}, this one "
                        f"{digest_str(here)}"
                    )
            if lines:
                raise ValueError(
                    f"the checkpoint in {self.directory} (step {step}) was saved from a "
                    "different curriculum:\n" + "\n".join(f"  - {line}" for line in lines)
                )
        scratch = CurriculumIterator(iterator.dataset)  # the iterator changes only on success
        scratch.set_state(state)
        flat = {k: np.asarray(v) for k, v in _flat(out["curriculum"]).items()}
        with iterator.ledger.lock:
            iterator.curriculum.load_state_dict(flat)
            iterator.set_state(scratch.get_state())
        return step

    def close(self) -> None:
        self._store.close()


def _num_tasks(curriculum: Any) -> int | None:
    """The pool size a checkpoint is saved for (None: the sampler does not say)."""
    return getattr(curriculum, "num_tasks", None)


def _copy_map(curriculum: Any) -> str | None:
    """The copy-map digest a checkpoint is saved for (None: the sampler has no copy map), as
    the :class:`curriculax.HostCurriculum` (``check_pool`` made sure of its type) keeps it."""
    return curriculum._copy_map


class _Frozen(grain.DatasetIterator):
    """An iterator state frozen at save time, for grain's checkpoint handler."""

    def __init__(self, state: dict[str, Any]):
        super().__init__()
        self._state = state

    def __next__(self):
        raise StopIteration

    def get_state(self) -> dict[str, Any]:
        return self._state

    def set_state(self, state: dict[str, Any]) -> None:
        self._state = state
