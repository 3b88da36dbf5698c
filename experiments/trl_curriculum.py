"""TRL's GRPOTrainer with a curriculum choosing its prompts (a wiring demo on a tiny model).

    pip install torch  # the build you want first (CPU is enough), then:
    pip install 'curriculax[trl]'
    python -m experiments.trl_curriculum --run-dir runs/trl --steps 6
    python -m experiments.trl_curriculum --run-dir runs/trl --steps 12 --resume

The policy is a 1-layer Llama initialised at random from a config, with a word-level tokenizer
built here (nothing is downloaded). Each task is a two-word prompt and a target word; a
completion scores 1 if it contains the target. The curriculum is difficulty pools plus the
zero-advantage gate, driven through
:class:`curriculax.integrations.trl.CurriculumGRPOTrainer`. It shows the wiring (what is drawn,
observed, gated and checkpointed), not learning.

Writes TRL's ``RUN_DIR/checkpoint-N/`` (each with the curriculum in ``curriculum/``),
``RUN_DIR/metrics.jsonl`` (TRL's log per step, the curriculum's metrics under ``curriculum/``;
written when training ends, a resumed run adds the steps it lacks, those of an interrupted
run's checkpoints included), ``RUN_DIR/seed.json`` and ``RUN_DIR/summary.json``. ``--steps``
(>= 1) is the total: a resumed run continues to it, with the seed the run started with (it
refuses another ``--seed``).
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

from curriculax._files import write_text_atomic
from experiments import _cli

GROUP_SIZE = 4
BATCH = 4  # prompts per generation batch
NUM_TASKS = 32
WORDS = [f"w{i}" for i in range(24)]
SPECIAL = ["<pad>", "<eos>", "<unk>"]


def tokenizer():
    """A word-level tokenizer over ``WORDS`` (built here, nothing downloaded)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(SPECIAL + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )


def model(seed: int):
    """A 1-layer Llama initialised at random."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(SPECIAL) + len(WORDS),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
    return LlamaForCausalLM(config)


def dataset(seed: int):
    """``NUM_TASKS`` rows: a two-word ``prompt`` and a ``target`` word."""
    from datasets import Dataset

    picks = np.random.default_rng(seed).integers(0, len(WORDS), size=(NUM_TASKS, 3))
    return Dataset.from_dict(
        {
            "prompt": [f"{WORDS[a]} {WORDS[b]}" for a, b, _ in picks],
            "target": [WORDS[c] for _, _, c in picks],
        }
    )


def contains_target(prompts, completions, target, **kwargs) -> list[float]:
    """1 for each completion that contains its task's target word."""
    return [float(t in c.split()) for c, t in zip(completions, target)]


def write_metrics(path: str, log_history: list[dict], start: int) -> None:
    """``metrics.jsonl``: the rows it holds up to step ``start`` (the checkpoint the run
    resumed from; 0 for a fresh start), then the rows of TRL's log (``log_history``) after the
    last of them. TRL restores its log with a checkpoint, so a run interrupted after saving
    checkpoint N (before it wrote this file) and resumed writes steps 1 to N here too; no step
    is written twice."""
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            rows = [r for r in map(json.loads, filter(str.strip, f)) if r["step"] <= start]
    last = max((r["step"] for r in rows), default=0)
    rows += [r for r in log_history if "loss" in r and r["step"] > last]
    write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in rows))


def main(argv=None) -> None:
    parser = _cli.core_parser(__doc__.splitlines()[0], steps=6, run_dir="runs/trl")
    args = parser.parse_args(argv)
    _cli.require(
        ("torch", "transformers", "trl"),
        "`make .venv-trl/.installed` (a CPU torch, then pip install -e '.[trl]'), and run it "
        "with .venv-trl/bin/python",
    )

    from transformers.trainer_utils import get_last_checkpoint
    from trl import GRPOConfig

    import curriculax as cx
    from curriculax.integrations.trl import CurriculumGRPOTrainer

    last = get_last_checkpoint(args.run_dir) if os.path.isdir(args.run_dir) else None
    if last and not args.resume:
        raise SystemExit(f"{args.run_dir} holds checkpoints: pass --resume, or another --run-dir")
    steps, seed = _cli.trainer_steps_and_seed(args, resuming=last is not None)
    curriculum = cx.HostCurriculum(
        cx.curriculum(
            cx.samplers.difficulty_pools(NUM_TASKS),
            gates={"zero_advantage": cx.gates.advantage_range(0.0, 0.0)},
        ),
        seed=seed,
    )
    config = GRPOConfig(
        output_dir=args.run_dir,
        per_device_train_batch_size=BATCH * GROUP_SIZE,
        num_generations=GROUP_SIZE,
        max_completion_length=4,
        learning_rate=1e-3,
        lr_scheduler_type="constant",  # so a resumed run trains as the uninterrupted one would
        max_steps=steps,
        save_strategy="steps",
        save_steps=1,
        save_total_limit=2,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        bf16=False,
        seed=seed,
        disable_tqdm=True,
    )
    trainer = CurriculumGRPOTrainer(
        model=model(seed),
        reward_funcs=[contains_target],
        args=config,
        train_dataset=dataset(seed),
        processing_class=tokenizer(),
        curriculum=curriculum,
    )
    # The newest checkpoint with its curriculum (a run stopped while saving one leaves the
    # newest without it).
    resume = trainer.last_checkpoint() if last else None
    start = int(resume.rsplit("-", 1)[1]) if resume else 0
    began = time.perf_counter()
    trainer.train(resume_from_checkpoint=resume)
    seconds = time.perf_counter() - began
    write_metrics(os.path.join(args.run_dir, "metrics.jsonl"), trainer.state.log_history, start)
    _cli.finish_trainer_run(
        args.run_dir,
        steps=trainer.state.global_step,
        resumed_from=start,
        draws=trainer.curriculum_ledger.draws,
        seconds=seconds,
        curriculum=curriculum.metrics(),
    )


if __name__ == "__main__":
    _cli.entry(main)
