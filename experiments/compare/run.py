"""Running one arm: all its seeds as one ``vmap``-ped, scanned program."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import curriculax as cx
from curriculax import tasks as T
from curriculax.tasks import per_level_mean
from experiments import _cli
from experiments._builders import build, check_target, make_study_pool, sampler_categories
from experiments._environment import environment
from experiments._oracle import build_oracle, make_measure, oracle, probe_rows
from experiments._progress import StudyProgress
from experiments.compare.config import (
    CompareConfig,
    arm_experiment,
    arm_oracle,
    check_main_job_only,
)
from experiments.compare.noise import final_state, flag_shares, noise_diagnostic

# The random-key salts, folded into each seed's key: the oracle arm's probe and the free
# pass-rate measurement draw from streams of their own, apart from the engine's.
PROBE_SALT = 0x0AC1E
MEASURE_SALT = 0x9A55


def seed_keys(config: CompareConfig) -> jax.Array:
    """``key[S]``: one key per seed, the same for every arm (seed ``i`` of every arm starts
    from the same initial policy)."""
    return jax.random.split(jax.random.key(config.experiment.seed), config.seeds)


def probe_key(key: jax.Array, generations) -> jax.Array:
    """The oracle probe's key at ``generations`` generation batches into the run of ``key``."""
    return jax.random.fold_in(jax.random.fold_in(key, PROBE_SALT), generations)


def measure_key(key: jax.Array, generations) -> jax.Array:
    """The pass-rate probe's key at ``generations`` generation batches into the run of ``key``."""
    return jax.random.fold_in(jax.random.fold_in(key, MEASURE_SALT), generations)


def check_arms(config: CompareConfig) -> None:
    """Builds what every arm is made of (its experiment, pool, curriculum or oracle settings)
    without running anything, so a bad arm is refused before the first one runs; and refuses
    a main-job setting the study's ``[experiment]`` sets (:func:`check_main_job_only`).

    Raises:
      ValueError: naming the arm and what is wrong with it (a target that selects no
        held-out task among them: its score would be 0/0).
    """
    check_main_job_only(config)
    pools = {}
    for arm in config.arms:
        try:
            exp = arm_experiment(config, arm)
            _cli.check_values(exp, "experiment.")
            key = repr(dataclasses.asdict(exp))
            pool = pools[key] = pools.get(key) or make_study_pool(exp)
            check_target(pool, exp.task)
            n = exp.task.size
            orc = arm_oracle(arm)
            if orc is None:
                cx.curriculum_from_config(
                    arm["curriculum"],
                    n,
                    categories=sampler_categories(pool, exp.task.labels),
                    entry_task=T.distinct_tasks(pool.train),
                )
                continue
            cx.curriculum_from_config({"gates": arm["oracle"].get("gates", {})}, n)
            oracle(n, draw=orc["draw"], floor=orc["floor"], uniform_share=orc["uniform_share"])
            if not isinstance(orc["samples"], int) or orc["samples"] < 1:
                raise ValueError(f"oracle.samples must be an int >= 1, got {orc['samples']!r}")
            if orc["exact"] and exp.grpo.reward != "exact":
                raise ValueError(
                    f"oracle.exact needs grpo.reward = 'exact', got {exp.grpo.reward!r}; "
                    "set oracle.exact = false to measure by sampled rollouts"
                )
            probe_rows(pool, orc["per_category"])
        except (ValueError, TypeError) as e:
            raise ValueError(f"arm {arm['name']!r}: {e}") from None


def build_arm(config: CompareConfig, arm: Mapping, mesh=None):
    """``(built, every, probe)``: one arm's engine and pool, and for an oracle arm its probe
    (``probe(engine_state, key) -> engine_state``) and the generation batches between probes
    (``probe`` None and ``every = eval_every`` otherwise)."""
    exp = arm_experiment(config, arm)
    orc = arm_oracle(arm)
    if orc is None:
        return build(exp, mesh, curriculum=arm["curriculum"]), config.eval_every, None
    built, probe = build_oracle(exp, orc, arm["oracle"].get("gates", {}), mesh)
    return built, orc["every"] or config.eval_every, probe


def run_arm(config: CompareConfig, arm: Mapping, mesh=None, progress=None) -> dict:
    """All seeds of one arm as one program. Returns per-seed curves (numpy), one point per
    evaluation: ``held_out`` (target score), ``levels`` (per level), ``rollouts``,
    ``updates``, ``draws`` (per category, in the chunk), ``task_draws`` (per pool entry, in
    the chunk; ``entry_category`` each entry's category), ``signal`` (groups whose rewards
    differ, in the chunk), ``groups``, ``admitted``; for a sampler with a
    ``skip_zero_variance`` wrapper, ``replay_target_share`` and ``forgotten_share``
    (:func:`replay_shares`, at each evaluation); with pass-rate diagnostics on, also
    ``pass_rate`` (each probed task's measured pass rate at the evaluation, ``[S, E, R]``)
    and ``probe_category`` (each probed task's category); with the step-0 histogram on,
    ``step0_pass_rate`` (``[S, R]``, the initial policy's) and ``step0_category``; for a
    sampler with a noise diagnostic (:mod:`experiments.compare.noise`), at the end of the
    budget, ``noise_coin_flagged`` and ``noise_real_flagged`` (``f32[S]``: the shares of
    coin-flip and of real entries it flags) and ``noise_unit`` (``"task"``, ``"category"``).

    ``progress``: an :class:`experiments._progress.StudyProgress` for ``seeds x evaluations``
    ticks (:func:`progress_for`), or None.
    """
    curves, final = run_seeds(config, arm, mesh, progress)
    diag = noise_diagnostic(arm)
    if diag is not None:
        exp = arm_experiment(config, arm)
        pool = make_study_pool(exp)  # the truth: the pool's coin flips, not the labels
        coin = np.zeros(pool.category.shape, bool)
        if pool.coin_level is not None:
            coin = pool.category == pool.coin_level
        categories = diag.categories
        if categories is None:
            categories = sampler_categories(pool, exp.task.labels)
        entry_task = T.distinct_tasks(pool.train)  # as the arm's sampler was given it
        curves.update(flag_shares(diag, final, coin, categories, entry_task))
    return curves


def progress_for(config: CompareConfig, arm: Mapping) -> StudyProgress:
    """The progress line of one arm: a tick per seed per evaluation."""
    evaluations = config.generations // config.eval_every
    return StudyProgress(f"   {arm['name']}", config.seeds * evaluations)


# The skip wrapper's replay metrics recorded at each evaluation (curve name: metric name).
REPLAY_METRICS = {"replay_target_share": "target_share", "forgotten_share": "forgotten_share"}


def replay_shares(engine, state) -> dict[str, jax.Array]:
    """``{curve: f32[]}``: a ``skip_zero_variance`` wrapper's steered ``target_share`` and
    ``forgotten_share`` (its ``sampler/...`` metrics; the innermost wrapper's, if several) in
    ``state``; empty for an arm without one (an oracle, or a sampler that does not skip)."""
    out = {}
    for env, curriculum in engine.curricula.items():
        metrics = curriculum.metrics(state.curricula[env])
        for curve, metric in REPLAY_METRICS.items():
            names = sorted(k for k in metrics if k.startswith("sampler/") and k.endswith(metric))
            if names and curve not in out:
                out[curve] = jnp.asarray(metrics[names[0]], jnp.float32)
    return out


def run_seeds(
    config: CompareConfig, arm: Mapping, mesh=None, progress: StudyProgress | None = None
) -> tuple[dict, Any]:
    """``(curves, final)``: :func:`run_arm`'s curves without the noise flags, and each seed's
    final sampler state that holds the arm's noise diagnostic (leading axis ``S``, numpy;
    None for an arm without one: :func:`experiments.compare.noise.noise_diagnostic`)."""
    exp = arm_experiment(config, arm)
    diag = noise_diagnostic(arm)
    built, every, probe = build_arm(config, arm, mesh)
    engine, pool = built.engine, built.pool
    held_out = pool.held_out
    target = jnp.asarray(pool.target, jnp.float32)
    levels = jnp.asarray(held_out.level)
    num_levels = exp.task.num_levels
    category = jnp.asarray(pool.category)
    num_cat = pool.num_categories
    blocks = config.eval_every // every
    chunks = config.generations // config.eval_every
    measure, rows = None, None
    if config.pass_rate_samples:
        measure, rows = make_measure(
            built, per_category=config.pass_rate_per_category, samples=config.pass_rate_samples
        )
    measure0, rows0 = None, None
    if config.step0_samples:
        measure0, rows0 = make_measure(
            built, per_category=config.pass_rate_per_category, samples=config.step0_samples
        )

    def gen_stats(report):
        gen = report.generation
        r, v = gen.rewards, gen.valid
        hi = jnp.max(jnp.where(v, r, -jnp.inf), axis=1)
        lo = jnp.min(jnp.where(v, r, jnp.inf), axis=1)
        draws = jnp.zeros((num_cat,), jnp.int32).at[category[gen.task_ids]].add(1)
        return {
            "draws": draws,
            "task_draws": jnp.zeros(category.shape, jnp.int32).at[gen.task_ids].add(1),
            "signal": jnp.sum(hi > lo, dtype=jnp.int32),
            "groups": jnp.int32(gen.task_ids.shape[0]),
            "admitted": jnp.sum(gen.admitted, dtype=jnp.int32),
        }

    def one_seed(key):
        def block(state, _):
            if probe is not None:
                state = probe(state, probe_key(key, state.counters.generations))

            def step(s, _):
                s, report = engine.step(s)
                return s, gen_stats(report)

            state, stats = jax.lax.scan(step, state, None, length=every)
            return state, jax.tree.map(lambda x: jnp.sum(x, axis=0), stats)

        def chunk(state, _):
            state, stats = jax.lax.scan(block, state, None, length=blocks)
            stats = jax.tree.map(lambda x: jnp.sum(x, axis=0), stats)
            scores = engine.solver.evaluate(state.solver, held_out, key)
            out = {
                "held_out": jnp.sum(scores * target) / jnp.sum(target),
                "levels": per_level_mean(scores, levels, num_levels),
                "rollouts": state.counters.rollouts,
                "updates": state.counters.updates,
                **stats,
            }
            out.update(replay_shares(engine, state))
            if measure is not None:
                out["pass_rate"] = measure(
                    state.solver, measure_key(key, state.counters.generations)
                )
            if progress is not None:  # a tick per seed: the held-out score is batched by vmap
                jax.debug.callback(progress.tick, out["held_out"])
            return state, out

        init = engine.init(key)
        last, curve = jax.lax.scan(chunk, init, None, length=chunks)
        if measure0 is not None:
            # Generation 0 is never an evaluation's, so this key is the step-0 probe's own.
            curve["step0_pass_rate"] = measure0(init.solver, measure_key(key, 0))
        # The end-of-budget sampler state the noise flags are read from (on the host, once).
        return curve, None if diag is None else final_state(diag, last)

    keys = seed_keys(config)
    fn = jax.vmap(one_seed)
    if mesh is not None:
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        split = NamedSharding(mesh, P(mesh.axis_names[0]))
        fn = jax.jit(fn, in_shardings=split, out_shardings=split)
        keys = jax.device_put(keys, split)
    else:
        fn = jax.jit(fn)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    curves, final = jax.device_get(fn(keys))
    if progress is not None:
        jax.effects_barrier()  # every tick in before the arm's line is printed
    curves = {k: np.asarray(v) for k, v in curves.items()}
    curves["seconds"] = time.perf_counter() - t0
    curves["load"] = (load0, os.getloadavg()[0])
    curves["environment"] = environment()
    curves["category_names"] = list(pool.category_names)
    curves["category_entries"] = np.bincount(pool.category, minlength=num_cat)
    curves["entry_category"] = np.asarray(pool.category)
    if rows is not None:
        curves["probe_category"] = rows.category
    if rows0 is not None:
        curves["step0_category"] = rows0.category
    return curves, final
