"""The TRL adapter, tested by running TRL's own GRPOTrainer loop on CPU with a tiny randomly
initialised Llama built from a config and a tokenizer built here (nothing is downloaded)."""

import json
import os
import re

import numpy as np
import pytest

pytest.importorskip("trl")

import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from trl import GRPOConfig

import curriculax as cx
from curriculax.integrations._ledger import DrawLedger
from curriculax.integrations.trl import CurriculumGRPOTrainer, CurriculumSampler

G, P, N = 2, 2, 12  # completions per prompt, prompts per generation batch, dataset rows
WORDS = ["<pad>", "<eos>", "<unk>"] + [f"w{i}" for i in range(13)]


def _tokenizer():
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )


def _model():
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(WORDS),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
    return LlamaForCausalLM(config)


def _dataset():
    return Dataset.from_dict({"prompt": [f"w{i} w{(i + 1) % 13}" for i in range(N)]})


def even_tasks():
    """A gate that admits groups of even task ids (so zeroed advantages are easy to see)."""

    def admit(state, results):
        return results.task_ids % 2 == 0, state

    return cx.AdmissionGate(lambda key: cx.EmptyState(), admit, lambda state: {})


def _curriculum(seed=0):
    return cx.HostCurriculum(
        cx.curriculum(
            cx.samplers.difficulty_pools(N),
            gates={"zero_advantage": cx.gates.advantage_range(0.0, 0.0), "even": even_tasks()},
        ),
        seed=seed,
    )


def _reward(trained):
    """Task t solves t % (G + 1) of its G completions (deterministic, so two runs observe the
    same rewards); records what TRL generated for."""

    def solved(prompts, completions, task_id, **kwargs):
        ids = np.asarray(task_id).reshape(-1, G)
        trained.append((ids[:, 0].tolist(), list(prompts[::G])))
        return (np.arange(G)[None, :] < ids % (G + 1)).astype(float).reshape(-1).tolist()

    return solved


def _args(out, max_steps):
    return GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=P * G,
        num_generations=G,
        max_completion_length=4,
        max_steps=max_steps,
        save_strategy="steps",
        save_steps=3,
        report_to=[],
        use_cpu=True,
        logging_steps=1,
        seed=0,
        bf16=False,
        disable_tqdm=True,
    )


class _Spy:
    """Records the curriculum's draws and observations and the advantages TRL trains on."""

    def __init__(self, cur, trainer):
        self.drawn, self.observed, self.batches = [], [], []
        sample, observe = cur.sample, cur.observe
        generate = trainer._generate_and_score_completions

        def spy_sample(n):
            ids = sample(n)
            self.drawn.append(np.asarray(ids).tolist())
            return ids

        def spy_observe(ids, *args, **kwargs):
            self.observed.extend(np.asarray(ids).tolist())
            return observe(ids, *args, **kwargs)

        def spy_generate(inputs):
            out = generate(inputs)
            ids = [row["task_id"] for row in inputs][::G]
            adv = out["advantages"].detach().numpy().reshape(-1, G)
            self.batches.append((ids, adv, trainer.curriculum_reward.last_admitted))
            return out

        cur.sample, cur.observe = spy_sample, spy_observe
        trainer._generate_and_score_completions = spy_generate


def _trainer(out, max_steps, seed=0):
    cur = _curriculum(seed)
    trained = []
    trainer = CurriculumGRPOTrainer(
        model=_model(),
        reward_funcs=_reward(trained),
        args=_args(out, max_steps),
        train_dataset=_dataset(),
        processing_class=_tokenizer(),
        curriculum=cur,
    )
    return trainer, cur, _Spy(cur, trainer), trained


def test_sampler_keeps_trls_repeat_layout():
    ledger = DrawLedger(cx.HostCurriculum(cx.curriculum(cx.samplers.sequential(6)), seed=0), 6)
    sampler = CurriculumSampler(
        ledger, num_generations=2, prompts_per_generation=3, repeat_count=2, num_draws=2
    )
    got = list(sampler)
    assert len(got) == len(sampler) == 24
    first, second = ledger.in_flight
    assert got[:12] == [i for _ in range(2) for t in first.tolist() for i in (t, t)]
    assert got[12:] == [i for _ in range(2) for t in second.tolist() for i in (t, t)]


@pytest.mark.slow
def test_grpo_trainer_trains_on_the_curriculums_choices_and_resumes(tmp_path):
    trainer, cur, spy, trained = _trainer(tmp_path, max_steps=6)
    trainer.train()
    assert trainer.state.global_step == 6

    # TRL generated for exactly the curriculum's draws, in order, with the dataset's prompts.
    assert [ids for ids, _ in trained] == spy.drawn[:6]
    prompts = _dataset()["prompt"]
    for ids, got in trained:
        assert got == [prompts[i] for i in ids]
    # Every finished group was observed once, in order.
    assert spy.observed == [i for ids in spy.drawn[:6] for i in ids]
    assert cur.observe_calls == 6
    # Rejected groups carry no advantage; admitted ones keep TRL's.
    groups = {"admitted": 0, "zeroed": 0}  # zeroed: mixed rewards, rejected by "even"
    for ids, adv, admitted in spy.batches:
        want = [0 < i % (G + 1) < G and i % 2 == 0 for i in ids]
        assert admitted.tolist() == want
        for i, row, ok in zip(ids, adv, want):
            assert np.all(row != 0) if ok else np.all(row == 0)
            groups["admitted"] += ok
            groups["zeroed"] += 0 < i % (G + 1) < G and i % 2 == 1
    assert groups["admitted"] > 0 and groups["zeroed"] > 0, groups
    logged = [h for h in trainer.state.log_history if "curriculum/batch_admitted" in h]
    assert len(logged) == 6

    # Resume from step 3: the resumed run trains what this one did in steps 4-6.
    # Accelerate's loader looks one batch ahead, so step 4's draw was made before the save: it is
    # saved in flight and handed out first after the restore.
    with open(tmp_path / "checkpoint-3" / "curriculum" / "draws.json") as f:
        in_flight = json.load(f)["in_flight"]
    assert in_flight == [trained[3][0]]
    resumed, cur2, spy2, trained2 = _trainer(tmp_path, max_steps=6, seed=99)
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-3"))
    assert resumed.state.global_step == 6
    assert [ids for ids, _ in trained2] == [ids for ids, _ in trained[3:6]]
    # Then one more look-ahead draw, which the first run did not make (its epoch ended at step
    # 6); it is drawn, never trained nor observed.
    assert spy2.drawn[:2] == spy.drawn[4:6] and len(spy2.drawn) == 3
    assert cur2.metrics() == cur.metrics()


def test_the_task_id_column_must_be_the_row_index(tmp_path):
    data = _dataset().add_column("task_id", list(range(1, N + 1)))
    with pytest.raises(ValueError, match="row's index"):
        CurriculumGRPOTrainer(
            model=_model(),
            reward_funcs=_reward([]),
            args=_args(tmp_path, 1),
            train_dataset=data,
            processing_class=_tokenizer(),
            curriculum=_curriculum(),
        )


def _readme_block(n):
    """The n-th python block of the README's "Use it from your trainer" section."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "README.md")) as f:
        text = f.read()
    section = text.split("## Use it from your trainer", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)[n]


def test_the_readme_example_runs(tmp_path):
    def my_reward(prompts, completions, **kwargs):
        return [float(len(c) % 2) for c in completions]

    scope = {
        "model": _model(),
        "tokenizer": _tokenizer(),
        "my_reward": my_reward,
        "grpo_config": _args(tmp_path, 1),
        "dataset": _dataset(),
    }
    exec(compile(_readme_block(1), "README.md", "exec"), scope)
    assert scope["trainer"].state.global_step == 1
    assert scope["curriculum"].observe_calls == 1


def test_the_example_script_runs_and_resumes(tmp_path):
    from experiments import trl_curriculum

    run = tmp_path / "run"
    trl_curriculum.main(["--run-dir", str(run), "--steps", "1"])
    with pytest.raises(SystemExit, match="--resume"):
        trl_curriculum.main(["--run-dir", str(run), "--steps", "2"])
    trl_curriculum.main(["--run-dir", str(run), "--steps", "2", "--resume"])
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[-1]["curriculum/groups"] == 2 * trl_curriculum.BATCH
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["resumed_from"] == 1


def test_gates_log_only_leaves_trls_advantages(tmp_path):
    cur = _curriculum()
    trainer = CurriculumGRPOTrainer(
        model=_model(),
        reward_funcs=_reward([]),
        args=_args(tmp_path, 6),
        train_dataset=_dataset(),
        processing_class=_tokenizer(),
        curriculum=cur,
        gates="log",
    )
    spy = _Spy(cur, trainer)
    trainer.train()
    kept = 0  # groups with mixed rewards that the "even" gate rejected: advantages kept
    for ids, adv, admitted in spy.batches:
        for i, row, ok in zip(ids, adv, admitted):
            assert ok == (0 < i % (G + 1) < G and i % 2 == 0)
            if 0 < i % (G + 1) < G and not ok:
                assert np.all(row != 0)
                kept += 1
    assert kept > 0
