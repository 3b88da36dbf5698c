"""A simulated task pool with known pass rates, for checking what a sampler concentrates on.

No policy learns here: each task has a true pass rate, and a group's rewards are Bernoulli
draws of it. Most tasks are impossible (rate 0) or trivial (rate 1) and give zero-variance
groups; a few are informative (rate in [0.2, 0.8]); some impossible tasks become learnable
at ``switch_step`` (the "emerging" tasks, as when a policy's skill reaches a new level). A
good sampler puts its draws on the informative tasks and finds the emerging ones soon after
the switch. Everything runs as one compiled ``lax.scan``, ``vmap``-ped over seeds, in
seconds on a CPU.

Example:
  >>> import curriculax as cx
  >>> from curriculax import simulated_pool as sp
  >>> pool = sp.make_pool(1024, switch_step=50)
  >>> trace = sp.run(cx.samplers.uniform(1024), pool, steps=100, num=32,
  ...                keys=jax.random.split(jax.random.key(0), 2))
  >>> sp.summarize(pool, trace)["informative_share"].shape
  (2,)
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax._checks import check_num_tasks, int_at_least
from curriculax._types import GroupResults, TaskDraw, TaskSampler

KINDS = ("impossible", "trivial", "informative", "emerging")
IMPOSSIBLE, TRIVIAL, INFORMATIVE, EMERGING = range(4)


class SimulatedPool(NamedTuple):
    """True pass rates of a simulated pool.

    Attributes:
      before: ``f32[N]`` pass rate of each task before ``switch_step``.
      after: ``f32[N]`` pass rate from ``switch_step`` on.
      kind: ``i32[N]`` index into :data:`KINDS`.
      switch_step: ``i32[]`` the step at which emerging tasks become learnable.
    """

    before: jax.Array
    after: jax.Array
    kind: jax.Array
    switch_step: jax.Array


class SimulationTrace(NamedTuple):
    """What a sampler did on a simulated pool (leading axis: seeds, when ``vmap``-ped).

    Attributes:
      draws: ``i32[S, steps, 4]`` draws per kind (:data:`KINDS`) at each step.
      informative: ``i32[S, steps]`` draws on a task whose current rate lies strictly
        between 0 and 1 (informative tasks, and emerging ones after the switch).
      first_found: ``i32[S, N]`` first step at or after the switch at which each task was
        drawn (``steps`` if never).
      task_draws: ``i32[S, N]`` draws of each task over the run.
    """

    draws: jax.Array
    informative: jax.Array
    first_found: jax.Array
    task_draws: jax.Array


def make_pool(
    num_tasks: int,
    *,
    trivial: float = 0.3,
    informative: float = 0.05,
    emerging: float = 0.05,
    switch_step: int = 100,
    seed: int = 0,
) -> SimulatedPool:
    """A pool of ``num_tasks`` tasks in the given shares (the rest impossible), shuffled.

    Informative tasks have a rate uniform in [0.2, 0.8]; emerging tasks have rate 0 before
    ``switch_step`` and a rate uniform in [0.2, 0.8] from then on.
    """
    n = check_num_tasks(num_tasks)
    shares = {"trivial": trivial, "informative": informative, "emerging": emerging}
    for name, share in shares.items():
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
            raise ValueError(f"{name} must be a share in [0, 1], got {share!r}")
    if trivial + informative + emerging > 1:
        raise ValueError(f"the shares {shares} add up to more than 1")
    switch_step = int_at_least(switch_step, "switch_step", 0)
    rng = np.random.default_rng(seed)
    counts = [round(n * trivial), round(n * informative), round(n * emerging)]
    kind = np.full(n, IMPOSSIBLE, np.int32)
    kind[: sum(counts)] = np.repeat([TRIVIAL, INFORMATIVE, EMERGING], counts)
    kind = rng.permutation(kind)
    rates = rng.uniform(0.2, 0.8, n).astype(np.float32)
    before = np.where(kind == TRIVIAL, 1.0, np.where(kind == INFORMATIVE, rates, 0.0))
    after = np.where(kind == EMERGING, rates, before)
    return SimulatedPool(
        jnp.asarray(before, jnp.float32),
        jnp.asarray(after, jnp.float32),
        jnp.asarray(kind),
        jnp.asarray(switch_step, jnp.int32),
    )


def _results(ids: jax.Array, rates: jax.Array, key: jax.Array, group_size: int) -> GroupResults:
    """Bernoulli groups with GRPO (mean-centred, std-scaled) sequence-level advantages."""
    rewards = (jax.random.uniform(key, (ids.shape[0], group_size)) < rates[:, None]).astype(
        jnp.float32
    )
    centred = rewards - rewards.mean(axis=1, keepdims=True)
    std = rewards.std(axis=1, keepdims=True)
    adv = jnp.where(std > 0, centred / jnp.maximum(std, 1e-6), 0.0)
    ones = jnp.ones(rewards.shape, bool)
    return GroupResults(ids, rewards, ones, adv[:, :, None], ones[:, :, None])


def run(
    sampler: TaskSampler,
    pool: SimulatedPool,
    *,
    steps: int,
    num: int,
    keys: jax.Array,
    group_size: int = 8,
) -> SimulationTrace:
    """Runs ``sampler`` for ``steps`` steps of ``num`` groups, one seed per key, as one program.

    Each step samples ``num`` tasks, draws their rewards from the pool's current rates, and
    observes them.
    """
    steps = int_at_least(steps, "steps")
    num = int_at_least(num, "num")
    group_size = int_at_least(group_size, "group_size")
    n = pool.kind.shape[0]

    def one_seed(key):
        init_key, run_key = jax.random.split(key)

        def step(carry, t):
            state, first, counts = carry
            k_sample, k_rewards = jax.random.split(jax.random.fold_in(run_key, t))
            drawn, state = sampler.sample(state, k_sample, num)
            ids = drawn.ids if isinstance(drawn, TaskDraw) else drawn
            rates = jnp.where(t >= pool.switch_step, pool.after, pool.before)[ids]
            state = sampler.observe(state, _results(ids, rates, k_rewards, group_size))
            kinds = pool.kind[ids]
            per_kind = jnp.sum(kinds[:, None] == jnp.arange(4), axis=0, dtype=jnp.int32)
            useful = jnp.sum((rates > 0) & (rates < 1), dtype=jnp.int32)
            after = jnp.where(t >= pool.switch_step, t, steps)
            first = first.at[ids].min(after.astype(jnp.int32))
            counts = counts.at[ids].add(1)
            return (state, first, counts), (per_kind, useful)

        first = jnp.full((n,), steps, jnp.int32)
        counts = jnp.zeros((n,), jnp.int32)
        (_, first, counts), (draws, useful) = jax.lax.scan(
            step, (sampler.init(init_key), first, counts), jnp.arange(steps, dtype=jnp.int32)
        )
        return SimulationTrace(draws, useful, first, counts)

    return jax.jit(jax.vmap(one_seed))(keys)


def summarize(pool: SimulatedPool, trace: SimulationTrace) -> dict[str, np.ndarray]:
    """Per-seed numbers (``f64[S]`` each):

    - ``informative_share``: share of all draws on tasks with a rate strictly in (0, 1);
    - ``informative_share_before``: the same before the switch;
    - ``steps_to_find_half``: steps after the switch until half of the emerging tasks were
      drawn at least once (``inf`` if that did not happen before the end of the run);
    - ``emerging_share_late``: share of the draws in the last quarter of the run on emerging
      tasks.
    """
    draws = np.asarray(trace.draws, np.float64)
    useful = np.asarray(trace.informative, np.float64)
    first = np.asarray(trace.first_found)
    kind = np.asarray(pool.kind)
    switch = int(pool.switch_step)
    steps = draws.shape[1]
    total = draws.sum(axis=2)
    emerging = first[:, kind == EMERGING]
    if emerging.size:
        half = np.sort(emerging, axis=1)[:, max((emerging.shape[1] + 1) // 2 - 1, 0)]
        found = np.where(half < steps, half - switch, np.inf)
    else:
        found = np.zeros(draws.shape[0])
    late = slice(steps - steps // 4, steps)
    return {
        "informative_share": useful.sum(1) / total.sum(1),
        "informative_share_before": (
            useful[:, :switch].sum(1) / np.maximum(total[:, :switch].sum(1), 1)
        ),
        "steps_to_find_half": np.asarray(found, np.float64),
        "emerging_share_late": draws[:, late, EMERGING].sum(1) / total[:, late].sum(1),
    }
