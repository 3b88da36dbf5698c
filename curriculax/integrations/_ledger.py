"""The bookkeeping every adapter shares: which draws are still in flight, and matching finished
groups back to them.

A trainer pulls a batch of task ids (a *draw*), rolls each out as a group, and reports the
groups' rewards later, possibly after it has already pulled the next draw (data loaders look
ahead). :class:`DrawLedger` keeps the draws whose groups have not all been observed yet, checks
that observed groups arrive in the order they were drawn, and feeds them to the curriculum. Its
:meth:`~DrawLedger.state` is what a checkpoint needs besides the curriculum itself: the draws in
flight, handed out again first after :meth:`~DrawLedger.set_state`.
"""

from __future__ import annotations

import re
import threading
import zlib
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from curriculax._checks import int_at_least
from curriculax._types import TaskDraw
from curriculax.host import HostCurriculum

GATES = ("zero_advantages", "log")
"""How a trainer adapter applies the curriculum's admission: zero the advantages of rejected
groups, or only log the votes."""


class DrawLedger:
    """Draws from a :class:`curriculax.HostCurriculum` and matches finished groups to them.

    Thread-safe: a trainer may draw in a data-loading thread and save from another (the
    :class:`curriculax.HostCurriculum` holds its own lock too, so its ``metrics()`` may be
    read from any thread).

    Each draw is one ``curriculum.sample(n, exact=True)``: one call of the sampler, so a batch
    repeats no task that the sampler's single call would not (the default ``sample(n)`` may
    build a batch from two calls when ``n`` is not a power of two). Draws the curriculum
    already kept (from default calls, or a checkpoint written by an earlier version whose
    ledger made them) come first, once.

    Args:
      curriculum: the :class:`curriculax.HostCurriculum` that chooses the tasks (a bare
        ``cx.curriculum(...)`` is refused with a TypeError: wrap it).
      num_records: how many tasks the trainer can look up (ids must lie in
        ``[0, num_records)``); must not be below the curriculum's ``num_tasks``.

    Attributes:
      draws: ``int`` draws made so far: a saved draw handed out again after a restore is
        counted once (the state it came from counted it), so a run resumed from a checkpoint
        reaches a batch limit on the same draw as the uninterrupted run.
      in_flight: ``list[np.int32[n]]`` draws not yet fully observed, oldest first.
    """

    def __init__(self, curriculum: Any, num_records: int):
        self.curriculum = curriculum
        self.num_records = check_pool(curriculum, num_records)
        self.lock = threading.RLock()
        self.draws = 0
        self._in_flight: deque[list] = deque()  # [ids, groups observed so far]
        self._replay: deque[np.ndarray] = deque()

    @property
    def in_flight(self) -> list[np.ndarray]:
        with self.lock:
            return [ids.copy() for ids, _ in self._in_flight]

    @property
    def replaying(self) -> bool:
        """Whether draws restored from a checkpoint wait to be handed out again (they come
        before any new draw, past a batch limit too: the run they came from drew them)."""
        with self.lock:
            return bool(self._replay)

    def draw(self, n: int) -> np.ndarray:
        """The next ``n`` task ids (``np.int32[n]``): a draw saved in flight by a checkpoint
        first (it must hold ``n`` ids, and stays saved if not), else a fresh
        ``curriculum.sample(n, exact=True)`` (a trainer's batch size is fixed: one program,
        one call of the sampler per batch)."""
        n = int_at_least(n, "n")
        with self.lock:
            if self._replay:
                if self._replay[0].shape[0] != n:
                    raise ValueError(
                        f"the checkpoint holds an in-flight draw of {self._replay[0].shape[0]} "
                        f"tasks but the trainer now asks for {n}; resume with the batch size it "
                        "was saved with"
                    )
                ids = self._replay.popleft()  # counted in draws by the run that drew it
                self._in_flight.append([ids, 0])
                return ids.copy()
            ids = self.curriculum.sample(n, exact=True)
            if isinstance(ids, TaskDraw):
                raise TypeError(
                    "this sampler hands out task payloads (a TaskDraw); trainer adapters "
                    "look tasks up by id, so use a sampler that draws ids from a fixed pool"
                )
            ids = np.asarray(ids, np.int32)
            bad = self._outside(ids)
            if bad.size:
                raise ValueError(
                    f"the curriculum drew task ids {bad[:5].tolist()} outside "
                    f"[0, {self.num_records}), the records the trainer can look up"
                )
            self._in_flight.append([ids, 0])
            self.draws += 1
            return ids.copy()

    def observe(
        self,
        task_ids: Any,
        rewards: Any,
        valid: Any = None,
        advantages: Any = None,
        *,
        answers: Any = None,
    ) -> np.ndarray:
        """Feeds finished groups (in the order they were drawn) to the curriculum.

        Args:
          task_ids: ``int[G]`` the task of each group.
          rewards: ``float[G, K]``.
          valid: ``bool[G, K]`` or None (all valid).
          advantages: ``float[G, K]`` the trainer's own credit, or None (the curriculum
            computes group-relative credit).
          answers: ``int[G, K]`` an id of each rollout's answer (equal for equal answers), or
            None: for :func:`~curriculax.samplers.reward_consistency`.

        Returns:
          ``np.bool_[G]``: the groups the curriculum admits.

        Raises:
          ValueError: the groups are not the next ones drawn (naming both), e.g. an
            evaluation batch that carries the task-id field, or a trainer that reordered groups.
            Nothing is marked observed when this or the curriculum's ``observe`` raises.
          TypeError: task ids that are not integers.
        """
        ids = np.asarray(task_ids)
        if ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise TypeError(f"task_ids must be integers, got {ids.dtype}")
        if ids.ndim != 1:
            raise ValueError(f"task_ids must be int[G] (one id per group), got shape {ids.shape}")
        ids = ids.astype(np.int64)
        with self.lock:
            self._check_next(ids)
            admitted = self.curriculum.observe(ids, rewards, valid, advantages, answers=answers)
            self._advance(ids.size)  # only once the curriculum took them (a retry may follow)
            return np.asarray(admitted, bool)

    def _check_next(self, ids: np.ndarray) -> None:
        """Raises unless ``ids`` are the next groups in flight; changes nothing."""
        expected, at = [], 0
        pending = [(d, seen) for d, seen in self._in_flight]
        while len(expected) < ids.size and at < len(pending):
            d, seen = pending[at]
            expected.extend(d[seen:].tolist())
            at += 1
        expected = expected[: ids.size]
        got = ids.tolist()
        if expected != got:
            if len(expected) < len(got):
                where = f"{len(got)} groups observed, {len(expected)} in flight"
            else:
                row = next(i for i, (a, b) in enumerate(zip(got, expected)) if a != b)
                where = f"group {row} is task {got[row]}, the draw's is {expected[row]}"
            raise ValueError(
                f"observed groups of tasks {got[:8]} but the next tasks in flight are "
                f"{expected[:8]} ({where}): groups must be observed once each, in the order they "
                "were drawn (an evaluation batch must not carry the task-id field)"
            )

    def _advance(self, left: int) -> None:
        """Marks the next ``left`` groups in flight observed."""
        while left:
            entry = self._in_flight[0]
            take = min(left, entry[0].size - entry[1])
            entry[1] += take
            left -= take
            if entry[1] == entry[0].size:
                self._in_flight.popleft()

    def put_back(self, ids: Any) -> None:
        """Undoes a :meth:`draw` whose batch never reached the trainer (looking its records up
        failed): the draw leaves the draws in flight and the next :meth:`draw` hands it out
        again, first and not counted again in ``draws`` (as after a restore).

        Raises:
          ValueError: ``ids`` are not a draw in flight none of whose groups were observed
            (the ledger is unchanged then).
        """
        ids = np.asarray(ids)
        with self.lock:
            for at in range(len(self._in_flight) - 1, -1, -1):  # the newest first
                drawn, seen = self._in_flight[at]
                if not seen and np.array_equal(drawn, ids):
                    del self._in_flight[at]
                    self._replay.appendleft(drawn)
                    return
            raise ValueError(
                f"put_back: tasks {ids.reshape(-1)[:8].tolist()} are not a draw in flight with "
                "no group observed yet"
            )

    def requeue(self) -> None:
        """Hands the draws in flight out again first, as after a restore (:meth:`set_state` of
        :meth:`state`): for a trainer that starts a new loop without finishing its old one
        (a second ``train()``), whose groups in flight will never be observed. Each is handed
        out whole and not counted again in ``draws``."""
        with self.lock:
            self._replay = deque([d for d, _ in self._in_flight] + list(self._replay))
            self._in_flight.clear()

    def state(self) -> dict[str, Any]:
        """JSON-able: ``{"draws": int, "in_flight": [[task ids], ...]}`` (draws not yet fully
        observed, oldest first, handed out again first after :meth:`set_state`).

        A draw is handed out again whole, as the trainer asks for whole batches: where some of
        its groups were observed before the save (a draw finished in pieces), the curriculum
        state saved with this holds their results, and after a restore it observes the new
        groups of those tasks as well (new rollouts, not the same ones twice)."""
        with self.lock:
            in_flight = [d.tolist() for d, _ in self._in_flight] + [
                d.tolist() for d in self._replay
            ]
            return {"draws": int(self.draws), "in_flight": in_flight}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restores :meth:`state`; the curriculum itself is restored separately.

        Raises:
          ValueError: not such a state (naming what is wrong): a missing or unexpected key,
            ``draws`` not a non-negative integer, or ``in_flight`` not lists of integer ids in
            ``[0, num_records)``. The ledger is unchanged then.
        """
        form = "a draw-ledger state is {'draws': int, 'in_flight': [[ids], ...]}"
        if not isinstance(state, Mapping):
            raise ValueError(f"{form}, got a {type(state).__name__}")
        keys = {"draws", "in_flight"}
        problems = [f"{k!r} missing" for k in sorted(keys - set(state))]
        problems += [f"{k!r} unexpected" for k in sorted(set(state) - keys, key=repr)]
        if problems:
            raise ValueError(f"{form}, got one with {', '.join(problems)}")
        draws, in_flight = state["draws"], state["in_flight"]
        if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 0:
            raise ValueError(f"draws must be a non-negative integer, got {draws!r}")
        if isinstance(in_flight, (str, bytes)) or not isinstance(in_flight, Sequence):
            raise ValueError(f"in_flight must be a list of task-id lists, got {in_flight!r}")
        replay = []
        for i, d in enumerate(in_flight):
            ids = np.asarray(d)
            if ids.ndim != 1 or not ids.size or not np.issubdtype(ids.dtype, np.integer):
                raise ValueError(f"in_flight[{i}] must be a non-empty list of task ids, got {d!r}")
            bad = self._outside(ids)
            if bad.size:
                raise ValueError(
                    f"in_flight[{i}] holds task ids {bad[:5].tolist()} outside "
                    f"[0, {self.num_records}), the records the trainer can look up"
                )
            replay.append(ids.astype(np.int32))
        with self.lock:
            self.draws = int(draws)
            self._in_flight.clear()
            self._replay = deque(replay)

    def _outside(self, ids: np.ndarray) -> np.ndarray:
        """The ids of ``ids`` outside ``[0, num_records)``."""
        return ids[(ids < 0) | (ids >= self.num_records)]


_PER_BATCH = re.compile(
    r"curriculum/(admission_rate|gate/.+/admit_rate|sampler/(inner/)*zero_variance_share)"
)
"""The built-in metrics that describe the last batch (docs/metrics.md); every other one is a
running total or a snapshot of the current state."""


def per_batch(key: str) -> bool:
    """Whether the logged ``curriculum/<name>`` key is a per-batch metric: an adapter logs its
    mean over the batches a trainer aggregates, and every other metric (running totals,
    snapshots) at its value after the last of them."""
    return _PER_BATCH.fullmatch(key) is not None


def check_pool(curriculum: Any, num_records: int) -> int:
    """``num_records`` as an int; raises if the curriculum draws ids beyond the records, or
    (TypeError) if it is not a :class:`curriculax.HostCurriculum`."""
    if not isinstance(curriculum, HostCurriculum):
        raise TypeError(
            "the curriculum must be a cx.HostCurriculum (it keeps the state and draws on the "
            f"host), got {type(curriculum).__name__}; wrap it: "
            "cx.HostCurriculum(cx.curriculum(sampler, gates={...}), seed=0)"
        )
    n = int_at_least(num_records, "num_records")
    num_tasks = getattr(curriculum, "num_tasks", None)
    if num_tasks is not None and num_tasks > n:
        raise ValueError(
            f"the curriculum draws task ids in [0, {num_tasks}) but only {n} records can be "
            "looked up; build the sampler with num_tasks=len(records)"
        )
    return n


def split_groups(task_ids: Any, group_size: int, *values: Any) -> tuple[np.ndarray, ...]:
    """Rows laid out group by group (each task repeated ``group_size`` times in a row, as tunix
    and TRL lay them out) as ``(int[G] task ids, *values [G, K])``.

    Raises:
      ValueError: a row count not a multiple of ``group_size``, or a group whose rows carry
        different task ids (the trainer did not lay rows out as assumed).
    """
    k = int_at_least(group_size, "group_size")
    rows = np.asarray(task_ids).reshape(-1)
    if rows.size % k:
        raise ValueError(f"{rows.size} rows are not whole groups of {k} rollouts")
    grouped = rows.reshape(-1, k)
    mixed = np.flatnonzero((grouped != grouped[:, :1]).any(axis=1))
    if mixed.size:
        raise ValueError(
            f"rows of group {int(mixed[0])} carry different task ids "
            f"{grouped[mixed[0]].tolist()}: expected each task's {k} rollouts in a row"
        )
    out = [grouped[:, 0]]
    for v in values:
        out.append(None if v is None else np.asarray(v).reshape(grouped.shape[0], k))
    return tuple(out)


def check_gates(gates: object) -> str:
    """``gates`` if it is one of :data:`GATES`; a ValueError naming the choices otherwise."""
    if gates not in GATES:
        raise ValueError(f"gates must be one of {GATES}, got {gates!r}")
    return gates


def rows_to_keep(
    gates: str, admitted: np.ndarray | None, group_size: int, num_rows: int
) -> np.ndarray | None:
    """``np.bool_[num_rows]``: which rollout rows (laid out group by group) keep their
    advantages when ``gates`` is ``"zero_advantages"``; the rows of rejected groups get zero
    advantage, so no policy gradient. ``None`` when nothing is to be zeroed (``"log"``, no
    admission yet, or every group admitted).

    Raises:
      ValueError: ``admitted`` groups of ``group_size`` do not make ``num_rows`` rows.
    """
    if gates != "zero_advantages" or admitted is None:
        return None
    keep = np.repeat(np.asarray(admitted, bool), group_size)
    if keep.shape[0] != num_rows:
        raise ValueError(
            f"{admitted.shape[0]} groups of {group_size} do not match {num_rows} advantage rows"
        )
    return None if keep.all() else keep


def check_answer_key(answer_key: Any) -> Any:
    """``answer_key`` if it is a callable or None; a TypeError otherwise."""
    if answer_key is not None and not callable(answer_key):
        raise TypeError(f"answer_key must be a callable or None, got {answer_key!r}")
    return answer_key


def answers_of(answer_key: Any, completions: Any) -> np.ndarray | None:
    """``int64[M]`` the answer ids of ``completions`` through ``answer_key`` (None: no
    answers reported); an ``answer_key`` that returns None found no answer (see
    :func:`answer_ids`)."""
    if answer_key is None:
        return None
    return answer_ids(answer_key(c) for c in completions)


def answer_ids(answers: Any) -> np.ndarray:
    """``int64[M]`` stable ids of answers (any values; ids from their text): equal answers get
    equal ids, in every process and run, in ``[0, 2**31)`` (the low 31 bits of the CRC-32 of
    ``str(answer)`` in UTF-8).

    ``None`` is no answer (the answer key found none): the ``i``-th value gets ``-1 - i``, an id
    no answer gets and no other rollout of the call either (the curriculum keeps an id's low 32
    bits: these stay distinct and negative). So two rollouts without an answer never count as
    one answer with two rewards (:func:`~curriculax.samplers.reward_consistency` would mark the
    task for the rest of the run); the string ``"None"`` is an answer like any other."""
    return np.array(
        [
            -1 - i if a is None else zlib.crc32(str(a).encode("utf-8")) & 0x7FFFFFFF
            for i, a in enumerate(answers)
        ],
        np.int64,
    )
