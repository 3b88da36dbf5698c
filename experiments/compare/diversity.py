"""How varied one seed's sampled answers stay while an arm trains (``--diversity ARM``)."""

from __future__ import annotations

import sys
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from curriculax import tasks as T
from experiments import _markdown as md
from experiments._oracle import probe_rows
from experiments.compare.config import CompareConfig
from experiments.compare.run import build_arm, probe_key, seed_keys


def diversity(
    config: CompareConfig,
    arm: Mapping,
    seed_index: int,
    *,
    samples: int = 8,
    generations: int = 200,
) -> str:
    """How varied the policy's sampled answers stay while one seed of ``arm`` trains (the
    study's own key for seed ``seed_index``, so it is the study's run): every ``eval_every``
    generation batches, ``samples`` answers at the run's temperature for every distinct task of
    the target levels (at most 32 per level). Returns a markdown table: the mean number of
    distinct answers per task, distinct answers over all of them, and the pass rate. A policy
    that answers the same whatever the prompt (a collapse) shows a handful of distinct answers
    over all tasks while its pass rate stays near 0."""
    if not 0 <= seed_index < config.seeds:
        raise ValueError(f"seed index must be in [0, {config.seeds}), got {seed_index}")
    built, every, probe = build_arm(config, arm)
    engine = built.engine
    rows = probe_rows(built.pool, 32)
    keep = np.isin(rows.category, config.experiment.task.target_levels)
    tasks = T.take(built.pool.train, jnp.asarray(rows.rows[keep]))
    key = seed_keys(config)[seed_index]

    def step(state, i):
        if probe is not None:
            k = probe_key(key, state.counters.generations)  # as run_arm draws it
            state = jax.lax.cond(i % every == 0, lambda s: probe(s, k), lambda s: s, state)
        return engine.step(state)[0], None

    run = jax.jit(lambda s: jax.lax.scan(step, s, jnp.arange(config.eval_every))[0])

    @jax.jit
    def answers(state, k):
        out = built.rollout(state.solver, tasks, k, samples)
        return out.data.completion, out.rewards

    state = engine.init(key)
    lines = [
        f"{config.title}, arm {arm['name']!r}, seed index {seed_index}: {samples} sampled "
        f"answers on each of {int(keep.sum())} target-level tasks\n",
        md.row(
            ["generation batches", "distinct answers per task (mean)", "distinct over all", "pass"]
        ),
        md.rule("rrrr"),
    ]
    chunks = config.generations // config.eval_every
    for chunk in range(chunks + 1):
        comp, rewards = (np.asarray(x) for x in answers(state, jax.random.key(chunk)))
        per_task = [len({c.tobytes() for c in group}) for group in comp]
        overall = len({c.tobytes() for group in comp for c in group})
        lines.append(
            md.row(
                [
                    chunk * config.eval_every,
                    f"{np.mean(per_task):.2f}",
                    overall,
                    f"{rewards.mean():.3f}",
                ]
            )
        )
        print(lines[-1], file=sys.stderr, flush=True)
        if chunk < chunks:
            state = run(state)
    return "\n".join(lines)
