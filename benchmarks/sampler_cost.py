"""One jitted sample + observe step of the per-task and per-category samplers, as N grows.

Side by side in one run: ``learnability`` (one ``top_k`` over the pool), ``category_bandit``
(no per-task state) and ``category_learnability`` (the bandit's counts, learnability's choice
inside each category) over 8 categories of equal size and over 8 categories one of which holds
93% of the pool (the uneven case its row layout is for); ``hierarchical_learnability`` over
the equal categories and the ``robust`` preset around it (``cx.robust_curriculum``); and
learnability inside the ``reward_consistency`` sampler, alone and with the gate of that name (a
curriculum: the synthetic groups' answers repeat, so tasks get marked, replaced and rejected).
A step draws ``--num`` tasks and observes synthetic groups of 8 rollouts for them (built before
the timing, one per step, their task ids replaced by the drawn ones inside the step); the time
is the best of 3 repeats of ``--steps`` steps (compilation excluded, the keys built before the
timing). This machine is shared: compare the columns of one run, not absolute times across runs.

Run: ``python -m benchmarks.sampler_cost`` (``--quick``: small pools, for the tests).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

import curriculax as cx
from benchmarks.curriculum_step import machine_info
from curriculax.testing import synthetic_results

SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (1_000, 4_000)
NUM_CATEGORIES = 8


def samplers(n: int) -> dict[str, Callable[[], cx.TaskSampler | cx.Curriculum]]:
    """The compared samplers (and one curriculum with a gate) for a pool of ``n`` tasks."""
    equal = np.arange(n) % NUM_CATEGORIES
    uneven = np.where(np.arange(n) < 0.93 * n, 0, np.arange(n) % (NUM_CATEGORIES - 1) + 1)
    return {
        "learnability": lambda: cx.samplers.learnability(n),
        "category_bandit": lambda: cx.samplers.category_bandit(n, equal),
        "category_learnability, equal": lambda: cx.samplers.category_learnability(n, equal),
        "category_learnability, one 93%": lambda: cx.samplers.category_learnability(n, uneven),
        "hierarchical_learnability, equal": lambda: cx.samplers.hierarchical_learnability(n, equal),
        "robust_curriculum, equal": lambda: cx.robust_curriculum(n, equal),
        "consistency(learnability)": lambda: cx.samplers.reward_consistency(
            n, cx.samplers.learnability(n)
        ),
        "consistency(learnability) + gate": lambda: cx.curriculum(
            cx.samplers.reward_consistency(n, cx.samplers.learnability(n)),
            gates={"consistency": cx.gates.reward_consistency(n)},
        ),
    }


def step_ms(sampler: cx.TaskSampler | cx.Curriculum, num: int, steps: int) -> float:
    """Best of 3 repeats of ``steps`` jitted sample + observe steps, in ms per step.

    The synthetic groups are built before the timing, one per key (as
    ``benchmarks.curriculum_step`` hands its step precomputed results); inside the step only
    their task ids are replaced by the drawn ones, so the timed step is sample + observe.
    """

    def step(state, key, results):
        ids, state = sampler.sample(state, key, num)
        state = sampler.observe(state, results._replace(task_ids=ids))
        if isinstance(sampler, cx.Curriculum):  # (admission, state)
            state = state[1]
        return state, ids

    results_for = jax.jit(lambda key: synthetic_results(key, jnp.zeros((num,), jnp.int32), 8))

    run = jax.jit(step)
    state, ids = run(
        sampler.init(jax.random.key(0)), jax.random.key(1), results_for(jax.random.key(2))
    )
    ids.block_until_ready()
    # The keys and results are built before the timing (a host-side jax.random.key costs about
    # as much as a small step; the synthetic rewards are PRNG draws), so only the step is timed.
    keys = jax.block_until_ready(
        [[jax.random.key(100 * r + i) for i in range(steps)] for r in range(3)]
    )
    results = jax.block_until_ready(
        [[results_for(jax.random.fold_in(k, 1)) for k in row] for row in keys]
    )
    best = float("inf")
    for r in range(3):
        start = time.perf_counter()
        for i in range(steps):
            state, ids = run(state, keys[r][i], results[r][i])
        ids.block_until_ready()
        best = min(best, (time.perf_counter() - start) / steps)
    return best * 1e3


def main(argv: Sequence[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num", type=int, default=256, help="tasks per sample call")
    parser.add_argument("--steps", type=int, default=20, help="steps per timed repeat")
    parser.add_argument("--quick", action="store_true", help="small pools (seconds)")
    args = parser.parse_args(argv)
    sizes = QUICK_SIZES if args.quick else SIZES
    names = list(samplers(sizes[0]))
    print(machine_info("benchmarks.sampler_cost", argv))
    print(f"num = {args.num}, best of 3 x {args.steps} steps, ms per jitted sample + observe\n")
    print("| N | " + " | ".join(names) + " |")
    print("|---:|" + "---:|" * len(names))
    rows = []
    for n in sizes:
        row = {name: step_ms(make(), args.num, args.steps) for name, make in samplers(n).items()}
        rows.append({"n": n, **row})
        print(f"| {n:,} | " + " | ".join(f"{row[k]:.2f}" for k in names) + " |", flush=True)
    return {"rows": rows}


if __name__ == "__main__":
    main()
