"""Self-play against the same rollout budget without a challenger, over several seeds.

    python -m experiments.selfplay.study --run-dir runs/selfplay_study
    python -m experiments.selfplay.study --config experiments/configs/selfplay/bridge.toml \
        --run-dir runs/selfplay_bridge

The default scenario, fixed before any run: the main job's policy and GRPO settings learn reversal
over 4 symbols, lengths 1-6, from a seed pool of only 4 tasks per length, so a generated task
at the frontier is data the pool lacks. Evaluation: greedy exact match on a held-out set of up
to 32 tasks per length, disjoint from the pool by key (the challenger's tasks that equal one
are rejected; ``propose`` never sees the score). Arms, sharing each seed (the same initial
policy): **self-play** (half of each generation batch from the frontier, a challenger that
generates random sequences at its level and moves the level by the judge's verdicts),
**no challenger** (the same seed sampler on the pool alone), and, where a scenario lists them,
**bandit** (each task's level drawn by the level bandit the verdicts update) and **random
generator** (the bandit with rate 0: levels uniform, the same generation budget), and, with
``--arms learned``, **learned** (a generator policy that proposes each task's level and symbols,
trained by policy gradient on the judge's gain; its table ``learned`` in the config). No gate in
any arm, so every update costs one generation batch and every arm spends the same rollouts.
Scenarios (``experiments/configs/selfplay/*.toml``, each dated and fixed before its first run)
set the pool, the held-out lengths (``held_out_levels``) and the arms.

On the host path (the default) seeds run one after another: the challenger's ``generate`` and
``propose`` are host callables with a spec of their own per seed, so the loop between rounds is
host Python per seed; the compiled programs are shared through JAX's persistent compilation
cache. With ``--compiled`` every seed of an arm runs as one compiled program
(:func:`~curriculax.selfplay.compiled_evolve` with the arm's pure challenger,
``experiments/selfplay/_challengers.py``: the same tasks from the same keys, the same judge,
held-out set and rollouts, the same records; ``seed_batch`` seeds ``vmap``-ped at a time, 0:
all); the learned arm is host-only.
Finished runs are appended to ``runs.jsonl``, each with the digest of the settings that decide
its numbers (:func:`run_settings`, kept in full in ``settings.json``); ``--resume`` skips them
and refuses records made with other settings (a run directory holding an earlier study's files
refuses without ``--resume`` or ``--overwrite``). Writes ``study.md`` (the table) and
``summary.json`` (per-seed numbers, curves, statistics). The ``experiment`` keys a run never
reads (the main job's, :data:`UNREAD`) are refused when set.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Mapping

import jax
import numpy as np

from curriculax._files import write_json_atomic, write_text_atomic
from curriculax._random import seed_key
from experiments import _cli
from experiments import _markdown as md
from experiments import _stats as S
from experiments._base import base_spec, spec_hash
from experiments._builders import (
    GRPOExperimentConfig,
    TaskConfig,
    held_out_report,
    make_study_pool,
)
from experiments._environment import describe_all, environment
from experiments._progress import StudyProgress
from experiments.selfplay._challengers import (
    CHALLENGER_ARMS,
    MAIN_JOB_ONLY,
    evolve_arm,
    refuse_unread,
)

ARMS = ("self-play", "no challenger", "bandit", "random generator", "learned")
BASELINES = ("no challenger", "random generator")

# The experiment keys a study run never reads, and what it reads instead (refused when set,
# :func:`~experiments.selfplay._challengers.refuse_unread`). ``experiment.seed`` is read: the
# first seed.
UNREAD = {
    **MAIN_JOB_ONLY,
    "target": "the study's target is the top-level `target`",
    "task.eval_levels": "the held-out levels are the top-level `held_out_levels`",
}
# StudyConfig keys that do not decide a run's numbers: which runs to make (seeds, arms), the
# path they run on (compiled, seed_batch: the same records on either path), how the table reads
# them (target) and the scenario's labels.
NOT_IN_RUN = ("seeds", "arms", "compiled", "seed_batch", "target", "scenario", "date")


@dataclasses.dataclass(frozen=True)
class StudyConfig:
    experiment: GRPOExperimentConfig = dataclasses.field(
        default_factory=lambda: GRPOExperimentConfig(
            task=TaskConfig(num_levels=6, train_per_level=4, held_out_per_level=32)
        )
    )
    seeds: int = 8
    rounds: int = 10
    steps_per_round: int = 150  # 1500 updates, 192,000 rollouts: the comparison's budget
    generated_per_round: int = 32
    frontier_share: float = 0.5  # SFL trains 50/50 on fresh levels
    max_attempts: int = 4
    start_level: int = 2
    sampler: str = "sequential"  # the seed sampler (epoch-shuffled)
    target: float = 0.5  # held-out exact match for "rollouts to target"
    arms: tuple[str, ...] = ARMS[:2]
    # A scenario (experiments/configs/selfplay/*.toml) names itself and the date it was fixed.
    scenario: str = "today"
    date: str = "2026-12-01"
    # Levels of the held-out set; () = every pool level. The held-out tasks of these levels
    # come from the same family with every level in the pool (levels the pool lacks are
    # reachable only through generated tasks: the bridge scenario).
    held_out_levels: tuple[int, ...] = ()
    # The learned arm's generator and training (curriculax.selfplay.LearnedConfig keys, e.g.
    # {width = 32, learning_rate = 0.1}); the family's shape is filled in.
    learned: dict = dataclasses.field(default_factory=dict)
    # The compiled round loop (--compiled): every seed of an arm as one compiled program
    # (curriculax.selfplay.compiled_evolve); seed_batch seeds vmap-ped together (0: all).
    compiled: bool = False
    seed_batch: int = 0

    def __post_init__(self):
        # Before any run: an arm named twice would run every seed twice and count the repeats
        # as more seeds (narrower intervals); an unknown one would fail after the others ran.
        if not self.arms:
            raise ValueError(f"arms is empty; name one or more of {list(ARMS)}")
        for arm in self.arms:
            if arm not in ARMS:
                raise ValueError(f"arms: unknown arm {arm!r}; arms are {list(ARMS)}")
            if self.arms.count(arm) > 1:
                raise ValueError(
                    f"arms: {arm!r} is named {self.arms.count(arm)} times; name each arm once "
                    "(every arm runs once per seed)"
                )


def run_settings(config: StudyConfig, *, as_written: bool = False) -> dict:
    """What decides a run's numbers, JSON-able: the config less :data:`NOT_IN_RUN`, less the
    experiment's ``seed`` (the first seed: a record names its own) and the keys a run never
    reads (:data:`UNREAD`), its ``learned`` table less the keys written out at their defaults
    (``as_written``: kept, as records made before the study dropped them digest them), and
    with a named base the hash of what it is made of (its name alone would not change with
    its TOML)."""
    settings = dataclasses.asdict(config)
    for key in NOT_IN_RUN:
        del settings[key]
    del settings["experiment"]["seed"]
    for key in UNREAD:
        *head, last = key.split(".")
        table = settings["experiment"]
        for part in head:
            table = table[part]
        del table[last]
    if not as_written:
        settings["learned"] = learned_as_omitted(config.learned, config)
    base = base_spec(config.experiment)
    if base is not None:
        settings["base"] = spec_hash(base)
    return json.loads(json.dumps(settings))  # tuples as lists, as the file holds them


def learned_as_omitted(learned: Mapping, config: StudyConfig) -> dict:
    """A ``learned`` table (``config``'s, or one a ``settings.json`` holds) less the keys
    written out at the values a run of ``config``'s family fills in where they are omitted
    (:class:`~curriculax.selfplay.LearnedConfig`'s defaults, the family's shape): a table
    spelling its defaults out is the same settings as ``{}`` (and digests as it did)."""
    from curriculax.selfplay import LearnedConfig

    learned = dict(learned)
    if not learned:
        return learned
    defaults = {
        f.name: f.default
        for f in dataclasses.fields(LearnedConfig)
        if f.default is not dataclasses.MISSING
    }
    if {"num_levels", "num_symbols", "min_length"} & set(learned):
        from experiments._builders import family_spec

        spec = family_spec(config.experiment.task)
        for key in ("num_levels", "num_symbols", "min_length"):
            defaults[key] = getattr(spec, key, None)
    return {
        k: v
        for k, v in learned.items()
        if not (
            k in defaults
            and isinstance(v, bool) == isinstance(defaults[k], bool)
            and v == defaults[k]
        )
    }


def _differing(old: dict, new: dict, prefix: str = "") -> list[str]:
    """The dotted keys whose values differ between two settings tables."""
    keys = []
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k), new.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            keys += _differing(a, b, f"{prefix}{k}.")
        elif a != b:
            keys.append(prefix + k)
    return keys


def check_records(runs: list[dict], where: str) -> None:
    """Refuses records of an arm not in :data:`ARMS` (a renamed arm, another script's file:
    the table would leave them out) and two records of one ``(arm, seed)`` (``where``: the
    file or list they came from): a repeat would count as another seed and narrow the
    intervals."""
    unknown = sorted({r["arm"] for r in runs} - set(ARMS))
    if unknown:
        n = sum(r["arm"] in unknown for r in runs)
        raise ValueError(
            f"{where}: {n} record(s) of unknown arm(s) {unknown}; arms are {list(ARMS)} (the "
            "table would leave them out): rename them, or read the study's own records"
        )
    seen: dict = {}
    for r in runs:
        seen[r["arm"], r["seed"]] = seen.get((r["arm"], r["seed"]), 0) + 1
    for (arm, seed), n in seen.items():
        if n > 1:
            raise ValueError(
                f"{where}: arm {arm!r} seed {seed} has {n} records; each (arm, seed) is one run "
                "(a repeat would count as another seed): keep one"
            )


def check_resume(runs: list[dict], path: str, settings_path: str, config: StudyConfig) -> None:
    """Refuses to resume on records of ``path`` made with settings other than ``config``'s
    (:func:`run_settings`, by their ``settings_digest``; records made before defaults were
    dropped are the same settings where digested as written, or where the ``settings.json``
    they were made with spells out defaults of its ``learned`` table), naming the keys that
    differ where ``settings_path`` holds theirs; records without a digest (older studies) are
    resumed with a warning."""
    check_records(runs, path)
    settings = run_settings(config)
    digest = spec_hash(settings)
    undigested = sum(r.get("settings_digest") is None for r in runs)
    if undigested:
        print(
            f"warning: {undigested} record(s) in {path} carry no settings digest (made before "
            "the study recorded one): resumed without checking they were made with these "
            "settings",
            file=sys.stderr,
        )
    same = {None, digest, spec_hash(run_settings(config, as_written=True))}
    other = sorted({r.get("settings_digest") for r in runs} - same)
    if not other:
        return
    stored = None
    if os.path.exists(settings_path):
        with open(settings_path) as f:
            stored = json.load(f)
    if stored is not None and stored.get("settings_digest") in other:
        theirs = dict(stored["settings"])
        if isinstance(theirs.get("learned"), dict):
            theirs["learned"] = learned_as_omitted(theirs["learned"], config)
            if theirs == settings and len(other) == 1:  # made before defaults were dropped
                return
        what = ", ".join(_differing(theirs, settings)) + f" differ from {settings_path}"
    else:
        what = f"settings digest {', '.join(other)}, now {digest}"
    n = sum(r.get("settings_digest") in other for r in runs)
    raise SystemExit(
        f"error: {path} holds {n} run(s) made with other settings than these ({what}); "
        "--resume adds runs to records made with the same settings only: resume with theirs, "
        "or pass another --run-dir (--overwrite deletes them)"
    )


def _older_settings_kept(settings_path: str, runs: list[dict], digest: str) -> bool:
    """Whether ``settings_path`` holds the settings of records ``runs`` carry under another
    digest (made before defaults were dropped, resumed as the same settings): kept, so the
    next resume reads them again (the new runs carry ``digest``)."""
    if not os.path.exists(settings_path):
        return False
    with open(settings_path) as f:
        stored = json.load(f).get("settings_digest")
    return stored != digest and any(r.get("settings_digest") == stored for r in runs)


def scenario_held_out(exp: GRPOExperimentConfig, levels: tuple[int, ...]):
    """The held-out tasks of ``levels``, from the family with every level in the pool (the
    same data seed, so the tasks are the same whatever the scenario's pool holds)."""
    full = dataclasses.replace(
        exp, task=dataclasses.replace(exp.task, level_mass=(), eval_levels=(), pool_size=0)
    )
    held = make_study_pool(full).held_out
    keep = np.flatnonzero(np.isin(np.asarray(held.level), levels))
    if keep.size == 0:
        raise ValueError(f"held_out_levels={list(levels)}: no held-out task at these levels")
    return jax.tree.map(lambda x: x[keep], held)


def _scenario_tasks(config: StudyConfig):
    """``(train pool, held-out tasks)`` of the scenario."""
    exp = config.experiment
    pool = make_study_pool(exp)
    train, held_out = pool.train, pool.held_out
    if config.held_out_levels:
        held_out = scenario_held_out(exp, config.held_out_levels)
    return train, held_out


def _record(arm, seed, *, final, held_out, rollouts, per_level, specs, counts, **extra) -> dict:
    """One run's record (JSON-able), the same fields on both paths.

    Args:
      specs: the spec each round generated with (``None`` per round without a challenger).
      counts: per-round lists of ``generated``, ``collisions``, ``learned``, ``stuck`` and
        ``dropped_easy``.
      extra: ``seconds``, ``challenger_seconds``, ... (the path's own fields).
    """
    last = specs[-1]
    return {
        "arm": arm,
        "seed": seed,
        "final": final,
        "held_out": list(held_out),
        "rollouts": list(rollouts),
        "per_level": {k: v for k, v in per_level.items() if k.startswith("eval/level_")},
        "level": [None if sp is None else sp["level"] for sp in specs],
        "level_values": None if not last else last.get("values", last.get("probs")),
        **{k: sum(v) for k, v in counts.items()},
        **extra,
    }


def run_one(config: StudyConfig, arm: str, seed: int) -> dict:
    """One run of one arm on the host path; returns its per-round record (JSON-able)."""
    exp = config.experiment
    train, held_out = _scenario_tasks(config)
    timer = [0.0]
    t0 = time.perf_counter()
    result = evolve_arm(
        config,
        train,
        arm=arm,
        wrap=lambda challenger: _timed(challenger, timer),
        key=seed,
        held_out_tasks=held_out,
        max_attempts=config.max_attempts,
    )
    seconds = time.perf_counter() - t0
    evaluate = jax.jit(result.engine.solver.evaluate)
    rounds = result.curriculum
    trained = result.spec.get("state") if isinstance(result.spec, dict) else None
    return _record(
        arm,
        seed,
        final=result.final_reward,
        held_out=result.held_out,
        rollouts=[r.rollouts for r in rounds],
        per_level=held_out_report(evaluate, result.state, held_out, exp.task.num_levels),
        specs=[r.spec for r in rounds],
        counts={k: [getattr(r, k) for r in rounds] for k in COUNTS},
        path="host",
        seconds=round(seconds, 1),
        challenger_seconds=round(timer[0], 2),
        # The learned challenger's own training: policy-gradient updates and the proposals
        # they trained on (its compute is in challenger_seconds; it spends no solver rollouts).
        challenger_updates=None if trained is None else int(trained.updates),
        challenger_proposals=None if trained is None else int(trained.proposals),
    )


COUNTS = ("generated", "collisions", "learned", "stuck", "dropped_easy")


def run_compiled(
    config: StudyConfig, arm: str, seeds: list[int], progress: StudyProgress | None = None
) -> list[dict]:
    """Every seed of ``seeds`` of one arm as one compiled program
    (:func:`~curriculax.selfplay.compiled_evolve` with the arm's pure challenger); returns the
    runs' records, the host path's fields (:func:`run_one`) for the same seeds.

    A record's ``seconds`` is the program's wall time (compilation included) over the seeds
    (``program_seconds`` the whole); ``challenger_seconds`` is ``None``: the challenger runs
    inside the program, its time is not separable (it spends no rollouts on either path).
    ``progress``: a line ticked once per seed per round while the program runs, or None.
    """
    from curriculax.selfplay import compiled_evolve
    from experiments._builders import family_spec, make_solver
    from experiments.selfplay._challengers import pure_arm_challenger

    exp = config.experiment
    if exp.groups_per_generation != exp.batch_groups:
        raise ValueError(
            "--compiled needs one generation batch per update: experiment.groups_per_generation "
            f"({exp.groups_per_generation}) must equal experiment.batch_groups "
            f"({exp.batch_groups}); run without --compiled"
        )
    spec = family_spec(exp.task)
    challenger, start = pure_arm_challenger(arm, spec, config.start_level)
    train, held_out = _scenario_tasks(config)
    solver = make_solver(exp, spec)
    # The host path's key for each seed (curriculum_evolve's seed_key): u32 casts failed past
    # 2**32 and for negative seeds, which the host path runs.
    keys = jax.numpy.stack([seed_key(s, "--seed") for s in seeds])
    t0 = time.perf_counter()
    out = compiled_evolve(
        solver,
        train,
        challenger=challenger,
        spec=start,
        held_out_tasks=held_out,
        keys=keys,
        rounds=config.rounds,
        steps_per_round=config.steps_per_round,
        generated_per_round=config.generated_per_round,
        frontier_share=config.frontier_share,
        max_attempts=config.max_attempts,
        sampler={"type": config.sampler},
        group_size=exp.group_size,
        batch_groups=exp.batch_groups,
        seed_batch=config.seed_batch or None,
        progress=None if progress is None else progress.tick,
    )
    got = jax.device_get(out._replace(state=None))
    seconds = time.perf_counter() - t0
    evaluate = jax.jit(solver.evaluate)
    records = []
    for i, seed in enumerate(seeds):
        state = jax.tree.map(lambda x, i=i: x[i], out.state)
        if got.spec is None:
            specs = [None] * config.rounds
        else:
            specs = [
                {
                    k: (int(v[i, r]) if np.ndim(v[i, r]) == 0 else tuple(map(float, v[i, r])))
                    for k, v in got.spec.items()
                }
                for r in range(config.rounds)
            ]
        records.append(
            _record(
                arm,
                seed,
                final=float(got.held_out[i, -1]),
                held_out=[float(x) for x in got.held_out[i]],
                rollouts=[int(x) for x in got.rollouts[i]],
                per_level=held_out_report(evaluate, state, held_out, exp.task.num_levels),
                specs=specs,
                counts={k: [int(x) for x in getattr(got, k)[i]] for k in COUNTS},
                path="compiled",
                seconds=round(seconds / len(seeds), 1),
                program_seconds=round(seconds, 1),
                program_seeds=len(seeds),
                challenger_seconds=None,
                challenger_updates=None,
                challenger_proposals=None,
            )
        )
    return records


def _timed(challenger, timer: list[float]):
    """The challenger with its host time (generate, validate, propose) added to ``timer[0]``."""

    def wrap(fn):
        def call(*args):
            t0 = time.perf_counter()
            try:
                return fn(*args)
            finally:
                timer[0] += time.perf_counter() - t0

        return call

    return challenger._replace(
        generate=wrap(challenger.generate),
        validate=wrap(challenger.validate),
        propose=wrap(challenger.propose),
    )


def summarize(config: StudyConfig, runs: list[dict], where: str = "runs") -> tuple[str, dict]:
    """The table (markdown) and the statistics, from finished runs (one record per
    ``(arm, seed)``, each of an arm of :data:`ARMS`; ``where``: where they came from, for the
    error that refuses a repeat or an unknown arm).

    A run that never reached the target is censored at its own budget (its final rollouts)."""
    check_records(runs, where)
    by_arm = {a: sorted((r for r in runs if r["arm"] == a), key=lambda r: r["seed"]) for a in ARMS}
    exp = config.experiment
    budget = max(r["rollouts"][-1] for r in runs)
    stats: dict = {}
    rows = []
    for arm, rs in by_arm.items():
        if not rs:
            continue
        final = np.array([r["final"] for r in rs])
        hits = S.first_hit(
            np.array([r["rollouts"] for r in rs]),
            np.array([r["held_out"] for r in rs]),
            config.target,
        )
        spent = np.array([r["rollouts"][-1] for r in rs], np.float64)  # each run's budget
        m = S.bootstrap(final, S.mean)
        t = S.censored_bootstrap(hits, S.median, spent)
        levels = sorted({k for r in rs for k in r["per_level"]})
        per_level = {k: float(np.mean([r["per_level"].get(k, np.nan) for r in rs])) for k in levels}
        stats[arm] = {
            "seeds": [r["seed"] for r in rs],
            "final": final.tolist(),
            "final_mean": m,
            "rollouts_to_target": [None if np.isinf(h) else float(h) for h in hits],
            "rollouts_to_target_median": [None if np.isinf(x) else x for x in t],
            "per_level_mean": per_level,
        }
        rows.append(
            [
                arm,
                f"{m[0]:.3f} [{m[1]:.3f}, {m[2]:.3f}]",
                " ".join(f"{x:.2f}" for x in final),
                S.fmt_censored_interval(hits, S.median, spent, t),
                f"{int(np.isfinite(hits).sum())}/{len(rs)}",
            ]
        )
    held = (
        f"held-out lengths {[lv + 1 for lv in config.held_out_levels]}"
        if config.held_out_levels
        else "held-out: every pool length"
    )
    lines = [
        f"Scenario {config.scenario!r} (fixed {config.date}); {held}.",
        "",
        f"Reversal, 4 symbols, lengths 1-{exp.task.num_levels}; seed pool "
        f"{exp.task.train_per_level} tasks per length; held-out up to "
        f"{exp.task.held_out_per_level} per length; {config.rounds} rounds x "
        f"{config.steps_per_round} updates of {exp.groups_per_generation} groups x "
        f"{exp.group_size} rollouts = {budget:,} rollouts per run; self-play: frontier share "
        f"{config.frontier_share}, {config.generated_per_round} tasks generated per round.",
        "",
        md.table(
            [
                "arm",
                "final held-out exact match, mean [95% CI]",
                "per seed",
                f"rollouts to {config.target} (median [95% CI])",
                f"seeds reaching {config.target}",
            ],
            rows,
            "lrlrr",
        ),
    ]
    sp = stats.get("self-play")
    nc = stats.get("no challenger")
    if sp and nc:
        common = sorted(set(sp["seeds"]) & set(nc["seeds"]))
        a = np.array([sp["final"][sp["seeds"].index(s)] for s in common])
        b = np.array([nc["final"][nc["seeds"].index(s)] for s in common])
        paired = S.difference_bootstrap(b, a, S.mean)
        unpaired = S.difference_bootstrap(b, a, S.mean, paired=False)
        stats["difference"] = {"seeds": common, "paired": paired, "unpaired": unpaired}
        lines += [
            "",
            f"Self-play minus no challenger, final held-out exact match over {len(common)} "
            f"seeds: {S.fmt_difference(*paired)} paired by seed, "
            f"{S.fmt_difference(*unpaired)} unpaired (mean, 95% bootstrap CI).",
        ]
        run = [a for a in ARMS if a in stats]  # every arm run, challengers included
        levels = sorted(set().union(*(stats[a]["per_level_mean"] for a in run)))
        lines += [
            "",
            md.table(
                ["final held-out by length", *(str(int(k[11:]) + 1) for k in levels)],
                (
                    [
                        arm,
                        *(
                            f"{stats[arm]['per_level_mean'].get(k, float('nan')):.2f}"
                            for k in levels
                        ),
                    ]
                    for arm in run
                ),
            ),
        ]
    pairs = [("self-play", "random generator")]
    pairs += [("bandit", other) for other in (*BASELINES, "self-play")]
    pairs += [("learned", other) for other in (*BASELINES, "bandit")]
    if any(a in stats and b in stats for a, b in pairs):
        lines.append("")
    for arm_a, arm_b in pairs:
        if arm_a not in stats or arm_b not in stats:
            continue
        sa, sb = stats[arm_a], stats[arm_b]
        common = sorted(set(sa["seeds"]) & set(sb["seeds"]))
        a = np.array([sa["final"][sa["seeds"].index(s)] for s in common])
        b = np.array([sb["final"][sb["seeds"].index(s)] for s in common])
        paired = S.difference_bootstrap(b, a, S.mean)
        stats.setdefault("differences", {})[f"{arm_a} - {arm_b}"] = paired
        lines.append(
            f"{arm_a.capitalize()} minus {arm_b}, final held-out exact match over "
            f"{len(common)} seeds: {S.fmt_difference(*paired)} paired by seed."
        )
    for arm in CHALLENGER_ARMS:
        if not by_arm.get(arm):
            continue
        rs = by_arm[arm]
        training = ""
        if arm == "learned":
            training = (
                f" and its training: {sum(r['challenger_updates'] or 0 for r in rs):,} "
                f"policy-gradient updates on {sum(r['challenger_proposals'] or 0 for r in rs):,} "
                "proposals (in that host time)"
            )
        # The random generator is the bandit with rate 0: its levels stay uniform, it has no
        # most likely one (the argmax of equal values would print level 0).
        final_level = (
            "levels uniform (no bandit)"
            if arm == "random generator"
            else "final level (length - 1; a bandit's most likely) per seed "
            + " ".join(str(r["level"][-1]) for r in rs)
        )
        lines += [
            "",
            f"Challenger ({arm}): "
            + final_level
            + f"; over all seeds {sum(r['generated'] for r in rs):,} tasks generated, "
            f"{sum(r['dropped_easy'] for r in rs):,} dropped as easy, "
            f"{sum(r['learned'] for r in rs):,} judged learned, "
            f"{sum(r['stuck'] for r in rs):,} stuck, "
            f"{sum(r['collisions'] for r in rs):,} rejected as held-out collisions; "
            f"its own cost: 0 rollouts (the judge reads the solver's training rollouts), "
            + _challenger_time(rs)
            + f"{training}.",
        ]
    budgets = sorted({r["rollouts"][-1] for r in runs})
    if len(budgets) > 1:
        lines += ["", f"WARNING: runs spent different rollout budgets: {budgets}"]
    seconds = sum(r["seconds"] for r in runs)
    compiled = sum(r.get("path") == "compiled" for r in runs)
    lines += [
        "",
        f"Compute: {seconds / 60:.1f} min over {len(runs)} runs"
        + (
            f" ({compiled} on the compiled path, each charged its program's time over its seeds)."
            if compiled
            else "."
        ),
        describe_all([r.get("environment") for r in runs]),
    ]
    return "\n".join(lines) + "\n", stats


def _challenger_time(rs: list[dict]) -> str:
    """The challenger's host time, or why there is none (the compiled path)."""
    host = [r for r in rs if r.get("challenger_seconds") is not None]
    text = (
        f"{sum(r['challenger_seconds'] for r in host):.1f} s of host time in "
        f"generate/validate/propose"
    )
    if len(host) < len(rs):
        text += (
            f" ({len(rs) - len(host)} run(s) on the compiled path, where the challenger runs "
            "inside the program and its time is not separable)"
        )
    return text


def main(argv=None) -> None:
    parser = _cli.base_parser(__doc__.splitlines()[0], steps=0, run_dir="runs/selfplay_study")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per arm (default 8)")
    parser.add_argument("--arms", nargs="+", default=None, choices=ARMS)
    parser.add_argument(
        "--compiled",
        action="store_true",
        help="run all seeds of an arm as one compiled program (the compiled round loop; not "
        "the learned arm)",
    )
    never = [
        "--steps",
        "--allow-partial",
        "--checkpoint-every",
        "--tensorboard",
        "--wandb",
        *_cli.DEVICE_FLAGS,
    ]
    _cli.hide(parser, never)
    args = parser.parse_args(argv)
    _cli.refuse_unused(
        parser,
        args,
        never,
        "the study's budget is its config's, it keeps one record per finished run in "
        "RUN_DIR/runs.jsonl (--resume skips those) and writes summary.json and study.md",
    )
    config = _cli.load_config(StudyConfig, args)
    refuse_unread(config.experiment, StudyConfig().experiment, UNREAD)
    if args.seeds is not None:
        _cli.check_int(args.seeds, "--seeds", 1, "seeds per arm")
        config = dataclasses.replace(config, seeds=args.seeds)
    if args.arms:
        config = dataclasses.replace(config, arms=tuple(args.arms))
    if args.compiled:
        config = dataclasses.replace(config, compiled=True)
    if config.compiled and "learned" in config.arms:
        raise SystemExit(
            "error: arm 'learned' runs on the host path only (its generator trains on the "
            "host); run it in a study without --compiled"
        )
    if "self-play" in config.arms:
        # before any arm runs, as the learned table below
        from experiments._builders import family_spec
        from experiments.selfplay._challengers import check_start_level

        check_start_level(config.start_level, family_spec(config.experiment.task))
    if "learned" in config.arms:
        # A bad learned table fails here, naming its key, not after the other arms ran.
        from experiments._builders import family_spec
        from experiments.selfplay._challengers import sequence_learned_challenger

        sequence_learned_challenger(family_spec(config.experiment.task), config.learned)
    seed0 = config.experiment.seed if args.seed is None else args.seed
    os.makedirs(args.run_dir, exist_ok=True)
    if not jax.config.jax_compilation_cache_dir:
        # Every run builds the same programs: compile them once for the whole study.
        jax.config.update("jax_compilation_cache_dir", os.path.join(args.run_dir, "jax_cache"))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    path = os.path.join(args.run_dir, "runs.jsonl")
    settings_path = os.path.join(args.run_dir, "settings.json")
    outputs = [os.path.join(args.run_dir, name) for name in ("summary.json", "study.md")]
    settings = run_settings(config)
    runs = []
    if args.resume:
        if os.path.exists(path):
            with open(path) as f:
                runs = [json.loads(line) for line in f if line.strip()]
        check_resume(runs, path, settings_path, config)
    elif not args.overwrite:
        if os.path.exists(path):
            raise SystemExit(
                f"error: {path} holds finished runs of an earlier study; --resume keeps them "
                "and runs the rest, --overwrite deletes them and starts over"
            )
        for earlier in (settings_path, *outputs):
            if os.path.exists(earlier):
                raise SystemExit(
                    f"error: {earlier} holds an earlier run's results; --resume continues the "
                    "study in this directory, --overwrite replaces them, or pass another --run-dir"
                )
    else:
        for earlier in (path, settings_path, *outputs):
            if os.path.exists(earlier):
                os.remove(earlier)
    if not _older_settings_kept(settings_path, runs, spec_hash(settings)):
        write_json_atomic(
            settings_path, {"settings_digest": spec_hash(settings), "settings": settings}, indent=2
        )
    done = {(r["arm"], r["seed"]) for r in runs}
    seeds = list(range(seed0, seed0 + config.seeds))

    env = environment()

    def keep(records):
        for record in records:
            record = {**record, "environment": env, "settings_digest": spec_hash(settings)}
            runs.append(record)
            with open(path, "a") as f:
                f.write(json.dumps(record) + "\n")
            print(
                f"{record['arm']:>16} seed {record['seed']}: final held-out "
                f"{record['final']:.3f} ({record['seconds']:.0f}s)",
                file=sys.stderr,
                flush=True,
            )

    if config.compiled:
        for arm in config.arms:
            todo = [s for s in seeds if (arm, s) not in done]
            if todo:
                bar = None
                if not args.no_progress:
                    bar = StudyProgress(f"{arm:>16}", len(todo) * config.rounds, unit="rounds")
                keep(run_compiled(config, arm, todo, bar))
    else:
        for seed in seeds:
            for arm in config.arms:
                if (arm, seed) not in done:
                    keep([run_one(config, arm, seed)])
    table, stats = summarize(config, runs, path)
    print(table)
    write_text_atomic(os.path.join(args.run_dir, "study.md"), table)
    write_json_atomic(
        os.path.join(args.run_dir, "summary.json"),
        {"config": dataclasses.asdict(config), "runs": runs, "stats": stats},
        indent=2,
        default=float,
    )


if __name__ == "__main__":
    _cli.entry(main)
