"""The host-side driver: a curriculum called from host Python, numpy in and numpy out.

Inside your own jitted loop you call a curriculum's pure functions directly (``sample``,
``observe``, ``metrics``). A trainer whose loop is host Python (tunix, TRL, verl, your own)
calls :class:`HostCurriculum` between its rollout and update steps instead: it keeps the state
and the key, compiles each call once per power-of-two size, and takes and returns numpy.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import _entries
from curriculax._checks import int_at_least
from curriculax._random import seed_key
from curriculax._types import Curriculum, CurriculumState, GroupResults, TaskSampler
from curriculax.checkpoint import (
    ITEMS,
    CheckpointStore,
    holds_items,
    layout_diff,
    leaf_layout,
    path_str,
)
from curriculax.credit import grpo_advantages

__all__ = ["HostCurriculum", "IncompatibleKeys"]

MIN_BUCKET = 8
FORMAT = "curriculax.HostCurriculum/1"
_COUNTERS = ("sample_calls", "observe_calls")
KEPT = "kept"  # state-dict prefix of the draws made but not yet handed out
COPY_MAP = "entry_task_sha256"  # checkpoint meta: digest of the sampler's copy map (or None)


class IncompatibleKeys(NamedTuple):
    """What a non-strict :meth:`HostCurriculum.load_state_dict` did not load (torch-style).

    Attributes:
      missing_keys: entries of this curriculum's state dict absent from the one given (they
        keep their current values).
      unexpected_keys: entries of the given state dict this curriculum does not have.
    """

    missing_keys: list[str]
    unexpected_keys: list[str]


def bucket(n: int) -> int:
    """The padded batch size for ``n`` groups: the next power of two, at least 8."""
    return max(MIN_BUCKET, _pow2(n))


def _pow2(n: int) -> int:
    """The next power of two ``>= n`` (``n >= 1``), with no minimum: the padded group size
    ``K`` (a group of one rollout stays one, so a component that needs two still says so)."""
    return 1 << max(0, n - 1).bit_length()


def one_process(what: str, keep: str = "state_dict() / load_state_dict()") -> None:
    """Refuses ``what`` (a checkpoint of host-side curriculum state) on several processes: an
    Orbax checkpoint there is one state saved by all of them, and each process's driver holds
    a state of its own (Orbax refused it at the save; shared, one process's state would come
    back to all). ``keep`` names what to keep instead."""
    if jax.process_count() > 1:
        raise ValueError(
            f"{what} works in one process; this is one of {jax.process_count()} JAX "
            f"processes, each with a driver of its own. Keep each process's state with {keep} "
            "in your trainer's checkpoint"
        )


class HostCurriculum:
    """A curriculum driven from host Python: it keeps the state and key, numpy in and out.

    ``sample(n)`` and ``observe(...)`` each run at most one compiled XLA program with the
    state donated (updated in place), compiled once per power-of-two size (:func:`bucket`),
    so a trainer that asks for a different ``n`` each time (backfilling rejected groups)
    does not recompile.

    ``observe`` pads the groups to ``bucket(G)`` with padding rows that no component sees as
    groups (see :func:`curriculax.curriculum`'s ``rows``), the rollouts of each group to the
    next power of two with invalid ones, and per-token advantages to ``bucket(T)`` positions
    with ``token_mask`` False, so batches of varying ``G``, ``K`` and ``T`` share few programs.
    It computes group-relative credit (:func:`curriculax.credit.grpo_advantages`, as the
    engine does) when no advantages are given.

    ``sample(n)`` hands out draws the sampler has made and the driver kept, oldest first;
    when fewer than ``n`` are kept it first draws ``bucket(n)`` more in one call of the
    sampler. Nothing drawn is discarded: every id the sampler counted as handed out (warm-up
    progress, tasks seen, ``sequential``'s cursor, ``floor``'s staleness clock) is handed out,
    in the order drawn, so ``sequential`` hands out the same stream whatever the ``n``. The
    kept draws (fewer than ``bucket(n)``; :attr:`num_kept`) were chosen from the state at
    the call that drew them, before the observations made since; with ``n`` a power of two
    (>= 8) nothing is kept and every call draws exactly ``n``. A batch made of kept draws and
    a fresh draw comes from two calls of the sampler, so it may hand out a task twice even
    where one call of the sampler never repeats one (``uniform``, ``learnability``, ...).
    ``sample(n, exact=True)`` draws exactly ``n`` (after any kept draws) and keeps nothing:
    one batch, one call of the sampler, at the cost of one program per distinct ``n`` (the
    trainer adapters draw their fixed batch size this way). The kept draws are part of
    :meth:`state_dict` and of :meth:`save`.

    Thread-safe: every call that reads or replaces the state (``sample``, ``observe``,
    ``metrics``, :attr:`state`, ``state_dict``, ``load_state_dict``, ``save``, ``restore``)
    holds the driver's lock, so a data-loading thread may draw while another reads the
    metrics or saves.

    Keys: ``jax.random.key(seed)``, as JAX's 64-bit mode builds it whichever mode is on (so
    every seed gets its own key; ``curriculax._random.seed_key``), is split into ``(init_key,
    key)``; the state is ``curriculum.init(init_key)``, and each draw from the sampler splits
    ``key, sub = jax.random.split(key)`` and draws with ``sub``. The same curriculum driven by
    hand with that key sequence (and those draw sizes) gives the same draws and admissions.

    Args:
      curriculum: a :class:`~curriculax.Curriculum` from :func:`curriculax.curriculum`.
      seed: seed of the key (an int a signed 64-bit word holds; any two give different keys).
      scale_by_std: credit computed here divides each group's centred rewards by their
        standard deviation (GRPO); False: mean-centring only.

    Attributes:
      curriculum: the wrapped curriculum (its pure functions, for use inside your own jit).
      state: a read-only snapshot (a copy) of the current
        :class:`~curriculax.CurriculumState`, for the host-side diagnostics
        (``cx.samplers.contradicted_tasks(cur.state)``, ``noisy_tasks``, ...).
      num_tasks: ``int | None``: task ids lie in ``[0, num_tasks)`` (the sampler's
        ``num_tasks``; ``None``: unknown, not checked on the host).
      sample_calls: ``int`` sample calls so far.
      num_kept: ``int`` draws made but not yet handed out.
      observe_calls: ``int`` observe calls so far.
      trace_counts: ``{"sample", "observe", "metrics"}``: how many times each was traced
        (one per compiled shape).

    Example:
      >>> import numpy as np, curriculax as cx
      >>> cur = cx.HostCurriculum(cx.curriculum(
      ...     cx.samplers.difficulty_pools(1000),
      ...     gates={"zero_advantage": cx.gates.advantage_range(0.0, 0.0)}))
      >>> ids = cur.sample(4)                                   # np.int32[4]
      >>> rewards = np.array([[1, 0, 1], [0, 0, 0], [1, 1, 1], [0, 1, 1]], np.float32)
      >>> cur.observe(ids, rewards)                             # np.bool_[4]
      array([ True, False, False,  True])
    """

    def __init__(self, curriculum: Curriculum, seed: int = 0, *, scale_by_std: bool = True):
        if isinstance(curriculum, TaskSampler):
            raise TypeError(
                "HostCurriculum takes a curriculum, got a TaskSampler; wrap it: "
                "cx.HostCurriculum(cx.curriculum(sampler, gates={...}))"
            )
        if not isinstance(curriculum, Curriculum):
            raise TypeError(
                f"HostCurriculum takes a curriculax.Curriculum (from cx.curriculum(...)), "
                f"got {type(curriculum).__name__}"
            )
        root_key = seed_key(seed)  # checks the seed first
        self.curriculum = curriculum
        # Held by every call that reads or replaces _state, _key or _kept (sample donates the
        # state: a read beside it could find the buffer deleted).
        self._lock = threading.RLock()
        num_tasks = getattr(curriculum.sampler, "num_tasks", None)
        self.num_tasks: int | None = None if num_tasks is None else int(num_tasks)
        # Where per-task state of a pool that repeats tasks lives (its first entries): a
        # checkpoint saved under another copy map would put that state in the wrong slots.
        self._copy_map = copy_map_digest(getattr(curriculum.sampler, "entry_task", None))
        self.scale_by_std = bool(scale_by_std)
        self.sample_calls = 0
        self.observe_calls = 0
        self.trace_counts = {"sample": 0, "observe": 0, "metrics": 0}
        self._sample = jax.jit(self._sample_fn, static_argnums=2, donate_argnums=(0, 1))
        self._observe = jax.jit(self._observe_fn, donate_argnums=0)
        self._metrics = jax.jit(self._metrics_fn)
        init_key, key = jax.random.split(root_key)
        self._state = jax.jit(curriculum.init)(init_key)
        # The key travels as raw u32 data: typed key arrays leave jit's fast dispatch path.
        self._key = jax.random.key_data(key)
        # One draw's structure (ids, or a TaskDraw of payloads), rows along axis 0.
        self._draw = jax.eval_shape(lambda st, k: curriculum.sample(st, k, 1)[0], self._state, key)
        self._kept = _empty_rows(self._draw)  # drawn, not yet handed out
        self._floors: dict[str, int] | None = None  # see _value_problems
        # State-dict names of task payloads (a frontier's generated tasks): any values.
        self._payloads = _payload_names(self._state) | {
            name for name in _kept_items(self._draw) if name.startswith(f"{KEPT}/tasks")
        }

    # -- compiled bodies (traced once per shape) --------------------------------------------

    def _sample_fn(self, state, key, num: int):
        self.trace_counts["sample"] += 1
        key, sub = jax.random.split(jax.random.wrap_key_data(key))
        drawn, state = self.curriculum.sample(state, sub, num)
        return drawn, state, jax.random.key_data(key)

    def _observe_fn(self, state, ids, rewards, valid, advantages, token_mask, answers, count):
        """Padded on the host: ``valid`` is False in every padding rollout and ``token_mask``
        in every padding position (None: advantages per group, all True); padding rows are
        masked by ``count``."""
        self.trace_counts["observe"] += 1
        g = rewards.shape[0]
        if advantages is None:
            # Credit sees only finite rewards (grpo_advantages applies finite_rewards, as the
            # engine does); observe still sees the raw reward and counts it non-finite.
            adv = grpo_advantages(rewards, valid, scale_by_std=self.scale_by_std)
            advantages = adv[:, :, None]
        elif advantages.ndim == 2:
            advantages = advantages[:, :, None]
        if token_mask is None:
            token_mask = jnp.ones(advantages.shape, bool)
        results = GroupResults(ids, rewards, valid, advantages, token_mask, answers)
        rows = jnp.arange(g) < count
        admission, state = self.curriculum.observe(state, results, rows)
        return admission.admitted, state

    def _metrics_fn(self, state):
        self.trace_counts["metrics"] += 1
        return self.curriculum.metrics(state)

    # -- the API -----------------------------------------------------------------------------

    @property
    def state(self) -> CurriculumState:
        """A snapshot of the current curriculum state (a :class:`~curriculax.CurriculumState`:
        ``.sampler``, ``.gates``, ...), for reading only: the host-side diagnostics take it,
        e.g. ``cx.samplers.contradicted_tasks(cur.state)`` (the ``reward_consistency``
        sampler's or gate's marks, as in :func:`curriculax.robust_curriculum`),
        ``cx.samplers.noisy_tasks(cur.state)`` or, where the sampler is a
        ``category_bandit``, ``cx.samplers.noisy_categories(cur.state.sampler)``.

        A copy of every leaf, taken under the driver's lock, so it stays valid (``sample`` and
        ``observe`` donate the driver's own buffers) and does not follow later calls: read it
        again after them. It is not the driver's state: nothing done to it reaches the driver
        (restore a state with :meth:`load_state_dict` or :meth:`restore`). Cost: one copy of
        the state (O(N) for per-task samplers) per read.
        """
        with self._lock:
            return jax.tree.map(jnp.copy, self._state)

    @property
    def num_kept(self) -> int:
        with self._lock:
            return _num_rows(self._kept)

    def sample(self, n: int, *, exact: bool = False) -> np.ndarray:
        """Hands out ``n`` task ids: kept draws first, then (if they are fewer than ``n``) one
        fresh draw of ``bucket(n)``, keeping what is left for the next calls.

        The fresh draw and the kept draws come from different calls of the sampler, so such
        a batch may hold a task twice even where one call of the sampler never repeats one.

        Args:
          n: how many (an int >= 0).
          exact: after any kept draws, draw exactly what they leave to ``n``, keeping none of
            that draw (one program per distinct size; for a trainer whose batch size is
            fixed). Draws kept by earlier default calls (or a restored checkpoint) still come
            first, and a batch of them and a fresh draw may repeat a task, as above; where
            nothing is kept (only ``exact`` calls, or sizes that are powers of two >= 8),
            every batch is one call of the sampler.

        Returns:
          ``np.int32[n]``; for a sampler that hands out payloads (the frontier sampler), a
          :class:`~curriculax.TaskDraw` of numpy arrays with ``n`` rows.
        """
        n = int_at_least(n, "n", 0)
        with self._lock:
            pool = self._kept
            have = _num_rows(pool)
            if have < n:
                size = n - have if exact else bucket(n)
                drawn, self._state, self._key = self._sample(self._state, self._key, size)
                pool = jax.tree.map(lambda a, b: np.concatenate([a, np.asarray(b)]), pool, drawn)
            out = jax.tree.map(lambda a: a[:n].copy(), pool)
            self._kept = jax.tree.map(lambda a: a[n:].copy(), pool)
            self.sample_calls += 1
            return out

    def observe(
        self,
        task_ids: Any,
        rewards: Any,
        valid: Any = None,
        advantages: Any = None,
        *,
        token_mask: Any = None,
        answers: Any = None,
    ) -> np.ndarray:
        """Feeds finished groups to the curriculum; returns which may train.

        Args:
          task_ids: ``int[G]`` the task each group ran.
          rewards: ``float[G, K]``, or ragged: a list of G sequences of rewards (groups of
            different sizes are padded with invalid rollouts).
          valid: ``bool[G, K]`` (ragged like ``rewards`` if that is ragged); default: every
            given rollout is valid.
          advantages: ``float[G, K]`` (sequence level) or ``float[G, K, T]`` (per token);
            ragged like ``rewards`` if that is ragged. Default: group-relative credit over the
            valid rollouts (:func:`curriculax.credit.grpo_advantages`). ``T`` may change from
            call to call: it is padded to ``bucket(T)`` with positions ``token_mask`` marks
            untrainable.
          token_mask: ``bool[G, K, T]`` trainable positions of ``[G, K, T]`` advantages
            (ragged like ``rewards`` if that is ragged; default: all).
          answers: ``int[G, K]`` (ragged like ``rewards`` if that is ragged): an id of each
            rollout's answer, equal for equal answers (e.g. a hash of the answer the verifier
            read), for :func:`~curriculax.samplers.reward_consistency`. Default: none given.

        Returns:
          ``np.bool_[G]``: the groups that every gate admitted and that have a valid rollout.

        Raises:
          ValueError: shapes that do not line up, groups of no rollouts (``K = 0``), or task
            ids outside ``[0, num_tasks)`` (naming them).
          TypeError: task ids, ``valid``, ``token_mask`` or ``answers`` that are not integers
            (or booleans).
        """
        ids = np.asarray(task_ids)
        if ids.ndim != 1:
            raise ValueError(f"task_ids must be int[G], got shape {ids.shape}")
        if ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise TypeError(f"task_ids must be integers, got {ids.dtype}")
        g = ids.shape[0]
        rewards, lengths = _groups(rewards, "rewards", g, np.float32)
        if rewards.ndim != 2:
            raise ValueError(f"rewards must be float[G={g}, K], got shape {rewards.shape}")
        k = rewards.shape[1]
        if g and k == 0:
            raise ValueError(f"rewards: the {g} groups hold no rollouts (K = 0)")
        if valid is not None:
            valid, v_lengths = _groups(valid, "valid", g, bool, k, kinds="biu")
            _same_lengths(lengths, v_lengths, "valid")
            if valid.shape != (g, k):
                raise ValueError(f"valid must be bool[G={g}, K={k}], got shape {valid.shape}")
        if lengths is not None:
            present = np.arange(k) < lengths[:, None]
            valid = present if valid is None else valid & present
        if advantages is not None:
            advantages, a_lengths = _groups(advantages, "advantages", g, np.float32, k)
            _same_lengths(lengths, a_lengths, "advantages")
            if advantages.ndim not in (2, 3) or advantages.shape[:2] != (g, k):
                raise ValueError(
                    f"advantages must be float[G={g}, K={k}] or float[G, K, T], "
                    f"got shape {advantages.shape}"
                )
        if token_mask is not None:
            if advantages is None or advantages.ndim != 3:
                raise ValueError("token_mask goes with per-token advantages float[G, K, T]")
            token_mask, m_lengths = _groups(token_mask, "token_mask", g, bool, k, kinds="biu")
            _same_lengths(lengths, m_lengths, "token_mask")
            if token_mask.shape != advantages.shape:
                raise ValueError(
                    f"token_mask must match advantages {advantages.shape}, "
                    f"got shape {token_mask.shape}"
                )
        if answers is not None:
            answers, n_lengths = _groups(
                answers, "answers", g, np.int64, k, kinds="biu", low32=True
            )
            _same_lengths(lengths, n_lengths, "answers")
            if answers.shape != (g, k):
                raise ValueError(f"answers must be int[G={g}, K={k}], got shape {answers.shape}")
            # Any integer ids (Python ints of any width too): keep their low 32 bits (equal ids
            # stay equal).
            answers = answers.astype(np.uint32).view(np.int32)
        self._check_ids(ids)
        if g == 0:
            return np.zeros((0,), bool)
        # Padding (zeros: no valid rollout, no trainable position), so that varying sizes
        # share one program: groups to bucket(G) (masked by `count` too), rollouts to a
        # power of two (appended: the even/odd halves of the real rollouts stay as they are),
        # per-token positions to bucket(T).
        per_token = advantages is not None and advantages.ndim == 3
        t = advantages.shape[2] if per_token else 1
        gp, kp, tp = bucket(g), _pow2(k), bucket(t) if per_token else 1
        # Masks given in full whether or not this batch needs padding: a batch that needs none
        # would otherwise pass None, another program than the padded batches of its bucket.
        if valid is None:
            valid = np.ones((g, k), bool)
        if token_mask is None and per_token:  # padded rollouts are masked by `valid` already
            token_mask = np.ones((g, k, t), bool)
        with self._lock:
            admitted, self._state = self._observe(
                self._state,
                _pad(ids if ids.dtype == np.int32 else ids.astype(np.int32), (gp,)),
                _pad(rewards, (gp, kp)),
                _pad(valid, (gp, kp)),
                None if advantages is None else _pad(advantages, (gp, kp, tp)[: advantages.ndim]),
                None if token_mask is None else _pad(token_mask, (gp, kp, tp)),
                None if answers is None else _pad(answers, (gp, kp)),
                np.int32(g),
            )
            self.observe_calls += 1
        return np.array(admitted)[:g]

    def metrics(self) -> dict[str, float]:
        """The curriculum's metrics as floats (``sampler/...``, ``gate/<name>/...``,
        ``admission_rate``, ...; the engine logs them under ``curriculum/<env>/``)."""
        with self._lock:
            values = jax.device_get(self._metrics(self._state))
        return {name: float(v) for name, v in values.items()}

    # -- state dict and checkpoints ----------------------------------------------------------

    def state_dict(self) -> dict[str, np.ndarray]:
        """The driver's whole state as numpy (copies): ``state/<path>`` for each leaf of the
        curriculum state (``state/sampler/scores``, ...), ``key`` (``u32`` key data),
        ``sample_calls`` and ``observe_calls`` (``int64[]``), and, when draws are kept for the
        next ``sample`` calls (``num_kept > 0``; Orbax cannot write empty arrays), ``kept``
        (``int32[m]``; for a payload sampler ``kept/<path>`` per leaf of its
        :class:`~curriculax.TaskDraw`, ``[m, ...]``)."""
        out = self._state_dict()
        return {name: v for name, v in out.items() if v.size or not _is_kept(name)}

    def _state_dict(self) -> dict[str, np.ndarray]:
        """:meth:`state_dict` with the kept draws' entries even when empty."""
        with self._lock:
            out = {
                f"state/{path_str(p)}": np.array(leaf)
                for p, leaf in jax.tree_util.tree_flatten_with_path(self._state)[0]
            }
            out["key"] = np.array(self._key)
            for name in _COUNTERS:
                out[name] = np.asarray(getattr(self, name), np.int64)
            out.update({name: leaf.copy() for name, leaf in _kept_items(self._kept).items()})
        return out

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True
    ) -> IncompatibleKeys:
        """Loads a :meth:`state_dict` (torch-style), after checking every entry.

        The kept draws (``kept...``) go with the sampler state and key they were drawn with.
        A state dict that gives the key or sampler state but no kept draws loads with none
        kept (:meth:`state_dict` leaves them out when there are none, and a state dict
        written before the driver kept draws has none). One that gives neither (a
        non-strict load of, say, the counters or a gate's state) leaves the current kept
        draws in place, listed in ``missing_keys``.

        Args:
          state_dict: ``{name: array}`` as from :meth:`state_dict` (numpy, jax or lists, as
            after a JSON round trip: a list's values are cast to the entry's dtype once they
            are checked to fit it).
          strict: every entry must be present and no other (default). With ``strict=False``
            missing entries keep their current values and unexpected ones are ignored.

        Returns:
          :class:`IncompatibleKeys` (empty lists after a strict load).

        Raises:
          ValueError: naming each missing or unexpected entry (strict), each entry whose
            shape or dtype does not fit (always), with what was expected, and each entry
            holding a value no run can reach: a NaN (outside task payloads), a negative count
            or index (below what the component starts from), an integer outside its dtype (or a
            float too large for it), a kept task id outside the pool (or below 0). Nothing is
            loaded then.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"state_dict must be a mapping, got {type(state_dict).__name__}")
        with self._lock:
            return self._load_state_dict(state_dict, strict)

    def _load_state_dict(self, state_dict: Mapping[str, Any], strict: bool) -> IncompatibleKeys:
        current = self._state_dict()
        kept_names = set(_kept_items(self._kept))
        given, loose = {}, set()  # loose: given as lists or Python numbers, not arrays
        for name, v in state_dict.items():
            got = np.asarray(v)
            if not isinstance(v, np.ndarray | np.generic | jax.Array) and name in current:
                loose.add(name)
                want = current[name]
                if got.shape == (0,):  # an empty list: no dtype nor trailing shape of its own
                    rest = want.shape[1:] if name in kept_names else ()
                    got = np.zeros((0, *rest), want.dtype)
            given[name] = got
        known = set(given) & set(current)  # names this curriculum has (others are ignored)
        if not kept_names & known and (
            strict or "key" in known or any(_is_sampler(name) for name in known)
        ):
            # the state the current kept draws came from is replaced: the given one kept none
            given.update({name: current[name][:0] for name in kept_names})
        missing = sorted(set(current) - set(given))
        unexpected = sorted(set(given) - set(current))
        lines = [] if not strict else [f"{m}: missing" for m in missing]
        lines += (
            [] if not strict else [f"{u}: unexpected (not in this curriculum)" for u in unexpected]
        )
        if not strict and kept_names & set(given):  # the kept draws come as a whole
            lines += [
                f"{m}: missing (the kept draws come as a whole)" for m in missing if m in kept_names
            ]
        for name in sorted(set(current) & set(given)):
            want, got = current[name], given[name]
            fits = (
                got.shape[1:] == want.shape[1:] if name in kept_names else got.shape == want.shape
            )
            casts = np.can_cast(got.dtype, want.dtype, "same_kind") or (
                # a list of integers for an unsigned leaf (the key): the range check decides
                name in loose and got.dtype.kind in "biu" and want.dtype.kind in "iu"
            )
            if got.ndim != want.ndim or not fits or not casts:
                shape = (
                    "[m" + "".join(f", {d}" for d in want.shape[1:]) + "]"
                    if name in kept_names
                    else list(want.shape)
                )
                lines.append(
                    f"{name}: {got.dtype}{list(got.shape)} given, {want.dtype}{shape} expected"
                )
        if lines:
            raise ValueError(
                "load_state_dict: the state dict does not fit this curriculum:\n  - "
                + "\n  - ".join(lines)
                + "\nIt was saved from a different curriculum (pool size, sampler or gates)."
                + (" Pass strict=False to skip missing and unexpected entries." if strict else "")
            )
        merged = {name: given.get(name, current[name]) for name in current}
        lines = self._value_problems(merged, current)
        rows = {name: merged[name].shape[0] for name in sorted(kept_names)}
        if len(set(rows.values())) > 1:
            lines.append(
                "the kept draws' entries hold different numbers of rows: "
                + ", ".join(f"{name} {m}" for name, m in rows.items())
            )
        if lines:
            raise ValueError(
                "load_state_dict: the state dict holds values no run reaches (damaged or "
                "edited?); nothing was loaded:\n  - " + "\n  - ".join(lines)
            )
        values = {name: np.array(v, dtype=current[name].dtype) for name, v in merged.items()}
        try:  # checked above; built before anything is installed
            kept = _kept_from_items(self._draw, values)
        except ValueError as e:
            raise ValueError(f"load_state_dict: {e}; nothing was loaded") from None
        self._set(values, kept)
        return IncompatibleKeys(missing, unexpected)

    def _value_problems(
        self, values: Mapping[str, np.ndarray], current: Mapping[str, np.ndarray]
    ) -> list[str]:
        """One line per entry of a shape-checked state dict holding a value no run reaches."""
        if self._floors is None:
            # A signed integer leaf counts or indexes: it never goes below the smallest value it
            # starts from (0, or -1 for "never", as in floor's last_drawn). Task payloads (a
            # frontier's generated ``tasks``) may hold anything.
            fresh = jax.jit(self.curriculum.init)(jax.random.key(0))
            self._floors = {
                name: min(0, int(jnp.min(leaf)))
                for p, leaf in jax.tree_util.tree_flatten_with_path(fresh)[0]
                if jnp.issubdtype(leaf.dtype, jnp.signedinteger)
                and leaf.size
                and (name := f"state/{path_str(p)}") not in self._payloads
            }
        # Kept task ids lie in the pool, and are never negative even when its size is unknown.
        ids = KEPT if KEPT in current else f"{KEPT}/ids"
        floors = {**self._floors, **{name: 0 for name in (*_COUNTERS, ids)}}
        lines = []
        for name in sorted(values):
            got, dtype = np.asarray(values[name]), current[name].dtype
            if got.size == 0:
                continue
            if got.dtype.kind == "f" and name not in self._payloads and np.isnan(got).any():
                bad = np.flatnonzero(np.isnan(got.reshape(-1)))
                lines.append(
                    f"{name}: NaN in {bad.size} of {got.size} entries (the first at flat "
                    f"index {int(bad[0])})"
                )
            elif np.issubdtype(dtype, np.floating) and name not in self._payloads:
                finite = np.abs(got[np.isfinite(got)].astype(np.float64))
                if finite.size and finite.max() > np.finfo(dtype).max:
                    lines.append(
                        f"{name}: {float(finite.max()):g} does not fit {np.dtype(dtype).name} "
                        "(it would load as infinity)"
                    )
            elif np.issubdtype(dtype, np.integer):
                info = np.iinfo(dtype)
                low, high = int(got.min()), int(got.max())
                if low < info.min or high > info.max:
                    lines.append(
                        f"{name}: values in [{low}, {high}] do not fit {np.dtype(dtype).name}"
                    )
                elif name in floors and low < floors[name]:
                    lines.append(f"{name}: {low} is below {floors[name]}, the least it can hold")
                elif name == ids and self.num_tasks is not None and high >= self.num_tasks:
                    lines.append(f"{name}: task id {high} outside [0, {self.num_tasks})")
        return lines

    def _set(self, values: Mapping[str, np.ndarray], kept: Any) -> None:
        """Installs fresh device copies of a complete, checked state dict (and its kept
        draws, built from it): everything is built before anything is replaced."""
        flat, treedef = jax.tree_util.tree_flatten_with_path(self._state)
        leaves = [jnp.array(values[f"state/{path_str(p)}"]) for p, _ in flat]
        state = jax.tree_util.tree_unflatten(treedef, leaves)
        key = jnp.array(values["key"])
        counters = {name: int(values[name]) for name in _COUNTERS}
        self._state, self._key, self._kept = state, key, kept
        for name, value in counters.items():
            setattr(self, name, value)

    def _item(self) -> dict[str, Any]:
        """The Orbax array item (the counters and the kept draws go in the JSON item)."""
        return {"state": self._state, "key": self._key}

    def save(self, path: str | os.PathLike) -> None:
        """Saves the driver's state as an Orbax checkpoint in directory ``path`` (created;
        an earlier save there is replaced once this one is written). Blocks until written.

        Raises:
          ValueError: ``path`` holds numbered folders that are not this driver's checkpoints
            (another run's checkpoints, anything else): they would be deleted as old saves.
            Nothing is written. Called on several JAX processes (each holds a state of its
            own: keep it with :meth:`state_dict` there).
        """
        one_process("HostCurriculum.save")
        with self._lock:
            self._save(path)

    def _save(self, path: str | os.PathLike) -> None:
        store = CheckpointStore(path, max_to_keep=1)
        try:
            others = [
                str(step)
                for step in store.steps()
                if os.path.isdir(os.path.join(store.directory, str(step), "meta"))
                and store.meta(step).get("format") != FORMAT
            ]
            if others:
                raise ValueError(
                    f"refusing to save in {store.directory}: step(s) {', '.join(others)} there "
                    f"are checkpoints of another kind (not {FORMAT!r}), which this save would "
                    "delete; save elsewhere"
                )
            item = self._item()
            meta = {
                "format": FORMAT,
                "num_tasks": self.num_tasks,
                COPY_MAP: self._copy_map,
                "layout": {p: [list(s), d] for p, (s, d) in leaf_layout(item).items()},
                **{name: getattr(self, name) for name in _COUNTERS},
                KEPT: {name: v.tolist() for name, v in _kept_items(self._kept).items()},
            }
            # A new step each time: the previous checkpoint goes only once this one is written.
            latest = store.latest_step()
            store.save(0 if latest is None else latest + 1, item, meta)
        finally:
            store.close()

    def restore(self, path: str | os.PathLike) -> None:
        """Restores the newest checkpoint that :meth:`save` wrote in ``path``.

        Raises:
          FileNotFoundError: no checkpoint in ``path``.
          ValueError: ``path`` holds another kind of checkpoint, or the checkpoint was saved
            from a different curriculum (another pool size, another copy map: the sampler's
            ``entry_task``, leaves that differ: the message names each) or holds values no
            run reaches (as :meth:`load_state_dict`). Nothing is restored then. A checkpoint
            written before the copy map was saved is not checked for it. Called on several
            JAX processes (use :meth:`load_state_dict` there).
        """
        one_process("HostCurriculum.restore")
        with self._lock:
            self._restore(path)

    def _restore(self, path: str | os.PathLike) -> None:
        if not os.path.isdir(path):
            raise FileNotFoundError(f"no HostCurriculum checkpoint in {os.path.abspath(path)}")
        store = CheckpointStore(path, max_to_keep=1)
        try:
            step = store.latest_step()
            if step is None:
                raise FileNotFoundError(f"no HostCurriculum checkpoint in {store.directory}")
            folder = os.path.join(store.directory, str(step))
            if not holds_items(folder):  # another kind of Orbax checkpoint (grain's, tunix's)
                found = sorted(e.name for e in os.scandir(folder) if e.is_dir())
                raise ValueError(
                    f"{store.directory} (step {step}) holds the items {found}, not a "
                    f"HostCurriculum checkpoint ({FORMAT!r}: the items {list(ITEMS)})"
                )
            meta = store.meta(step)
            if meta.get("format") != FORMAT:
                raise ValueError(
                    f"{store.directory} holds a checkpoint of format {meta.get('format')!r}, "
                    f"not a HostCurriculum checkpoint ({FORMAT!r})"
                )
            abstract = jax.eval_shape(self._item)
            saved = {p: (tuple(s), d) for p, (s, d) in meta.get("layout", {}).items()}
            lines = layout_diff(saved, leaf_layout(abstract))
            # Saved since the copy-map check came in; a checkpoint written before is not checked.
            if COPY_MAP in meta and meta[COPY_MAP] != self._copy_map:
                lines.insert(
                    0,
                    f"copy map (the sampler's entry_task) {digest_str(meta[COPY_MAP])}, "
                    f"this one {digest_str(self._copy_map)}",
                )
            if "num_tasks" in meta and meta["num_tasks"] != self.num_tasks:
                lines.insert(0, f"pool of {meta['num_tasks']} tasks, this one {self.num_tasks}")
            if lines:
                raise ValueError(
                    f"the checkpoint in {store.directory} (step {step}) was saved from a "
                    "different curriculum:\n  - " + "\n  - ".join(lines)
                )
            item = store.restore(step, abstract)
        finally:
            store.close()
        values = {
            f"state/{path_str(p)}": np.asarray(leaf)
            for p, leaf in jax.tree_util.tree_flatten_with_path(item["state"])[0]
        }
        values["key"] = np.asarray(item["key"])
        values.update({name: np.asarray(meta[name], np.int64) for name in _COUNTERS})
        # The kept draws as JSON lists (load_state_dict checks and casts them); checkpoints
        # written before the driver kept draws have none.
        kept = meta.get(KEPT, {})
        if not isinstance(kept, Mapping):
            raise ValueError(f"restore {store.directory} (step {step}): kept is not a mapping")
        values.update({name: v for name, v in kept.items() if _is_kept(name)})
        try:  # the checks of load_state_dict: kept ids in the pool, counters, NaNs
            self.load_state_dict(values)
        except ValueError as e:
            raise ValueError(f"restore {store.directory} (step {step}): {e}") from None

    def _check_ids(self, ids: np.ndarray) -> None:
        """Task ids lie in ``[0, num_tasks)``, or with no ``num_tasks`` in ``[0, 2**31)`` (a
        negative id would index a per-task state from its end)."""
        if ids.size == 0:
            return
        high, bound = self.num_tasks, f"[0, {self.num_tasks})"
        if high is None:
            high, bound = 2**31, "[0, 2**31) (int32 task ids)"
        bad = (ids < 0) | (ids >= high)
        if bad.any():
            rows = np.flatnonzero(bad)
            shown = ", ".join(f"row {r}: {int(ids[r])}" for r in rows[:5])
            more = f" and {rows.size - 5} more" if rows.size > 5 else ""
            raise ValueError(
                f"observe: {rows.size} task id(s) outside {bound} ({shown}{more}); "
                "pass the ids that sample() returned for these groups"
            )


def _pad(x: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    """``x`` with zeros (False) appended along its leading axes up to ``sizes``."""
    shape = (*sizes, *x.shape[len(sizes) :])
    if x.shape == shape:
        return x
    out = np.zeros(shape, x.dtype)
    out[tuple(slice(0, d) for d in x.shape)] = x
    return out


def _of_kind(x: Any, name: str, kinds: str | None, low32: bool = False) -> Any:
    """``x`` as an array, raising TypeError unless its dtype kind is one of ``kinds`` (an
    empty one passes): a cast would truncate float answer ids or read 0.2 as valid.
    ``low32``: integers wider than 64 bits (which numpy holds as objects, or as floats beside
    negative ones) are taken modulo ``2**32``, the low 32 bits every answer id keeps."""
    arr = np.asarray(x)
    if low32 and arr.size and arr.dtype.kind in "fO":
        items = np.asarray(x, dtype=object)
        if all(isinstance(v, int | np.integer) for v in items.flat):
            arr = np.array([int(v) % 2**32 for v in items.flat], np.int64).reshape(items.shape)
    if kinds is not None and arr.size and arr.dtype.kind not in kinds:
        want = "booleans or integers" if "b" in kinds else "integers"
        raise TypeError(f"{name} must hold {want}, got {arr.dtype}")
    return arr


def _groups(
    x: Any,
    name: str,
    g: int,
    dtype,
    k: int | None = None,
    kinds: str | None = None,
    low32: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """``(array [G, K, ...], lengths)``: a dense array as it is (``lengths`` None), or a list
    of G groups of different sizes padded with zeros along their first axis to ``k`` (default:
    the longest), with each group's length. ``kinds``: the dtype kinds accepted (None: any that
    casts); ``low32``: as :func:`_of_kind`."""
    if isinstance(x, np.ndarray | jax.Array):
        arr = np.asarray(_of_kind(x, name, kinds, low32), dtype)
        if arr.ndim < 2 or arr.shape[0] != g:
            raise ValueError(f"{name} must be [G={g}, K, ...], got shape {arr.shape}")
        return arr, None
    if not isinstance(x, Sequence) or isinstance(x, str):
        raise TypeError(f"{name} must be an array or a list of groups, got {type(x).__name__}")
    if len(x) != g:
        raise ValueError(f"{name} holds {len(x)} groups, task_ids {g}")
    groups = [np.asarray(_of_kind(row, name, kinds, low32), dtype) for row in x]
    shapes = {row.shape for row in groups}
    if len(shapes) <= 1 and (k is None or not groups or groups[0].shape[:1] == (k,)):
        arr = np.stack(groups) if groups else np.zeros((0, k or 0), dtype)
        if arr.ndim < 2:
            raise ValueError(f"{name} must hold one sequence per group, got shape {arr.shape}")
        return arr, None
    rest = {row.shape[1:] for row in groups}
    if any(row.ndim == 0 for row in groups) or len(rest) != 1:
        raise ValueError(
            f"{name}: every group must be a sequence with the same trailing shape, got shapes "
            f"{sorted(row.shape for row in groups)[:5]}"
        )
    lengths = np.array([row.shape[0] for row in groups], np.int64)
    width = int(lengths.max()) if k is None else k
    if lengths.max() > width:
        raise ValueError(f"{name}: a group holds {int(lengths.max())} rollouts, rewards {width}")
    out = np.zeros((g, width, *rest.pop()), dtype)
    for i, row in enumerate(groups):
        out[i, : row.shape[0]] = row
    return out, lengths


def _same_lengths(lengths: np.ndarray | None, other: np.ndarray | None, name: str) -> None:
    if other is not None and (lengths is None or not np.array_equal(lengths, other)):
        raise ValueError(
            f"{name} is ragged but does not match rewards' group sizes "
            f"({None if lengths is None else lengths.tolist()[:8]} vs {other.tolist()[:8]})"
        )


def _empty_rows(draw: Any) -> Any:
    """Numpy arrays shaped like one draw's leaves with no rows: ``[0, ...]``."""
    return jax.tree.map(lambda a: np.zeros((0, *a.shape[1:]), a.dtype), draw)


def _num_rows(tree: Any) -> int:
    return jax.tree.leaves(tree)[0].shape[0]


def copy_map_digest(entry_task: Any) -> str | None:
    """The sha256 (hex) of a copy map ``entry_task`` as the slots it keeps state in: each
    entry's first entry of the same task (little-endian int32), so labels that group the
    entries alike give one digest; None for a sampler without one or a map where every entry
    is its own task (state in the same slots as without a map)."""
    if entry_task is None:
        return None
    e = np.asarray(entry_task)
    ent = _entries.entries(e, e.shape[0] if e.ndim else 0, "entry_task")
    if ent.is_rep.all():
        return None
    return hashlib.sha256(np.asarray(ent.rep, "<i4").tobytes()).hexdigest()


def digest_str(digest: Any) -> str:
    """A copy-map digest for an error message: ``sha256 <first 16 hex digits>`` or ``none``."""
    return "none" if digest is None else f"sha256 {str(digest)[:16]}"


def _is_kept(name: str) -> bool:
    return name == KEPT or name.startswith(KEPT + "/")


def _is_sampler(name: str) -> bool:
    """Whether a state-dict entry is (part of) the sampler's state."""
    return name == "state/sampler" or name.startswith("state/sampler/")


def _payload_names(state: Any) -> set[str]:
    """The ``state/<path>`` names of the task payloads a frontier sampler's state holds (its
    generated ``tasks``, wherever the frontier sits in the state): values of any kind."""
    frontier = sys.modules.get("curriculax.selfplay._frontier")
    if frontier is None:  # never imported: no frontier state can exist
        return set()
    kind = frontier.FrontierState
    nodes = jax.tree_util.tree_flatten_with_path(state, is_leaf=lambda x: isinstance(x, kind))[0]
    return {
        "/".join(filter(None, ("state", path_str(p), "tasks", path_str(q))))
        for p, node in nodes
        if isinstance(node, kind)
        for q, _ in jax.tree_util.tree_flatten_with_path(node.tasks)[0]
    }


def _kept_items(kept: Any) -> dict[str, np.ndarray]:
    """``{"kept": ids}``, or ``{"kept/<path>": leaf}`` for a payload draw."""
    flat = jax.tree_util.tree_flatten_with_path(kept)[0]
    return {"/".join(filter(None, (KEPT, path_str(p)))): leaf for p, leaf in flat}


def _kept_from_items(draw: Any, values: Mapping[str, Any]) -> Any:
    """Kept draws shaped like ``draw`` from :func:`_kept_items`-named entries (none: empty)."""
    flat, treedef = jax.tree_util.tree_flatten_with_path(draw)
    names = list(_kept_items(draw))
    if not any(name in values for name in names):
        return _empty_rows(draw)
    leaves = [
        np.asarray(values[name], leaf.dtype).reshape(-1, *leaf.shape[1:])
        for name, (_, leaf) in zip(names, flat)
    ]
    if len({leaf.shape[0] for leaf in leaves}) > 1:
        raise ValueError(
            "the kept draws' entries hold different numbers of rows: "
            + ", ".join(f"{n} {v.shape[0]}" for n, v in zip(names, leaves))
        )
    return jax.tree_util.tree_unflatten(treedef, leaves)
