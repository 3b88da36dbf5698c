"""The TRL adapter, tested by running TRL's own GRPOTrainer loop on CPU with a tiny randomly
initialised Llama built from a config and a tokenizer built here (nothing is downloaded)."""

import json
import shutil
import warnings

import numpy as np
import pytest

pytest.importorskip("trl")

from datasets import Dataset
from trl import GRPOConfig

import curriculax as cx
from curriculax.integrations._ledger import DrawLedger, per_batch
from curriculax.integrations.trl import CurriculumGRPOTrainer, CurriculumSampler
from experiments import trl_curriculum
from tests.integrations._common import (
    BAD_FLAGS,
    Spy,
    check_gated_advantages,
    check_the_seed_is_kept,
    host_curriculum,
    mixed,
    never,
    readme_block,
    solved,
)

G, P, N = 2, 2, 12  # completions per prompt, prompts per generation batch, dataset rows


def _dataset():
    return Dataset.from_dict({"prompt": [f"w{i} w{(i + 1) % N}" for i in range(N)]})


def _reward(trained):
    """Rewards by task only (:func:`solved`); records what TRL generated for."""

    def solved_part(prompts, completions, task_id, **kwargs):
        ids = np.asarray(task_id)[::G]
        trained.append((ids.tolist(), list(prompts[::G])))
        return solved(ids, G).reshape(-1).tolist()

    return solved_part


def _args(out, max_steps, logging_steps=1, **extra):
    return GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=P * G,
        num_generations=G,
        max_completion_length=4,
        max_steps=max_steps,
        report_to=[],
        use_cpu=True,
        logging_steps=logging_steps,
        seed=0,
        bf16=False,
        disable_tqdm=True,
        **{"save_strategy": "steps", "save_steps": 3, **extra},
    )


def _spy_advantages(trainer, batches):
    """Records each generation batch's task ids, the advantages TRL trains on, and the
    curriculum's admission."""
    generate = trainer._generate_and_score_completions

    def spy(inputs):
        out = generate(inputs)
        ids = [row["task_id"] for row in inputs][::G]
        adv = out["advantages"].detach().numpy().reshape(-1, G)
        batches.append((ids, adv, trainer.curriculum_reward.last_admitted))
        return out

    trainer._generate_and_score_completions = spy


def _trainer(out, max_steps, seed=0, gates="zero_advantages", logging_steps=1, **extra):
    cur = host_curriculum(N, seed)
    spy = Spy(cur)
    trained, batches = [], []
    trainer = CurriculumGRPOTrainer(
        model=trl_curriculum.model(0),
        reward_funcs=_reward(trained),
        args=_args(out, max_steps, logging_steps, **extra),
        train_dataset=_dataset(),
        processing_class=trl_curriculum.tokenizer(),
        curriculum=cur,
        gates=gates,
    )
    _spy_advantages(trainer, batches)
    return trainer, cur, spy, trained, batches


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
    trainer, cur, spy, trained, batches = _trainer(tmp_path, max_steps=6)
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
    check_gated_advantages(batches, G, zeroed=True)
    logged = [h for h in trainer.state.log_history if "curriculum/admission_rate" in h]
    assert len(logged) == 6

    # Resume from step 3: the resumed run trains what this one did in steps 4-6.
    # Accelerate's loader looks one batch ahead, so step 4's draw was made before the save: it is
    # saved in flight and handed out first after the restore.
    with open(tmp_path / "checkpoint-3" / "curriculum" / "draws.json") as f:
        in_flight = json.load(f)["in_flight"]
    assert in_flight == [trained[3][0]]
    resumed, cur2, spy2, trained2, _ = _trainer(tmp_path, max_steps=6, seed=99)
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-3"))
    assert resumed.state.global_step == 6
    assert [ids for ids, _ in trained2] == [ids for ids, _ in trained[3:6]]
    # Both runs end with one look-ahead draw, drawn, never trained nor observed (the sampler's
    # epoch holds one draw more than the run trains).
    assert spy2.drawn == spy.drawn[4:] and len(spy.drawn) == 7
    assert cur2.metrics() == cur.metrics()

    # A run stopped after the trainer wrote checkpoint-6 and before the curriculum's state:
    # --resume failed on it ("not written by CurriculumGRPOTrainer"). It resumes from the
    # newest checkpoint with its curriculum, saying so.
    shutil.rmtree(tmp_path / "checkpoint-6" / "curriculum")
    resumed, _, _, trained3, _ = _trainer(tmp_path, max_steps=6, seed=99)
    with pytest.warns(UserWarning, match=r"checkpoint-6 holds no curriculum state .* checkpoi"):
        resumed.train(resume_from_checkpoint=True)
    assert [ids for ids, _ in trained3] == [ids for ids, _ in trained[3:6]]
    with pytest.raises(FileNotFoundError, match="or the run was stopped while saving it"):
        resumed.load_curriculum(str(tmp_path / "checkpoint-9" / "curriculum"))


def test_running_totals_are_logged_at_their_latest_and_per_batch_metrics_averaged(tmp_path):
    """TRL averages what is logged over each window of ``logging_steps``; running totals and
    snapshots must still read their value at the logging step."""
    steps, window = 6, 3
    trainer, cur, _, _, batches = _trainer(tmp_path, max_steps=steps, logging_steps=window)
    after = []  # the curriculum's metrics after each observed batch
    observe = cur.observe

    def observe_then_read(*args, **kwargs):
        out = observe(*args, **kwargs)
        after.append(cur.metrics())
        return out

    cur.observe = observe_then_read
    trainer.train()
    assert len(batches) == len(after) == steps  # one generation batch of P groups per step

    logs = [h for h in trainer.state.log_history if "curriculum/groups" in h]
    assert [h["step"] for h in logs] == [window, 2 * window]
    means_differ = False
    for log in logs:
        step = log["step"]
        done, in_window = batches[:step], range(step - window, step)
        # Running totals: the true count at this step (the window mean would be P * (step - 1)).
        assert log["curriculum/groups"] == P * step
        assert log["curriculum/admitted"] == sum(int(a.sum()) for _, _, a in done)
        rejected = sum(not mixed(i, G) for ids, _, _ in done for i in ids)
        assert log["curriculum/gate/zero_advantage/rejected"] == rejected
        # Every running total or snapshot is the curriculum's value after the step's batch.
        latest = after[step - 1]
        for name, value in latest.items():
            if name in ("admission_rate", "gate/zero_advantage/admit_rate"):
                continue
            got = log[f"curriculum/{name}"]
            assert got == (None if np.isnan(value) else pytest.approx(float(value))), name
        # Per-batch metrics: the mean over the window's batches.
        rates = [float(batches[i][2].mean()) for i in in_window]
        assert log["curriculum/admission_rate"] == pytest.approx(np.mean(rates))
        mixed_share = [np.mean([mixed(i, G) for i in batches[b][0]]) for b in in_window]
        assert log["curriculum/gate/zero_advantage/admit_rate"] == pytest.approx(
            np.mean(mixed_share)
        )
        means_differ |= log["curriculum/admission_rate"] != pytest.approx(rates[-1])
    assert means_differ  # else this run could not tell a window mean from the last value
    assert "curriculum/batch_admitted" not in logs[-1]


def test_the_per_batch_metrics_are_the_ones_docs_metrics_md_calls_per_batch():
    s = cx.samplers
    inner = s.skip_zero_variance(N, s.difficulty_pools(N))
    cur = cx.HostCurriculum(
        cx.curriculum(s.floor(N, inner), gates={"g": cx.gates.advantage_range()}), seed=0
    )
    got = {k for k in cur.metrics() if per_batch(f"curriculum/{k}")}
    assert got == {"admission_rate", "gate/g/admit_rate", "sampler/inner/zero_variance_share"}


def test_gates_log_only_leaves_trls_advantages(tmp_path):
    trainer, _, _, _, batches = _trainer(tmp_path, max_steps=6, gates="log")
    trainer.train()
    check_gated_advantages(batches, G, zeroed=False)


def test_the_task_id_column_must_be_the_row_index(tmp_path):
    data = _dataset().add_column("task_id", list(range(1, N + 1)))
    with pytest.raises(ValueError, match="row's index"):
        CurriculumGRPOTrainer(
            model=trl_curriculum.model(0),
            reward_funcs=_reward([]),
            args=_args(tmp_path, 1),
            train_dataset=data,
            processing_class=trl_curriculum.tokenizer(),
            curriculum=host_curriculum(N),
        )


def test_the_readme_example_runs(tmp_path):
    def my_reward(prompts, completions, **kwargs):
        return [float(len(c) % 2) for c in completions]

    scope = {
        "model": trl_curriculum.model(0),
        "tokenizer": trl_curriculum.tokenizer(),
        "my_reward": my_reward,
        "grpo_config": _args(tmp_path, 1),
        "dataset": _dataset(),
    }
    exec(compile(readme_block("TRL"), "docs/integrations.md", "exec"), scope)
    assert scope["trainer"].state.global_step == 1
    assert scope["curriculum"].observe_calls == 1


def test_the_example_script_runs_and_resumes(tmp_path):
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


def test_a_script_run_interrupted_after_a_checkpoint_keeps_every_step_once(tmp_path, monkeypatch):
    """An interrupted run writes no metrics.jsonl (it is written when training ends); the
    resumed run writes the steps of the checkpoint it restored too, each once."""
    run, reward, calls = tmp_path / "run", trl_curriculum.contains_target, []

    def interrupted_at_step_3(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:  # step 3's rewards: checkpoint-2 is saved
            raise KeyboardInterrupt
        return reward(*args, **kwargs)

    monkeypatch.setattr(trl_curriculum, "contains_target", interrupted_at_step_3)
    with pytest.raises(KeyboardInterrupt):
        trl_curriculum.main(["--run-dir", str(run), "--steps", "4"])
    monkeypatch.setattr(trl_curriculum, "contains_target", reward)
    assert (run / "checkpoint-2").is_dir() and not (run / "metrics.jsonl").exists()
    # Stopped while saving checkpoint-2, before its curriculum: --resume failed on it ("not
    # written by CurriculumGRPOTrainer"); it resumes from checkpoint-1, saying so.
    shutil.rmtree(run / "checkpoint-2" / "curriculum")
    for steps in (4, 5):  # the second resume restores checkpoint-4, whose log holds 1-4
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trl_curriculum.main(["--run-dir", str(run), "--steps", str(steps), "--resume"])
        passed_over = [w for w in caught if "holds no curriculum state" in str(w.message)]
        assert len(passed_over) == (steps == 4)
        rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in rows] == list(range(1, steps + 1))
        summary = json.loads((run / "summary.json").read_text())
        assert summary["resumed_from"] == {4: 1, 5: 4}[steps]


def test_a_resumed_script_run_keeps_the_seed_it_started_with(tmp_path, monkeypatch):
    run, seeds, dataset = tmp_path / "run", [], trl_curriculum.dataset

    def recorded(seed):
        seeds.append(seed)
        return dataset(seed)

    monkeypatch.setattr(trl_curriculum, "dataset", recorded)
    check_the_seed_is_kept(trl_curriculum.main, run, seeds)


@pytest.mark.parametrize(("argv", "message"), BAD_FLAGS)
def test_the_script_refuses_a_bad_steps_or_seed_before_building_anything(
    tmp_path, monkeypatch, argv, message
):
    monkeypatch.setattr(trl_curriculum, "model", never)
    with pytest.raises(ValueError, match=message):
        trl_curriculum.main(["--run-dir", str(tmp_path / "run"), *argv])
    assert not (tmp_path / "run").exists()


def test_answers_reach_a_consistency_curriculum(tmp_path):
    # A reward that ignores the answer (alternating within each group) and one answer for every
    # completion: every observed group contradicts itself, so every observed task is marked and
    # the gate rejects every group (TRL zeroes their advantages).
    cur = cx.HostCurriculum(
        cx.curriculum(
            cx.samplers.reward_consistency(N, cx.samplers.uniform(N)),
            gates={"consistency": cx.gates.reward_consistency(N)},
        )
    )
    spy = Spy(cur)

    def coin(prompts, completions, task_id, **kwargs):
        return [float(i % 2) for i in range(len(prompts))]

    trainer = CurriculumGRPOTrainer(
        model=trl_curriculum.model(0),
        reward_funcs=coin,
        args=_args(tmp_path, max_steps=3),
        train_dataset=_dataset(),
        processing_class=trl_curriculum.tokenizer(),
        curriculum=cur,
        answer_key=lambda completion: "the same answer",
    )
    trainer.train()
    observed = sorted(set(spy.observed))
    assert observed and cx.samplers.contradicted_tasks(cur._state).tolist() == observed
    assert cur.metrics()["sampler/noise/contradicted"] == len(observed)
    assert cur.metrics()["gate/consistency/rejected"] == len(spy.observed)
    last = trainer.curriculum_reward.last_admitted
    assert last is not None and not last.any()


def test_the_sampler_docstring_example_holds():
    import doctest

    globs = {"cx": cx, "DrawLedger": DrawLedger, "CurriculumSampler": CurriculumSampler}
    runner = doctest.DocTestRunner()
    for test in doctest.DocTestFinder().find(CurriculumSampler, globs=globs):
        runner.run(test)
    assert runner.tries == 2 and runner.failures == 0


def test_a_resumed_run_draws_and_observes_as_the_whole_one_past_the_datasets_length(tmp_path):
    """12 rows and 2 prompts per draw: a pass over the dataset is 6 draws. Hugging Face's
    Trainer starts a new epoch at a resumed run's first step, and its loader does not draw ahead
    across an epoch's end; with ``max_steps`` set, one epoch of the sampler covers the run, so
    the resumed run meets no epoch end the uninterrupted one does not, and the curriculum draws
    and observes in the same order in both."""
    steps = 8
    trainer, cur, spy, trained, _ = _trainer(tmp_path, max_steps=steps)
    trainer.train()
    resumed, cur2, spy2, trained2, _ = _trainer(tmp_path, max_steps=steps, seed=99)
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-3"))
    assert resumed.state.global_step == steps
    assert trained2 == trained[3:]
    # checkpoint-3 holds the curriculum after its third observation (and step 4's draw, in
    # flight, which the resumed run replays without drawing it again).
    third = [i for i, (kind, _) in enumerate(spy.events) if kind == "observe"][2]
    assert spy2.events == spy.events[third + 1 :]
    assert cur2.metrics() == cur.metrics()


def test_a_second_train_starts_with_the_first_ones_look_ahead_draw(tmp_path):
    trainer, _, spy, trained, _ = _trainer(tmp_path, max_steps=2, save_strategy="no")
    trainer.train()
    (ahead,) = trainer.curriculum_ledger.in_flight  # drawn by the loader, never trained
    trainer.train()
    assert trainer.state.global_step == 2
    assert trained[2][0] == ahead.tolist()
    assert [ids for ids, _ in trained] == spy.drawn[:4]
    assert spy.observed == [i for ids in spy.drawn[:4] for i in ids]


def test_remove_unused_columns_keeps_the_task_ids(tmp_path):
    trainer, cur, spy, trained, _ = _trainer(tmp_path, max_steps=1, remove_unused_columns=True)
    trainer.train()
    assert [ids for ids, _ in trained] == spy.drawn[:1] and cur.observe_calls == 1


class _ScoredEnv:
    """An environment_factory environment that owns its reward (TRL's ``get_reward``)."""

    def reset(self, **kwargs):
        self.score = 1.0

    def get_reward(self):
        return self.score


class _UnscoredEnv:
    def reset(self, **kwargs):
        self.score = 1.0


def _env_trainer(tmp_path, monkeypatch, reward_funcs, environment_factory):
    import trl.trainer.grpo_trainer as grpo

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    # The toy tokenizer has no chat template; TRL's tool-calling check is all that is stubbed.
    monkeypatch.setattr(grpo, "supports_tool_calling", lambda processing_class: True)
    return CurriculumGRPOTrainer(
        model=trl_curriculum.model(0),
        reward_funcs=reward_funcs,
        args=_args(tmp_path, 1, save_strategy="no"),
        train_dataset=_dataset(),
        processing_class=trl_curriculum.tokenizer(),
        curriculum=host_curriculum(N),
        environment_factory=environment_factory,
    )


def test_an_environments_own_reward_is_refused(tmp_path, monkeypatch):
    # TRL would add _ScoredEnv.get_reward to the reward it trains on, which the curriculum
    # (and its zero-advantage gate) never sees.
    with pytest.raises(ValueError, match=r"\['_ScoredEnv'\] .*rename the environment's get_reward"):
        _env_trainer(tmp_path, monkeypatch, [_reward([])], _ScoredEnv)
    with pytest.raises(ValueError, match=r"needs reward_funcs: .*get_reward"):
        _env_trainer(tmp_path, monkeypatch, None, _ScoredEnv)
    # Scored by a reward function instead, the environment is welcome.
    trainer = _env_trainer(tmp_path, monkeypatch, [_reward([])], _UnscoredEnv)
    assert trainer.reward_funcs == [trainer.curriculum_reward]
