"""tunix's GRPO learner with a curriculum choosing its prompts (a wiring demo on a toy model).

    pip install 'curriculax[tunix]'
    python -m experiments.tunix_curriculum --run-dir runs/tunix --steps 6
    python -m experiments.tunix_curriculum --run-dir runs/tunix --steps 12 --resume

The policy is the tiny randomly initialised transformer and the word-level vocabulary that the
tunix wheel ships for its own tests (nothing is downloaded). Each task is a two-word prompt and
a target word; a completion scores 1 if it contains the target. The curriculum is difficulty
pools plus the zero-advantage gate, driven through
:class:`curriculax.integrations.tunix.CurriculumGRPOLearner`. It shows the wiring (what is
drawn, observed, gated and checkpointed), not learning: the toy policy is far too small.

Writes ``RUN_DIR/checkpoints/`` (tunix's ``actor/`` and the curriculum's ``curriculum/``, at
every step), ``RUN_DIR/metrics.jsonl`` (per step: rewards and the curriculum's metrics; a
resumed run first drops the rows after the step it resumes from), ``RUN_DIR/seed.json`` and
``RUN_DIR/summary.json``. ``--steps`` (>= 1) is the total: a resumed run continues to it, with
the seed the run started with (it refuses another ``--seed``).
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

from curriculax._files import write_text_atomic
from experiments import _cli

GROUP_SIZE = 4
BATCH = 4
NUM_TASKS = 32


def records(seed: int, vocab) -> list[dict]:
    """``NUM_TASKS`` tasks over the toy vocabulary's words: a two-word prompt and a target."""
    words = [w for w, i in vocab.DEFAULT_MAPPING.items() if i >= 3]
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(words), size=(NUM_TASKS, 3))
    return [{"prompts": f"{words[a]} {words[b]}", "target": words[c]} for a, b, c in picks]


def contains_target(prompts, completions, target, **kwargs) -> list[float]:
    """1 for each completion that contains its task's target word."""
    return [float(str(t) in str(c).split()) for c, t in zip(completions, target)]


def toy_cluster(
    checkpoint_root, max_steps, *, seed=0, optimizer=None, checkpointing=None, **training
):
    """tunix's ``RLCluster`` over the toy transformer and vocabulary its wheel ships, on one
    device (checkpoints in ``checkpoint_root``, None: none). ``training``: more of tunix's
    ``RLTrainingConfig`` (``mini_batch_size``, ``train_micro_batch_size``,
    ``eval_every_n_steps``, ...)."""
    import jax
    import optax
    from flax import nnx
    from tunix.rl import rl_cluster as rl_cluster_lib
    from tunix.rl.rollout import base_rollout
    from tunix.tests import test_common as toy

    vocab = toy.MockVocab()
    model_config = toy.ModelConfig(vocab_size=vocab.GetPieceSize())
    auto = (jax.sharding.AxisType.Auto,) * 2
    mesh = jax.make_mesh((1, 1), ("fsdp", "tp"), axis_types=auto, devices=jax.devices()[:1])
    roles = (rl_cluster_lib.Role.ACTOR, rl_cluster_lib.Role.REFERENCE, rl_cluster_lib.Role.ROLLOUT)
    return rl_cluster_lib.RLCluster(
        actor=toy.ToyTransformer(config=model_config, rngs=nnx.Rngs(seed)),
        reference=toy.ToyTransformer(config=model_config, rngs=nnx.Rngs(seed)),
        tokenizer=vocab,
        cluster_config=rl_cluster_lib.ClusterConfig(
            role_to_mesh=dict.fromkeys(roles, mesh),
            rollout_engine="vanilla",
            offload_to_cpu=False,
            training_config=rl_cluster_lib.RLTrainingConfig(
                actor_optimizer=optimizer or optax.adam(1e-3),
                max_steps=max_steps,
                checkpoint_root_directory=None if checkpoint_root is None else str(checkpoint_root),
                checkpointing_options=checkpointing,
                **{"eval_every_n_steps": 10**9, **training},
            ),
            rollout_config=base_rollout.RolloutConfig(
                max_tokens_to_generate=4, max_prompt_length=8, kv_cache_size=32
            ),
        ),
    )


def keep_metrics_through(path: str, step: int) -> None:
    """Drops the rows of ``metrics.jsonl`` after ``step``, the step a run resumes from (0 for a
    fresh start), and a last line a kill cut short. tunix writes a step's row after it starts
    saving the step's checkpoint, without waiting for the save: a run killed in between resumes
    from the step before and trains (and logs) the step again."""
    if not os.path.exists(path):
        return
    rows = []
    with open(path) as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    kept = "".join(json.dumps(r) + "\n" for r in rows if r["step"] <= step)
    write_text_atomic(path, kept)


def main(argv=None) -> None:
    parser = _cli.core_parser(__doc__.splitlines()[0], steps=6, run_dir="runs/tunix")
    args = parser.parse_args(argv)
    _cli.require(
        ("tunix", "grain"),
        "`make .venv-tunix/.installed` (pip install -e '.[tunix]'), and run it with "
        ".venv-tunix/bin/python",
    )
    checkpoints = os.path.abspath(os.path.join(args.run_dir, "checkpoints"))
    if os.path.isdir(checkpoints) and not args.resume:
        raise SystemExit(f"{checkpoints} exists: pass --resume, or another --run-dir")
    steps, seed = _cli.trainer_steps_and_seed(args, resuming=os.path.isdir(checkpoints))

    import orbax.checkpoint as ocp
    from tunix.rl.grpo.grpo_learner import GRPOConfig
    from tunix.tests import test_common as toy

    import curriculax as cx
    from curriculax.integrations.grain import CurriculumDataset
    from curriculax.integrations.tunix import CurriculumGRPOLearner

    cluster = toy_cluster(
        checkpoints, steps, seed=seed, checkpointing=ocp.CheckpointManagerOptions(max_to_keep=2)
    )
    metrics_path = os.path.join(args.run_dir, "metrics.jsonl")

    def log(buffer) -> None:  # tunix's external metrics logger: one call per global step
        if str(buffer.mode) != "train":
            return
        row = {}
        for name, (value, op) in buffer.metrics.items():
            if name.startswith(("curriculum/", "rewards/")):
                value = np.asarray(value, float)
                row[name] = float(op(value) if op is not None else value.mean())
        if row:  # global_steps counts the updates before this one
            with open(metrics_path, "a") as f:
                f.write(json.dumps({"step": int(buffer.global_steps) + 1, **row}) + "\n")

    cluster.with_external_metrics_logger(log)
    curriculum = cx.HostCurriculum(
        cx.curriculum(
            cx.samplers.difficulty_pools(NUM_TASKS),
            gates={"zero_advantage": cx.gates.advantage_range(0.0, 0.0)},
        ),
        seed=seed,
    )
    learner = CurriculumGRPOLearner(
        rl_cluster=cluster,
        algo_config=GRPOConfig(num_generations=GROUP_SIZE, num_iterations=1),
        reward_fns=[contains_target],
        prompts=CurriculumDataset(curriculum, records(seed, toy.MockVocab()), batch_size=BATCH),
    )
    start = learner.rl_cluster.actor_trainer.train_steps
    keep_metrics_through(metrics_path, start)
    began = time.perf_counter()
    learner.train()
    _cli.finish_trainer_run(
        args.run_dir,
        steps=learner.rl_cluster.actor_trainer.train_steps,
        resumed_from=start,
        draws=learner.curriculum_iterator.ledger.draws,
        seconds=time.perf_counter() - began,
        curriculum=curriculum.metrics(),
    )


if __name__ == "__main__":
    _cli.entry(main)
