"""The noise diagnostic's flag rates at the end of a study's budget (docs/noise.md).

An arm whose sampler keeps a noise diagnostic (``learning_progress`` and the
``reward_consistency`` wrapper: per task; ``category_bandit`` and ``category_learnability``:
per category, kept for every reward; a wrapper's own diagnostic comes before its inner's) is
read once per arm, on the host, from each seed's final sampler state: which entries the
sampler's own :func:`curriculax.samplers.noisy_tasks` /
:func:`curriculax.samplers.noisy_categories` / :func:`curriculax.samplers.contradicted_tasks`
flag with the arm's thresholds, against the
pool's true coin-flip mask. A category flag counts for every entry the sampler files under
that category (the study's ``labels`` mode), so with ``labels = "none"`` one flag marks the
whole pool. Wrappers (``floor``, ``skip_zero_variance``) are read through: the inner
sampler's state is found in the engine state by its type.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import numpy as np

import curriculax as cx
from curriculax._config import _SAMPLERS, _resolve, expand_preset

# The per-seed fields an arm's curves (and its npz file) gain; an arm file written before
# they existed lacks them: "not recorded".
FIELDS = ("noise_coin_flagged", "noise_real_flagged", "noise_unit")
# Per sampler: the unit it flags, its state's type, the factory arguments that set the
# thresholds (passed on to the host function with the same names) and that function.
_KINDS = {
    cx.samplers.learning_progress: (
        "task",
        cx.samplers.LearningProgressState,
        ("noise_visits", "noise_reliability"),
        cx.samplers.noisy_tasks,
    ),
    cx.samplers.category_bandit: (
        "category",
        cx.samplers.CategoryBanditState,
        ("noise_batches", "noise_reliability"),
        cx.samplers.noisy_categories,
    ),
    # Per task, proof rather than a threshold: the tasks whose reward contradicted itself.
    cx.samplers.reward_consistency: (
        "task",
        cx.samplers.RewardConsistencyState,
        (),
        cx.samplers.contradicted_tasks,
    ),
    # Its bandit's state: the per-category flags (the per-task posterior keeps none).
    cx.samplers.category_learnability: (
        "category",
        cx.samplers.CategoryBanditState,
        ("noise_batches", "noise_reliability"),
        cx.samplers.noisy_categories,
    ),
}


class NoiseDiagnostic(NamedTuple):
    """The noise diagnostic of an arm's sampler.

    Attributes:
      unit: ``"task"`` or ``"category"``.
      state_type: the type of the sampler state that holds it.
      thresholds: the arm's threshold arguments (only those its config sets; the others are
        the factory's defaults, which the host functions share).
      flagged: the host function, ``flagged(state, **thresholds) -> int64[M]`` ids.
      categories: a category bandit's ``categories`` when its config gives them (None: the
        study's, per its ``labels`` mode).
      shares_copies: a per-task diagnostic whose sampler keeps one state per task (it takes
        ``entry_task``): it flags a task at its first entry, and the flag holds for every copy.
    """

    unit: str
    state_type: type
    thresholds: dict
    flagged: Any
    categories: Any = None
    shares_copies: bool = False


def noise_diagnostic(arm: Mapping) -> NoiseDiagnostic | None:
    """The noise diagnostic of ``arm``'s sampler (looked for through wrappers' ``inner``
    tables), or None: an oracle arm, or a sampler without one."""
    spec = expand_preset(arm.get("curriculum") or {}).get("sampler")
    while isinstance(spec, Mapping) and "type" in spec:
        factory = _resolve("sampler", _SAMPLERS, spec["type"], f"arm {arm['name']!r}: sampler")
        if factory in _KINDS:
            unit, state_type, names, flagged = _KINDS[factory]
            thresholds = {k: spec[k] for k in names if k in spec}
            shares = unit == "task" and "entry_task" in inspect.signature(factory).parameters
            return NoiseDiagnostic(
                unit, state_type, thresholds, flagged, spec.get("categories"), shares
            )
        spec = spec.get("inner")
    return None


def final_state(diag: NoiseDiagnostic, engine_state) -> Any:
    """The sampler state holding the diagnostic, found by type in ``engine_state``'s curricula
    (under a wrapper's ``inner``). Traceable: the study's program returns it per seed.

    Raises:
      ValueError: if the curricula hold none of that type, or several.
    """
    nodes = jax.tree_util.tree_leaves(
        engine_state.curricula, is_leaf=lambda x: isinstance(x, diag.state_type)
    )
    found = [x for x in nodes if isinstance(x, diag.state_type)]
    if len(found) != 1:
        raise ValueError(
            f"the noise diagnostic needs exactly one {diag.state_type.__name__} in the engine "
            f"state, found {len(found)}"
        )
    return found[0]


def flag_shares(
    diag: NoiseDiagnostic,
    states: Any,
    coin: np.ndarray,
    categories: np.ndarray,
    entry_task: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Per seed, the share of coin-flip entries and of real entries the diagnostic flags.

    Args:
      diag: the arm's :class:`NoiseDiagnostic`.
      states: the final sampler states of all seeds (leading axis ``S``, on the host).
      coin: ``bool[N]`` the pool's true coin-flip entries.
      categories: ``i32[N]`` each entry's category as the sampler was told it.
      entry_task: ``i32[N]`` each entry's first entry holding the same task
        (:func:`curriculax.tasks.distinct_tasks`), as the sampler was given it: with
        ``diag.shares_copies`` a task's flag counts for all its copies. None: per entry.

    Returns:
      ``noise_coin_flagged`` and ``noise_real_flagged`` (``f32[S]``; NaN where the pool has
      no entry of that kind) and ``noise_unit``.
    """
    coin = np.asarray(coin, bool)
    categories = np.asarray(categories)
    num_seeds = jax.tree_util.tree_leaves(states)[0].shape[0]
    shares = np.full((2, num_seeds), np.nan, np.float32)
    for s in range(num_seeds):  # once per arm, S host calls on small arrays
        ids = diag.flagged(jax.tree.map(lambda x, s=s: x[s], states), **diag.thresholds)
        if diag.unit == "category":
            entry = categories
        elif diag.shares_copies and entry_task is not None:
            entry = np.asarray(entry_task)
        else:
            entry = np.arange(coin.size)
        hit = np.isin(entry, ids)
        for row, part in enumerate((coin, ~coin)):
            if part.any():
                shares[row, s] = hit[part].mean()
    return {
        "noise_coin_flagged": shares[0],
        "noise_real_flagged": shares[1],
        "noise_unit": diag.unit,
    }
