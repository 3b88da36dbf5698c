"""The curriculum step in plain Python with a per-draw O(N) scan of the pool.

The pure-Python baseline of ``benchmarks/curriculum_step.py``. It measures the O(num x N)
per-draw algorithm, not the cost of being on the host: the efficient host baseline is
:mod:`benchmarks._numpy_baseline`. It has the same semantics as
``cx.curriculum(cx.samplers.difficulty_pools(N), gates={"zero_advantage":
cx.gates.advantage_range(0.0, 0.0)})``, in the style of prime-rl's difficulty pools and
advantage gate: plain Python and :mod:`random`, a dict per task (``score``, ``scored``,
``seen``), and one weighted draw over the whole pool per dispatched task. Each draw re-derives
the bands by scanning the pool (which tasks are drawable, how many sit in each band), builds a
weight per task (band weight / band size, so a band is chosen in proportion to its weight and a
task uniformly inside it) and calls :func:`random.choices` once: O(N) per draw, O(num x N) per
``sample`` call. ``observe`` loops over groups in Python; the sampler sees every group first,
then every gate votes on every group (no short-circuit), and a group is admitted only if every
gate admits it and it has a valid rollout.

Results arrive as nested Python lists (``numpy.ndarray.tolist()``, done outside the timing),
the cheapest form for this code to read.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Sequence

DEFAULT_BANDS = (("hard", 0.25, 0.2), ("medium", 0.75, 1.0), ("easy", 1.0, 0.2))


class HostDifficultyPools:
    """Difficulty pools with warm-up, bands, an ``unscored`` group and a uniform fallback.

    Args:
      num_tasks: pool size ``N``.
      bands: ``(name, max_reward, weight)`` triples; a score above every threshold falls in
        the last band.
      unscored_weight: weight of tasks seen but never validly scored.
      seed: seed of the host :class:`random.Random`.
    """

    def __init__(
        self,
        num_tasks: int,
        bands: Sequence[tuple[str, float, float]] = DEFAULT_BANDS,
        *,
        unscored_weight: float = 0.2,
        seed: int = 0,
    ):
        self.num_tasks = num_tasks
        bands = sorted(bands, key=lambda b: b[1])
        self.band_names = [b[0] for b in bands]
        self.thresholds = [float(b[1]) for b in bands]
        self.weights = [float(b[2]) for b in bands] + [float(unscored_weight)]
        self.rng = random.Random(seed)
        self.tasks: dict[int, dict] = {
            tid: {"score": 0.0, "scored": False, "seen": False} for tid in range(num_tasks)
        }
        self.warmup_order = list(range(num_tasks))
        self.rng.shuffle(self.warmup_order)
        self.unseen = num_tasks  # warm-up lasts while a task is unseen
        self.fallback = 0

    def label(self, task: dict) -> int:
        """Band index of a seen task (``len(bands)`` for the unscored group)."""
        if not task["scored"]:
            return len(self.thresholds)
        return min(bisect.bisect_left(self.thresholds, task["score"]), len(self.thresholds) - 1)

    def draw_one(self, exclude: set[int]) -> int | None:
        """One weighted draw over the pool, skipping ``exclude``; ``None``: nothing is drawable."""
        ids, labels = [], []
        counts = [0] * len(self.weights)
        for tid, task in self.tasks.items():
            if task["seen"] and tid not in exclude:
                lab = self.label(task)
                ids.append(tid)
                labels.append(lab)
                counts[lab] += 1
        per_task = [w / c if c else 0.0 for w, c in zip(self.weights, counts)]
        weights = [per_task[lab] for lab in labels]
        if not any(w > 0 for w in weights):
            return None
        return self.rng.choices(ids, weights=weights)[0]

    def sample(self, num: int, max_draws: int | None = None) -> list[int]:
        """``num`` task ids: warm-up first, then one weighted draw per position.

        ``max_draws`` stops after that many weighted draws (to time a few of them on big pools);
        the result is then shorter than ``num``.
        """
        ids = []
        if self.unseen:  # warm-up: unseen tasks only, in a shuffled order
            ids = [t for t in self.warmup_order if not self.tasks[t]["seen"]][:num]
        for tid in ids:
            self.mark_seen(tid)
        exclude = set(ids)
        draws = 0
        while len(ids) < num and (max_draws is None or draws < max_draws):
            tid = self.draw_one(exclude)
            draws += 1
            if tid is None:
                break
            ids.append(tid)
            exclude.add(tid)
        if max_draws is not None and draws >= max_draws:
            return ids
        distinct = len(ids)
        if distinct == 0:
            self.fallback += 1
            ids = [self.rng.randrange(self.num_tasks) for _ in range(num)]
        else:
            ids = [ids[p % distinct] for p in range(num)]
        for tid in ids:
            self.mark_seen(tid)
        return ids

    def mark_seen(self, task_id: int) -> None:
        """Marks a task seen, keeping count of the unseen ones (warm-up lasts while any are)."""
        if not self.tasks[task_id]["seen"]:
            self.tasks[task_id]["seen"] = True
            self.unseen -= 1

    def observe(self, task_id: int, rewards: list[float], valid: list[bool]) -> None:
        """Takes one group: its score is the mean over its valid rollouts."""
        if not 0 <= task_id < self.num_tasks:
            return
        self.mark_seen(task_id)
        task = self.tasks[task_id]
        good = [r for r, v in zip(rewards, valid) if v]
        if good:
            task["score"] = sum(good) / len(good)
            task["scored"] = True


class HostAdvantageRange:
    """Rejects a group iff every trainable advantage lies in ``[low, high]``."""

    def __init__(self, low: float = 0.0, high: float = 0.0):
        self.low, self.high = low, high
        self.rejected = 0

    def admit(self, advantages: list[list[list[float]]], trainable: list[list[list[bool]]]) -> bool:
        has_tokens = False
        for adv_k, mask_k in zip(advantages, trainable):
            for a, m in zip(adv_k, mask_k):
                if m:
                    has_tokens = True
                    if not self.low <= a <= self.high:
                        return True
        if has_tokens:
            self.rejected += 1
            return False
        return True


class HostCurriculum:
    """A sampler plus named gates; ``observe`` loops over groups in Python."""

    def __init__(self, sampler: HostDifficultyPools, gates: dict[str, HostAdvantageRange]):
        self.sampler, self.gates = sampler, gates
        self.nonfinite = 0

    def sample(self, num: int, max_draws: int | None = None) -> list[int]:
        return self.sampler.sample(num, max_draws)

    def observe(self, task_ids, rewards, valid, advantages, token_mask) -> list[bool]:
        """Nested lists ``[G]``, ``[G][K]``, ``[G][K]``, ``[G][K][T]``, ``[G][K][T]``."""
        admitted = []
        for g, tid in enumerate(task_ids):
            clean = []
            for r, v, adv_k, mask_k in zip(rewards[g], valid[g], advantages[g], token_mask[g]):
                finite = math.isfinite(r) and all(
                    math.isfinite(a) or not m for a, m in zip(adv_k, mask_k)
                )
                if v and not finite:
                    self.nonfinite += 1
                clean.append(v and finite)
            self.sampler.observe(tid, rewards[g], clean)
            trainable = [[m and c for m in mask_k] for mask_k, c in zip(token_mask[g], clean)]
            votes = [gate.admit(advantages[g], trainable) for gate in self.gates.values()]
            admitted.append(any(clean) and all(votes))
        return admitted


def zero_advantage_curriculum(num_tasks: int, **sampler_kwargs) -> HostCurriculum:
    """The benchmark's host curriculum: difficulty pools + the zero-advantage gate."""
    return HostCurriculum(
        HostDifficultyPools(num_tasks, **sampler_kwargs),
        {"zero_advantage": HostAdvantageRange(0.0, 0.0)},
    )
