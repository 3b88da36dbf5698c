"""Samplers on a simulated pool with known pass rates: what they draw and what they find.

Most tasks are impossible or trivial (zero-variance groups), a few are informative, and some
impossible ones become learnable at the switch step (see :mod:`curriculax.simulated_pool`).
Rewards are Bernoulli draws of the true rates (no policy), so a run of every arm over several
seeds takes well under a minute on a CPU. Prints one table row per sampler:

- informative share: share of all draws on tasks whose current rate is strictly in (0, 1)
  (and the same before the switch, warm-up included);
- steps to find half: steps after the switch until half of the emerging tasks were drawn
  once (0: at the switch step; median over seeds with a bootstrap 95% interval; "> x" where
  runs that did not find half within the run enter it: those need at least ``steps - switch``);
- emerging share, last quarter: share of the draws in the last quarter of the run (at least
  its last step) that go to emerging tasks (how well a sampler follows up what it found).

A value that does not exist prints as "-" (the share before the switch with ``--switch 0``, the
noise diagnostic's flags on coin flips in a pool without any). A pool too small to hold an
informative and an emerging task (5% each, rounded: ``--tasks`` below 11) is refused.

With ``--noisy COIN_SHARE`` the pool is a noisy one instead: coin flips (rate 0.5 whatever the
policy does), 10% learning tasks (each draw raises the rate by 1/20 from 0.1-0.3), 20% trivial,
the rest impossible; the table gives the share of draws on coin flips, draws per step of an open
learning task against a coin flip, the share of learning tasks learned, and for
``learning_progress`` the share of coin flips and of the other tasks its noise diagnostic flags.
The noisy pool has no emerging tasks: ``--switch`` is refused beside ``--noisy``.

Run: ``python -m experiments.simulated_pool`` (``--seeds 8 --tasks 4096 --num 64``);
``python -m experiments.simulated_pool --noisy 0.5 --tasks 512 --num 16 --steps 600 --seeds 4``.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import time

import numpy as np

from experiments import _cli, _stats
from experiments import _markdown as md

# The noisy pool's fixed shares (see noisy()); --noisy takes what they leave.
NOISY_TRIVIAL, NOISY_LEARNING = 0.2, 0.1
NOISY_MAX = round(1.0 - NOISY_TRIVIAL - NOISY_LEARNING, 6)


# Defaults of the sized flags, and --quick's (a flag given on the command line wins over both).
FULL = {"tasks": 4096, "num": 64, "steps": 400, "switch": 150, "seeds": 8}
QUICK = {"tasks": 512, "num": 16, "steps": 80, "switch": 40, "seeds": 2}
# --quick beside --noisy: a pool small enough that its learning tasks get the visits learning
# takes within the quick run (at 512 tasks no sampler learned any).
QUICK_NOISY = {**QUICK, "tasks": 128}
# The smallest pool whose 5% shares round to an informative and an emerging task.
MIN_TASKS = 11


def _parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])

    def sized(name: str, text: str) -> None:
        line = f"{text} (default {FULL[name]}; {QUICK[name]} with --quick"
        if QUICK_NOISY[name] != QUICK[name]:
            line += f", {QUICK_NOISY[name]} with --quick --noisy"
        line += ")"
        p.add_argument(f"--{name}", type=int, default=None, help=line)

    sized("tasks", "pool size N")
    sized("num", "groups drawn per step")
    sized("steps", "steps per run")
    sized("switch", "step at which emerging tasks turn")
    p.add_argument("--group-size", type=int, default=8)
    sized("seeds", "seeds per sampler")
    p.add_argument("--quick", action="store_true", help="a smoke run in seconds (smaller defaults)")
    p.add_argument(
        "--noisy",
        type=float,
        default=None,
        metavar="SHARE",
        help=f"a pool with this share of coin flips, in [0, {NOISY_MAX:g}]",
    )
    _cli.add_debug_flag(p)
    args = p.parse_args(argv)
    # Before the defaults below fill --switch in: given beside --noisy, it would be ignored.
    if args.noisy is not None and args.switch != p.get_default("switch"):
        raise ValueError(
            f"--switch is not used with --noisy (the noisy pool has no emerging tasks), got "
            f"--switch {args.switch}"
        )
    sizes = (QUICK_NOISY if args.noisy is not None else QUICK) if args.quick else FULL
    args.defaulted = set()  # the flags filled in here, which an error must call defaults
    for name, value in sizes.items():
        if getattr(args, name) is None:  # --quick once overrode flags given beside it
            setattr(args, name, value)
            args.defaulted.add(name)
    _check(args)
    return args


def _check(args: argparse.Namespace) -> None:
    """Each flag in range before anything is built (a ValueError naming the flag)."""
    _cli.check_int(args.tasks, "--tasks", 1, "pool size")
    _cli.check_int(args.num, "--num", 1, "groups drawn per step")
    _cli.check_int(args.steps, "--steps", 1, "steps per run")
    _cli.check_int(args.group_size, "--group-size", 1, "rollouts per group")
    _cli.check_int(args.seeds, "--seeds", 1, "seeds per sampler")
    if args.noisy is not None:
        if not 0.0 <= args.noisy <= NOISY_MAX:  # nan too
            raise ValueError(
                f"--noisy must be a share in [0, {NOISY_MAX:g}], got {args.noisy!r} (the "
                f"coin-flip share; {NOISY_LEARNING:.0%} learning and {NOISY_TRIVIAL:.0%} "
                "trivial tasks take the rest)"
            )
    elif not 0 <= args.switch < args.steps:
        given = (
            f"{args.switch}, its default{' with --quick' if args.quick else ''}; give a --switch "
            "below --steps"
            if "switch" in getattr(args, "defaulted", ())
            else str(args.switch)
        )
        raise ValueError(
            f"--switch must lie in [0, --steps {args.steps}), got {given} (the step at which "
            "emerging tasks turn)"
        )


def _mean_sd(x) -> str:
    """``0.123 ± 0.004``, or ``-`` for a value that does not exist (nan)."""
    x = np.asarray(x, np.float64)
    if np.all(np.isnan(x)):
        return "-"
    return f"{np.mean(x):.3f} ± {np.std(x):.3f}"


def _share(flags: np.ndarray) -> str:
    """The share of ``flags`` set, or ``-`` where there are none (a pool without coin flips)."""
    return f"{flags.mean():.3f}" if flags.size else "-"


def noisy(args) -> None:
    import jax

    import curriculax as cx
    from curriculax import simulated_pool as sp

    n = args.tasks
    pool = sp.make_pool(
        n,
        trivial=NOISY_TRIVIAL,
        informative=0.0,
        emerging=0.0,
        coin_flip=args.noisy,
        learning=NOISY_LEARNING,
        learn_draws=20,
        seed=3,
    )
    keys = jax.random.split(jax.random.key(7), args.seeds)
    coin = np.asarray(pool.kind) == sp.COIN_FLIP
    print(f"# noisy simulated pool  {datetime.date.today()}  {platform.node()}")
    print(
        f"# N={n} ({_composition(pool)}), "
        f"{args.num} groups of {args.group_size} per step, {args.steps} steps, {args.seeds} seeds"
    )
    print()
    print(
        "| sampler | coin-flip share | draws/step: open learning task | draws/step: coin flip "
        "| learned | flagged: coin flips | flagged: other |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    s = cx.samplers
    arms = {
        "uniform": s.uniform(n),
        "learnability": s.learnability(n),
        "learning_progress": s.learning_progress(n),
    }
    for name, sampler in arms.items():
        trace = sp.run(
            sampler, pool, steps=args.steps, num=args.num, keys=keys, group_size=args.group_size
        )
        m = sp.summarize(pool, trace)
        flagged = "-", "-"
        if name == "learning_progress":
            f = np.asarray(jax.vmap(s.looks_like_noise)(trace.state))
            flagged = (_share(f[:, coin]), _share(f[:, ~coin]))
        print(
            f"| {name} | {_mean_sd(m['coin_flip_share'])} | {_mean_sd(m['learning_rate'])} | "
            f"{_mean_sd(m['coin_flip_rate'])} | {_mean_sd(m['learned_share'])} | "
            f"{flagged[0]} | {flagged[1]} |",
            flush=True,
        )


def arms(n: int) -> dict:
    import curriculax as cx

    s = cx.samplers
    return {
        "uniform": s.uniform(n),
        "difficulty_pools": s.difficulty_pools(n),
        "difficulty_pools, score_half_life=1": s.difficulty_pools(n, score_half_life=1.0),
        "learnability (defaults)": s.learnability(n),
        "learnability, half_life=None": s.learnability(n, half_life=None),
        "learnability, half_life=4": s.learnability(n, half_life=4.0),
        'learnability, draw="mean"': s.learnability(n, draw="mean"),
        "skip_zero_variance(uniform)": s.skip_zero_variance(n, s.uniform(n)),
        "floor(difficulty_pools, staleness_share=0.2)": s.floor(
            n, s.difficulty_pools(n), uniform_share=0.0, staleness_share=0.2
        ),
    }


def _composition(pool) -> str:
    """The pool's tasks by kind as the header prints them, counted (the shares are rounded to
    whole tasks: 11 tasks at 5% informative hold 1, 9%)."""
    from curriculax import simulated_pool as sp

    counts = np.bincount(np.asarray(pool.kind), minlength=len(sp.KINDS))
    n = counts.sum()
    return ", ".join(
        f"{c} {name.replace('_', ' ')} ({c / n:.0%})" for name, c in zip(sp.KINDS, counts) if c
    )


def main(argv=None) -> None:
    args = _parse(argv)
    if args.noisy is not None:
        noisy(args)
        return
    import jax

    from curriculax import simulated_pool as sp

    pool = sp.make_pool(args.tasks, switch_step=args.switch)
    kind = np.asarray(pool.kind)
    missing = [sp.KINDS[k] for k in (sp.INFORMATIVE, sp.EMERGING) if not np.any(kind == k)]
    if missing:
        raise ValueError(
            f"--tasks {args.tasks} makes a pool without {' or '.join(missing)} tasks (5% each, "
            f"rounded), which the table measures; use --tasks >= {MIN_TASKS}"
        )
    keys = jax.random.split(jax.random.key(0), args.seeds)
    print(f"# simulated pool  {datetime.date.today()}  {platform.node()}")
    print(
        f"# N={args.tasks} ({_composition(pool)}; emerging at step {args.switch}), "
        f"{args.num} groups of {args.group_size} per step, {args.steps} steps, {args.seeds} seeds"
    )
    print()
    print(
        md.row(
            [
                "sampler",
                "informative share",
                "before switch",
                "steps to find half (median [95%])",
                "emerging share, last quarter",
                "s",
            ]
        )
    )
    print(md.rule("lrrrrr"))
    for name, sampler in arms(args.tasks).items():
        t0 = time.perf_counter()
        trace = sp.run(
            sampler, pool, steps=args.steps, num=args.num, keys=keys, group_size=args.group_size
        )
        m = sp.summarize(pool, trace)
        # A run that did not find half by its last step (steps - switch - 1 after the switch)
        # would find it at steps - switch at the earliest: more than steps - switch - 1.
        bound = args.steps - args.switch - 1
        found = _stats.fmt_censored_interval(m["steps_to_find_half"], _stats.median, bound)

        cells = [
            name,
            _mean_sd(m["informative_share"]),
            _mean_sd(m["informative_share_before"]),
            found,
            _mean_sd(m["emerging_share_late"]),
            f"{time.perf_counter() - t0:.1f}",
        ]
        print(md.row(cells), flush=True)


if __name__ == "__main__":
    _cli.entry(main)
