"""The tunix adapter, tested by running tunix's own GRPO training loop on CPU with the toy model
and tokenizer the tunix wheel ships (nothing is downloaded)."""

import json
import os
import shutil
import threading

import numpy as np
import pytest

pytest.importorskip("tunix")

import optax
import orbax.checkpoint as ocp
from tunix.rl import rl_cluster as rl_cluster_lib
from tunix.rl.grpo.grpo_learner import GRPOConfig, GRPOLearner

from curriculax.integrations.grain import CurriculumDataset
from curriculax.integrations.tunix import CurriculumGRPOLearner, CurriculumObserver
from experiments import tunix_curriculum
from tests.integrations._common import (
    BAD_FLAGS,
    Spy,
    admitted,
    check_gated_advantages,
    check_the_seed_is_kept,
    host_curriculum,
    never,
    readme_block,
    solved,
)

G, B = 2, 2  # rollouts per prompt, prompts per batch
_WORDS = ["input", "string", "hello", "world", "Hello", "there", "My", "name", "is", "Tunix"]
RECORDS = [{"prompts": f"{a} {b}"} for a in _WORDS[:4] for b in _WORDS[4:7]]  # 12 prompts
N = len(RECORDS)


def _reward(trained):
    """Rewards by task only (:func:`solved`); records what tunix generated for."""

    def reward(prompts, completions, task_id, **kwargs):
        ids = np.asarray(task_id)[::G]
        trained.append((ids.tolist(), [str(p) for p in np.asarray(prompts)[::G]]))
        return solved(ids, G).reshape(-1).tolist()

    return reward


def _cluster(root, max_steps, every=3, **training):
    """:func:`tunix_curriculum.toy_cluster` saving every ``every`` steps, with more of tunix's
    training settings (``mini_batch_size``, ``train_micro_batch_size``, ...)."""
    return tunix_curriculum.toy_cluster(
        root,
        max_steps,
        optimizer=optax.sgd(1e-3),
        checkpointing=ocp.CheckpointManagerOptions(save_interval_steps=every, max_to_keep=4),
        **training,
    )


def _spy_advantages(learner, batches):
    """Records each generated batch's task ids, the advantages tunix will train on, and the
    curriculum's admission."""
    generate = learner._generate_and_compute_advantage

    def spy(training_input, mode=rl_cluster_lib.Mode.TRAIN):
        example = generate(training_input, mode)
        ids = np.asarray(training_input["task_id"])[::G].tolist()
        adv = np.asarray(example.advantages).reshape(-1, G)
        batches.append((ids, adv, learner.curriculum_observer.last_admitted))
        return example

    learner._generate_and_compute_advantage = spy


def _learner(root, max_steps, seed=0):
    cur = host_curriculum(N, seed)
    spy = Spy(cur)
    trained, batches = [], []
    learner = CurriculumGRPOLearner(
        rl_cluster=_cluster(root, max_steps),
        algo_config=GRPOConfig(num_generations=G, num_iterations=1),
        reward_fns=_reward(trained),
        prompts=CurriculumDataset(cur, RECORDS, batch_size=B),
    )
    _spy_advantages(learner, batches)
    return learner, cur, spy, trained, batches


@pytest.mark.slow
def test_grpo_learner_trains_on_the_curriculums_choices_and_resumes(tmp_path):
    root = tmp_path / "ckpt"
    learner, cur, spy, trained, batches = _learner(root, max_steps=6)
    learner.train()
    assert learner.rl_cluster.actor_trainer.train_steps == 6

    # tunix generated for exactly the draws, in order, with the records' prompts.
    assert [ids for ids, _ in trained] == spy.drawn[:6]
    for ids, prompts in trained:
        assert prompts == [RECORDS[i]["prompts"] for i in ids]
    # Every finished group was observed once, in order.
    assert spy.observed == [i for ids in spy.drawn[:6] for i in ids]
    assert cur.observe_calls == 6
    # Rejected groups carry no advantage; admitted ones keep tunix's.
    check_gated_advantages(batches, G, zeroed=True)
    logged = learner.rl_cluster._rl_metrics_logger.get_metric_history(
        "curriculum", "admission_rate", "train"
    )
    assert len(logged) == 6

    # The curriculum is saved with every tunix checkpoint. Resume from step 3 (drop step 6):
    # the resumed run draws and trains what this one did.
    saved = sorted(int(s) for s in os.listdir(root / "actor") if s.isdigit())
    assert sorted(int(s) for s in os.listdir(root / "curriculum")) == saved
    assert saved[-2:] == [3, 6]
    shutil.rmtree(root / "actor" / "6")
    shutil.rmtree(root / "curriculum" / "6")
    resumed, cur2, spy2, trained2, _ = _learner(root, max_steps=6, seed=99)
    assert resumed.rl_cluster.actor_trainer.train_steps == 3
    assert cur2.observe_calls == 3 and cur2.sample_calls == 3
    resumed.train()
    assert [ids for ids, _ in trained2] == [ids for ids, _ in trained[3:6]]
    assert spy2.drawn[:3] == spy.drawn[3:6]
    assert cur2.metrics() == cur.metrics()


def test_a_kill_during_a_checkpoint_leaves_a_run_that_resumes(tmp_path, monkeypatch):
    """tunix committed its model step in the background before the curriculum's save of the
    same step ended: a kill in between left a model step with no curriculum, and every resume
    failed ("no curriculum checkpoint at step 6"). The curriculum is saved first now."""
    from curriculax.integrations.grain import CurriculumCheckpoints

    root = tmp_path / "ckpt"
    learner, _, _, trained, _ = _learner(root, max_steps=6)
    real = CurriculumCheckpoints.save

    def killed_at_6(self, step, iterator):
        if step == 6:
            raise KeyboardInterrupt("killed during the checkpoint of step 6")
        return real(self, step, iterator)

    monkeypatch.setattr(CurriculumCheckpoints, "save", killed_at_6)
    with pytest.raises(KeyboardInterrupt):
        learner.train()
    learner.rl_cluster.actor_trainer.checkpoint_manager.close()  # what the kill leaves on disk
    monkeypatch.undo()
    assert sorted(int(s) for s in os.listdir(root / "actor") if s.isdigit())[-1] == 3
    resumed, _, _, trained2, _ = _learner(root, max_steps=6, seed=99)
    assert resumed.rl_cluster.actor_trainer.train_steps == 3
    resumed.train()
    assert [ids for ids, _ in trained2] == [ids for ids, _ in trained[3:6]]


def test_stale_curriculum_checkpoints_are_refused(tmp_path):
    root = tmp_path / "ckpt"
    (root / "curriculum" / "3").mkdir(parents=True)
    with pytest.raises(ValueError, match="restored no model checkpoint"):
        CurriculumGRPOLearner(
            rl_cluster=_cluster(root, max_steps=1),
            algo_config=GRPOConfig(num_generations=G, num_iterations=1),
            reward_fns=_reward([]),
            prompts=CurriculumDataset(host_curriculum(N), RECORDS, batch_size=B),
        )


def test_stock_learner_observes_through_the_metric_function():
    cur = host_curriculum(N)
    spy = Spy(cur)
    trained = []
    it = iter(CurriculumDataset(cur, RECORDS, batch_size=B))
    learner = GRPOLearner(
        rl_cluster=_cluster(None, max_steps=2),
        algo_config=GRPOConfig(num_generations=G, num_iterations=1),
        reward_fns=_reward(trained),
        metric_fns=[CurriculumObserver(it, num_generations=G)],
    )
    learner.train(it)
    assert [ids for ids, _ in trained] == spy.drawn[:2]
    assert spy.observed == [i for ids in spy.drawn[:2] for i in ids]


def test_answers_reach_a_consistency_curriculum_and_its_gate_zeroes_the_noise():
    # A reward that ignores the answer (alternating within each group) and one answer for every
    # completion: every group contradicts itself, so every observed task is marked, every group
    # is rejected and tunix trains on none of its advantages.
    import curriculax as cx

    cur = cx.HostCurriculum(
        cx.curriculum(
            cx.samplers.reward_consistency(N, cx.samplers.uniform(N)),
            gates={"consistency": cx.gates.reward_consistency(N)},
        )
    )
    spy = Spy(cur)

    def coin(prompts, completions, **kwargs):
        return [float(i % 2) for i in range(len(completions))]

    learner = CurriculumGRPOLearner(
        rl_cluster=_cluster(None, max_steps=2),
        algo_config=GRPOConfig(num_generations=G, num_iterations=1),
        reward_fns=coin,
        prompts=CurriculumDataset(cur, RECORDS, batch_size=B),
        answer_key=lambda completion: "the same answer",
    )
    batches = []
    _spy_advantages(learner, batches)
    learner.train()
    observed = sorted(set(spy.observed))
    assert observed and cx.samplers.contradicted_tasks(cur._state).tolist() == observed
    assert cur.metrics()["gate/consistency/rejected"] == len(spy.observed)
    assert batches and all(not got.any() and np.all(adv == 0) for _, adv, got in batches)
    with pytest.raises(TypeError, match="answer_key must be a callable"):
        CurriculumObserver(iter(CurriculumDataset(cur, RECORDS, batch_size=B)), G, answer_key=3)


def test_the_readme_example_runs():
    def my_reward(prompts, completions, **kwargs):
        return [float(len(str(c)) % 2) for c in completions]

    scope = {"records": RECORDS, "rl_cluster": _cluster(None, max_steps=1), "my_reward": my_reward}
    exec(compile(readme_block("tunix"), "docs/integrations.md", "exec"), scope)
    assert scope["learner"].rl_cluster.actor_trainer.train_steps == 1
    assert scope["curriculum"].observe_calls == 1


def test_the_example_script_runs_and_resumes(tmp_path):
    run = tmp_path / "run"
    tunix_curriculum.main(["--run-dir", str(run), "--steps", "1"])
    with pytest.raises(SystemExit, match="--resume"):
        tunix_curriculum.main(["--run-dir", str(run), "--steps", "2"])
    tunix_curriculum.main(["--run-dir", str(run), "--steps", "2", "--resume"])
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[-1]["curriculum/groups"] == 2 * tunix_curriculum.BATCH
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["resumed_from"] == 1 and summary["draws"] == 2


def test_a_script_run_killed_before_its_checkpoint_committed_logs_each_step_once(tmp_path):
    """tunix writes a step's row before its checkpoint's asynchronous save commits: a kill in
    between leaves the row of a step the resumed run trains again (here the commit is undone
    by removing the step's checkpoint)."""
    run = tmp_path / "run"
    tunix_curriculum.main(["--run-dir", str(run), "--steps", "2"])
    for part in ("actor", "curriculum"):
        shutil.rmtree(run / "checkpoints" / part / "2")
    tunix_curriculum.main(["--run-dir", str(run), "--steps", "3", "--resume"])
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert json.loads((run / "summary.json").read_text())["resumed_from"] == 1


def test_a_resumed_script_run_keeps_the_seed_it_started_with(tmp_path, monkeypatch):
    run, seeds, records = tmp_path / "run", [], tunix_curriculum.records

    def recorded(seed, vocab):
        seeds.append(seed)
        return records(seed, vocab)

    monkeypatch.setattr(tunix_curriculum, "records", recorded)
    check_the_seed_is_kept(tunix_curriculum.main, run, seeds)


@pytest.mark.parametrize(("argv", "message"), BAD_FLAGS)
def test_the_script_refuses_a_bad_steps_or_seed_before_building_anything(
    tmp_path, monkeypatch, argv, message
):
    monkeypatch.setattr(tunix_curriculum, "toy_cluster", never)
    with pytest.raises(ValueError, match=message):
        tunix_curriculum.main(["--run-dir", str(tmp_path / "run"), *argv])
    assert not (tmp_path / "run").exists()


def test_an_evaluation_in_the_main_thread_leaves_the_data_threads_batches_observed():
    """With async rollout tunix scores training batches in its data thread while the main thread
    evaluates; the observer's switch and admission are per thread, so the training batch scored
    during the evaluation is observed (and gated) all the same."""
    cur = host_curriculum(N)
    spy = Spy(cur)
    evaluating, observed_meanwhile = threading.Event(), threading.Event()
    observe = cur.observe

    def observe_and_tell(*args, **kwargs):
        if evaluating.is_set():
            observed_meanwhile.set()
        return observe(*args, **kwargs)

    cur.observe = observe_and_tell
    calls = {"train": 0, "eval": 0}

    def reward(prompts, completions, task_id=None, **kwargs):
        # The second training batch waits for the evaluation to start; the first evaluation
        # waits (with a timeout) until a training batch has been observed meanwhile.
        if task_id is None:
            calls["eval"] += 1
            if calls["eval"] == 1:
                evaluating.set()
                observed_meanwhile.wait(timeout=15)
        else:
            calls["train"] += 1
            if calls["train"] == 2:
                evaluating.wait(timeout=15)
        return [float(len(str(c)) % 2) for c in completions]

    learner = CurriculumGRPOLearner(
        rl_cluster=_cluster(
            None,
            max_steps=2,
            every=1,
            mini_batch_size=B,
            train_micro_batch_size=1,
            eval_every_n_steps=1,
        ),
        algo_config=GRPOConfig(num_generations=G, num_iterations=1),
        reward_fns=reward,
        prompts=CurriculumDataset(cur, RECORDS, batch_size=B),
    )
    learner.can_enable_async_rollout = True  # one CPU device: tunix would not overlap otherwise
    learner.train(eval_ds=[{"prompts": np.array(["hello there", "world name"])}])
    assert observed_meanwhile.is_set()
    assert spy.observed == [i for ids in spy.drawn[:2] for i in ids]


def test_mini_batches_log_totals_at_their_latest_and_warn_on_a_checkpoint_inside_a_draw(tmp_path):
    """A draw of 4 prompts trained in mini-batches of 2: two observed batches and two optimiser
    steps per draw (tunix logs once per draw). Running totals are logged at their value after
    the last batch, per-batch metrics as the mean; a checkpoint between the two mini-batches is
    not an exact resume point, and saving or restoring one warns."""
    root, batch = tmp_path / "ckpt", 4

    def learner(seed):
        cur = host_curriculum(N, seed)
        spy = Spy(cur)
        return (
            cur,
            spy,
            CurriculumGRPOLearner(
                rl_cluster=_cluster(
                    root, max_steps=2, every=1, mini_batch_size=2, train_micro_batch_size=2
                ),
                algo_config=GRPOConfig(num_generations=G, num_iterations=1),
                reward_fns=_reward([]),
                prompts=CurriculumDataset(cur, RECORDS, batch_size=batch),
            ),
        )

    cur, spy, first = learner(0)
    with pytest.warns(UserWarning, match="step 1, inside a draw.*every multiple of 2 steps"):
        first.train()
    assert first.rl_cluster.actor_trainer.train_steps == 2 and cur.observe_calls == 2

    history = first.rl_cluster._rl_metrics_logger.get_metric_history
    assert list(history("curriculum", "groups", "train")) == [batch]  # not the mean, 3
    (drawn,) = spy.drawn
    halves = [drawn[:2], drawn[2:]]
    rates = [np.mean([admitted(i, G) for i in half]) for half in halves]
    assert rates[0] != rates[1]
    assert list(history("curriculum", "admission_rate", "train")) == [pytest.approx(np.mean(rates))]

    shutil.rmtree(root / "actor" / "2")
    shutil.rmtree(root / "curriculum" / "2")
    with pytest.warns(UserWarning, match="restored a checkpoint at step 1, inside a draw"):
        learner(99)


def test_a_group_of_equal_rewards_is_rejected_by_the_zero_advantage_gate_and_trains_on_nothing():
    # Three rewards of 0.2: their mean is not 0.2, and tunix's (r - mean) / (std + 1e-6) gives
    # each rollout -2.8e-11. The zero-advantage gate must see that group as the zero-signal
    # group it is, reject it, and leave tunix nothing to train on.
    import curriculax as cx

    g = 3
    cur = cx.HostCurriculum(
        cx.curriculum(
            cx.samplers.uniform(N), gates={"zero_advantage": cx.gates.advantage_range(0.0, 0.0)}
        )
    )
    learner = CurriculumGRPOLearner(
        rl_cluster=_cluster(None, max_steps=2),
        algo_config=GRPOConfig(num_generations=g, num_iterations=1),
        reward_fns=lambda prompts, completions, **kwargs: [0.2] * len(completions),
        prompts=CurriculumDataset(cur, RECORDS, batch_size=B),
    )
    generate = learner._generate_and_compute_advantage
    batches = []

    def spy(training_input, mode=rl_cluster_lib.Mode.TRAIN):
        example = generate(training_input, mode)
        batches.append((np.asarray(example.advantages), learner.curriculum_observer.last_admitted))
        return example

    learner._generate_and_compute_advantage = spy
    learner.train()
    assert batches
    for adv, got in batches:
        assert got is not None and not got.any()
        assert np.all(adv == 0), adv
    assert cur.metrics()["gate/zero_advantage/rejected"] == B * len(batches)


def test_the_observer_zeroes_the_advantages_of_groups_whose_rewards_tunix_saw_as_equal():
    # Equality is read on the rewards tunix normalised (float64), not on a float32 cast: two
    # rewards that differ below float32's precision carry tunix's +-0.7 and are admitted.
    import curriculax as cx

    cur = cx.HostCurriculum(
        cx.curriculum(
            cx.samplers.uniform(N), gates={"zero_advantage": cx.gates.advantage_range(0.0, 0.0)}
        )
    )
    it = iter(CurriculumDataset(cur, RECORDS, batch_size=B))
    batch = next(it)
    observer = CurriculumObserver(it, G)
    observer(
        prompts=np.repeat(batch["prompts"], G),
        completions=["x"] * (B * G),
        advantages=np.array([-0.7, 0.7, -2.8e-11, -2.8e-11]),
        rewards=np.array([1000.0, 1000.00003, 0.2, 0.2]),
        task_id=np.repeat(batch["task_id"], G),
    )
    assert observer.last_admitted.tolist() == [True, False]
