"""Curricula against uniform sampling: rollouts to a held-out target at an equal budget.

    python -m experiments.compare --config experiments/configs/compare/hard-skew.toml \\
        --run-dir runs/compare/hard-skew

A study is data. Its TOML sets the pool (``[experiment.task]``: family, levels, the share of
the pool per level, coin-flip distractors, the levels the target is measured on), the budget
(``generations`` batches of ``groups_per_generation x group_size`` rollouts), the seeds, and
the arms: each ``[[arms]]`` table is a name plus a curriculum config (any registered or
``package.module:factory`` sampler and gates; a sampler that takes categories is given the
pool's labels, ``[experiment.task] labels``: its levels by default), or an ``oracle`` table
for an oracle arm (draws decided from the policy's true pass rates, measured by a free
evaluation: p(1 - p), or the lowest unmastered level; see ``experiments/_oracle.py``), and
optionally
``experiment`` overrides (the learning-rate check uses them; the main study keeps one optimizer
and batch for every arm).

Protocol: the seeds of an arm run as one ``vmap``-ped, scanned program; every arm generates
exactly the same rollouts per run (rejected groups are charged like any other; the oracle's
probe is not, by design); the policy is evaluated (greedy exact match on the held-out set) every
``eval_every`` generation batches; a run that never reaches the target is censored at the
budget. Writes ``compare.md`` (per arm: seeds at target, median and IQM rollouts to target with
bootstrap 95% intervals, the ratio of the baseline's median to the arm's with its interval,
final held-out success, updates, the share of groups with a learning signal, where the draws
went), ``compare.json`` (per-seed numbers and curves) and ``compare.png`` (share of seeds at
the target against rollouts, Kaplan-Meier style, and the mean held-out curve). Each finished
arm is kept in ``DIR/arms/`` and reused when the study is run again with the same settings
and code for that arm (after a crash, or with arms added; ``code``: a change to a sampler
reruns the arms that draw with it, to shared code every arm, not to comments or docstrings);
delete the folder to run them again. A run that would drop or change numbers of an arm that
``DIR/compare.json`` holds and it does not rerun (one ``--arms`` leaves out, or one it reuses
whose kept result is not the row the table took from another run by ``--report
--replace-arms``) is refused before any arm runs, unless ``--overwrite``.
Every arm is checked (its experiment, pool, sampler and gates built) before any runs. One
study at a time uses a directory: it holds ``DIR/run.lock`` as a run directory does, and a
second process is refused naming the first (``--report`` too, where the folder of the
``compare.json`` it rewrites holds a lock file). Arm files, ``compare.json`` and ``compare.md``
are written to a temporary file and renamed into place (a failure leaves the old file whole);
an arm file that cannot be read (cut short, empty) is run again. While an arm
runs, a progress line on stderr counts its seeds' evaluations (``--no-progress``: none); each
arm records what it ran on (package versions, CPU; ``environment`` in ``compare.json``).

``--diversity ARM --seed-index I`` runs one seed of one arm instead and prints how varied the
policy's sampled answers stay on the target levels (a collapse onto a few answers shows there).

The package, one concern per module: ``config`` (the study's TOML as a checked dataclass),
``run`` (one arm's seeds as one program, the random-key salts), ``cache`` (finished arms in
``DIR/arms/``), ``code`` (the digest of the code an arm runs, part of its cache key),
``noise`` (the noise diagnostic's flag rates at the end of the budget), ``report`` (the
tables, the JSON, and :func:`study_result` to read a study back), ``plot``, ``diversity`` and
``cli``.
"""

from experiments.compare.cache import arm_fingerprint, load_arm, save_arm
from experiments.compare.cli import main
from experiments.compare.config import (
    ARM_KEYS,
    DEFAULT_ARMS,
    MAIN_JOB_ONLY,
    ORACLE_KEYS,
    CompareConfig,
    arm_experiment,
    arm_oracle,
    budget,
    check_arm,
)
from experiments.compare.diversity import diversity
from experiments.compare.noise import flag_shares, noise_diagnostic
from experiments.compare.plot import plot
from experiments.compare.report import (
    StudyResult,
    best_of,
    best_of_text,
    compare_arms,
    load_study,
    noise_table,
    pass_rate_split,
    pass_rate_table,
    reach,
    seed_data,
    study_json,
    study_result,
    summarize,
    tables,
)
from experiments.compare.run import (
    MEASURE_SALT,
    PROBE_SALT,
    build_arm,
    check_arms,
    run_arm,
    run_seeds,
    seed_keys,
)

__all__ = [
    "ARM_KEYS",
    "DEFAULT_ARMS",
    "MAIN_JOB_ONLY",
    "MEASURE_SALT",
    "ORACLE_KEYS",
    "PROBE_SALT",
    "CompareConfig",
    "StudyResult",
    "arm_experiment",
    "arm_fingerprint",
    "arm_oracle",
    "best_of",
    "best_of_text",
    "budget",
    "build_arm",
    "check_arm",
    "check_arms",
    "compare_arms",
    "diversity",
    "flag_shares",
    "load_arm",
    "load_study",
    "main",
    "noise_diagnostic",
    "noise_table",
    "pass_rate_split",
    "pass_rate_table",
    "plot",
    "reach",
    "run_arm",
    "run_seeds",
    "save_arm",
    "seed_data",
    "seed_keys",
    "study_json",
    "study_result",
    "summarize",
    "tables",
]
