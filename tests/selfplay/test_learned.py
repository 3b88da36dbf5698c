"""The learned challenger: a generator policy trained by policy gradient on the judge's gain.

A stub judge with a known reward (gain 1 only for proposals at level 2) drives ``generate`` and
``propose`` directly; the real runner runs it on the toy solver.
"""

import dataclasses
import zlib

import jax
import numpy as np
import pytest

from curriculax.selfplay import (
    InvalidTask,
    LearnedConfig,
    RoundReport,
    Verdict,
    curriculum_evolve,
    learned_challenger,
    learned_config,
    learned_spec,
    proposal_rewards,
    restore_learned,
    save_learned,
)

PER_ROUND = 32
TARGET = 2  # the stub judge's rewarded level


def build(level, tokens):
    padded = np.zeros(CFG.max_length, np.int32)
    padded[: len(tokens)] = tokens
    return {"level": np.int32(level), "tokens": padded}


def key_of(task):
    level = int(np.asarray(task["level"]))
    tokens = np.asarray(task["tokens"], np.int32).ravel().tolist()
    return zlib.crc32(repr((level, tokens)).encode())


def make_validate(bad_levels=()):
    def validate(payload):
        if int(payload["level"]) in bad_levels:
            raise InvalidTask(f"level {int(payload['level'])} is not allowed")
        return payload

    return validate


CFG = LearnedConfig(num_levels=6, num_symbols=4, min_length=1, seed=0)


def stub_report(r, spec, payloads, validate, reward_of=lambda level: float(level == TARGET)):
    """What the runner would report: every distinct valid proposal judged, gain
    ``reward_of(level)`` (the judge's known reward), verdict tasks as Python lists."""
    judged, seen = [], set()
    for p in payloads:
        try:
            validate(p)
        except InvalidTask:
            continue
        k = key_of(p)
        if k in seen:
            continue  # the runner rejects a round's duplicates before they are judged
        seen.add(k)
        gain = reward_of(int(p["level"]))
        task = {"level": int(p["level"]), "tokens": p["tokens"].tolist()}
        judged.append(Verdict(task, gain, gain > 0))
    return RoundReport(
        round=r,
        spec=spec,
        generated=len(seen),
        invalid=0,
        collisions=0,
        learned=sum(v.learned for v in judged),
        stuck=sum(not v.learned for v in judged),
        dropped_easy=0,
        r0=float(np.mean([v.gain for v in judged])) if judged else 0.0,
        occupancy=0,
        steps=0,
        rollouts=0,
        judged=tuple(judged),
    )


def run_stub(cfg, rounds, seed, validate=None, **report):
    """Rounds of generate -> stub judge -> propose; returns per-round payloads and specs."""
    validate = validate or make_validate()
    challenger = learned_challenger(build, validate, key_of, cfg)
    spec = learned_spec(cfg)
    key = jax.random.key(seed)
    rounds_payloads, specs = [], []
    for r in range(rounds):
        k = jax.random.fold_in(key, r)
        payloads = [challenger.generate(spec, jax.random.fold_in(k, i)) for i in range(PER_ROUND)]
        rounds_payloads.append(payloads)
        specs.append(spec)
        spec = challenger.propose(spec, stub_report(r, spec, payloads, validate, **report))
    return rounds_payloads, specs, spec


def at_target(payloads):
    return np.mean([int(p["level"]) == TARGET for p in payloads])


def duplicate_share(payloads):
    """Share of a batch's proposals equal to an earlier one of the same batch."""
    keys = [key_of(p) for p in payloads]
    return 1.0 - len(set(keys)) / len(keys)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_generator_learns_to_propose_what_the_judge_rewards(seed):
    # The stub judge rewards level 2 only: chance (levels uniform) is 1/6 of the proposals.
    cfg = LearnedConfig(num_levels=6, num_symbols=4, seed=seed)
    payloads, _, spec = run_stub(cfg, rounds=25, seed=seed)
    assert at_target(payloads[0]) < 0.35  # the first round is at chance
    late = np.mean([at_target(p) for p in payloads[20:]])
    assert late > 0.6, late  # 3.6x chance after 20-24 updates
    assert spec["level"] == TARGET and spec["probs"][TARGET] > 0.6
    state = spec["state"]
    assert int(state.updates) == 25 and int(state.proposals) == 25 * PER_ROUND


def test_the_repeat_penalty_lowers_the_share_of_duplicates():
    # The stub rewards level 0 only, which holds 4 distinct tasks (length 1, 4 symbols): without
    # the penalty the generator piles onto those 4; with it, repeats cost, so it spreads out.
    with_penalty, without = [], []
    for seed in range(3):
        for penalty, out in ((0.5, with_penalty), (0.0, without)):
            cfg = LearnedConfig(num_levels=6, num_symbols=4, repeat_penalty=penalty, seed=seed)
            payloads, _, _ = run_stub(
                cfg, rounds=20, seed=seed, reward_of=lambda lv: float(lv == 0)
            )
            out.append(np.mean([duplicate_share(p) for p in payloads[15:]]))
    assert all(a < b for a, b in zip(with_penalty, without)), (with_penalty, without)
    assert np.mean(without) - np.mean(with_penalty) > 0.2, (with_penalty, without)


def test_invalid_proposals_never_get_a_positive_reward():
    rng = np.random.default_rng(0)
    n = 512
    gain = rng.uniform(-1.0, 1.0, n).astype(np.float32)
    judged, valid, repeat = rng.random((3, n)) < 0.5
    for invalid_reward in (0.0, -0.3):
        r = np.asarray(
            proposal_rewards(
                gain, judged, valid, repeat, repeat_penalty=0.5, invalid_reward=invalid_reward
            )
        )
        assert np.all(r[~valid] <= 0.0)
        np.testing.assert_allclose(r[valid & judged & ~repeat], gain[valid & judged & ~repeat])
        assert np.all(r[valid & ~judged & ~repeat] == 0.0)
    with pytest.raises(ValueError, match="invalid_reward"):
        LearnedConfig(num_levels=6, num_symbols=4, invalid_reward=0.5)


def test_a_rejected_level_is_not_learned_even_when_the_judge_would_reward_it():
    # The gate rejects level 2, the level the stub judge rewards; a hostile report even
    # carries a gain-1 verdict for every invalid proposal. Their reward stays 0, so level 2
    # is never reinforced (without the gate it rises past 0.6 of the mass, test above).
    validate = make_validate(bad_levels=(TARGET,))
    challenger = learned_challenger(build, validate, key_of, CFG)
    spec = learned_spec(CFG)
    key = jax.random.key(0)
    invalid = 0
    for r in range(15):
        k = jax.random.fold_in(key, r)
        payloads = [challenger.generate(spec, jax.random.fold_in(k, i)) for i in range(PER_ROUND)]
        invalid += sum(int(p["level"]) == TARGET for p in payloads)
        report = stub_report(r, spec, payloads, make_validate())  # judges the invalid ones too
        spec = challenger.propose(spec, report)
    assert int(spec["state"].invalid) == invalid > 0
    assert spec["probs"][TARGET] < 1 / 6, spec["probs"]


def test_a_verdict_on_an_earlier_rounds_copy_credits_no_proposal_of_this_round():
    # Round 1 proposes a task that an earlier round's copy still on the frontier also holds:
    # the runner rejects the new one, and the old copy's verdict (round 0) comes in round 1.
    # It must not be credited to round 1's proposal (it was, matched by key alone); a verdict
    # on round 1's own copy is.
    key = jax.random.key(0)
    spec = learned_spec(CFG)

    def after(verdict_round):
        challenger = learned_challenger(build, make_validate(), key_of, CFG)
        payloads = [challenger.generate(spec, jax.random.fold_in(key, i)) for i in range(8)]
        report = stub_report(1, spec, [], make_validate())
        if verdict_round is not None:
            p = payloads[0]
            task = {"level": int(p["level"]), "tokens": p["tokens"].tolist()}
            report = dataclasses.replace(report, judged=(Verdict(task, 1.0, True, verdict_round),))
        return challenger.propose(spec, report)["state"].params

    unjudged, older, own = after(None), after(0), after(1)
    same = jax.tree.map(lambda a, b: bool(np.array_equal(a, b)), unjudged, older)
    assert all(jax.tree.leaves(same))
    moved = jax.tree.map(lambda a, b: bool(np.array_equal(a, b)), unjudged, own)
    assert not all(jax.tree.leaves(moved))


def test_a_checkpoint_round_trip_gives_bit_identical_next_proposals(tmp_path):
    _, _, spec = run_stub(CFG, rounds=3, seed=0)
    save_learned(tmp_path / "challenger", 3, spec)
    restored = restore_learned(tmp_path / "challenger", CFG)
    for a, b in zip(jax.tree.leaves(spec["state"]), jax.tree.leaves(restored["state"])):
        assert np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert restored["probs"] == spec["probs"] and restored["level"] == spec["level"]
    # A fresh challenger (a new process, say) continues exactly as the original does.
    one = learned_challenger(build, make_validate(), key_of, CFG)
    two = learned_challenger(build, make_validate(), key_of, CFG)
    key = jax.random.key(7)
    for r in range(2):
        k = jax.random.fold_in(key, r)
        p1 = [one.generate(spec, jax.random.fold_in(k, i)) for i in range(PER_ROUND)]
        p2 = [two.generate(restored, jax.random.fold_in(k, i)) for i in range(PER_ROUND)]
        assert [key_of(p) for p in p1] == [key_of(p) for p in p2]
        spec = one.propose(spec, stub_report(r, spec, p1, make_validate()))
        restored = two.propose(restored, stub_report(r, restored, p2, make_validate()))
    for a, b in zip(jax.tree.leaves(spec["state"]), jax.tree.leaves(restored["state"])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_config_errors_name_the_bad_key():
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['learned.widht'\]"):
        learned_config({"widht": 8}, where="learned", num_levels=6, num_symbols=4)
    with pytest.raises(ValueError, match="learned: depth must be an int >= 0"):
        learned_config({"depth": -1}, where="learned", num_levels=6, num_symbols=4)
    with pytest.raises(ValueError, match="learning_rate must be > 0"):
        learned_config({"learning_rate": 0}, num_levels=6, num_symbols=4)
    cfg = learned_config({"width": 8}, num_levels=6, num_symbols=4)
    assert (cfg.width, cfg.num_levels, cfg.max_length) == (8, 6, 6)


@pytest.mark.parametrize("name", ["learning_rate", "entropy", "repeat_penalty", "invalid_reward"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_config_values_are_refused_by_name(name, value):
    # NaN passed every range check (comparisons with NaN are false) and trained NaN params.
    with pytest.raises(ValueError, match=f"learned challenger: {name} must be finite, got"):
        LearnedConfig(num_levels=3, num_symbols=2, **{name: value})
    with pytest.raises(ValueError, match=f"^learned: {name} must be finite, got {value!r}$"):
        learned_config({name: value}, where="learned", num_levels=3, num_symbols=2)


def test_memory_0_penalizes_only_the_duplicates_of_a_round():
    cfg = LearnedConfig(num_levels=6, num_symbols=4, memory=0)
    payloads, _, spec = run_stub(cfg, rounds=3, seed=0)
    within = sum(round(duplicate_share(p) * PER_ROUND) for p in payloads)
    assert int(spec["state"].repeats) == within
    assert not np.asarray(spec["state"].recent_mask).any()


def test_it_runs_through_the_self_play_runner_and_checkpoints_with_the_run(tmp_path):
    from curriculax.selfplay.toy import capped_solver, learned_level_challenger, level_tasks

    cfg = learned_config({"width": 16}, num_levels=6, num_symbols=4)
    result = curriculum_evolve(
        capped_solver(),
        level_tasks(levels=6),
        challenger=learned_level_challenger(cfg),
        spec=learned_spec(cfg),
        key=0,
        rounds=3,
        steps_per_round=6,
        generated_per_round=16,
        frontier_share=0.5,
        run_dir=tmp_path,
    )
    state = result.spec["state"]
    assert int(state.updates) == 3
    generated = sum(r.generated for r in result.curriculum)
    judged = sum(r.learned + r.stuck for r in result.curriculum)
    assert generated > 0 and judged > 0
    assert int(state.proposals) >= generated  # duplicates and collisions are proposals too
    # Each round's report carries the spec the generator used; the run's last one is saved.
    assert [int(r.spec["state"].updates) for r in result.curriculum] == [0, 1, 2]
    restored = restore_learned(tmp_path / "challenger", cfg)
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(restored["state"])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert "LearnedState(updates=" in (tmp_path / "summary.json").read_text()


def test_a_rerun_after_a_round_stopped_before_propose_trains_as_a_clean_run():
    # on_round raises after the round's proposals were logged, before propose consumed them.
    # A rerun with the same challenger (and the same spec) trained on those stale proposals
    # too and penalized its own identical ones as their repeats; now each round starts with
    # an empty log (curriculum_evolve calls Challenger.begin_round).
    from curriculax.selfplay.toy import capped_solver, learned_level_challenger, level_tasks

    cfg = LearnedConfig(num_levels=6, num_symbols=3, min_length=1, seed=0)
    spec = learned_spec(cfg)

    def once(challenger, on_round=None):
        result = curriculum_evolve(
            capped_solver(),
            level_tasks(4, 10),
            challenger=challenger,
            spec=spec,
            rounds=1,
            steps_per_round=3,
            generated_per_round=8,
            batch_groups=4,
            group_size=4,
            key=0,
            max_attempts=2,
            held_out_frac=0.2,
            sampler={"type": "uniform"},
            on_round=on_round,
        )
        return result.spec["state"]

    class Stop(Exception):
        pass

    def stop(report, held_out):
        raise Stop

    clean = once(learned_level_challenger(cfg))
    challenger = learned_level_challenger(cfg)
    with pytest.raises(Stop):
        once(challenger, on_round=stop)
    rerun = once(challenger)
    assert (int(rerun.proposals), int(rerun.repeats)) == (int(clean.proposals), int(clean.repeats))
    for a, b in zip(jax.tree.leaves(clean), jax.tree.leaves(rerun)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_the_study_arm_proposes_reversal_tasks_and_names_a_bad_key(tmp_path):
    import pathlib

    from curriculax import tasks as T
    from experiments._builders import family_spec
    from experiments.selfplay import study
    from experiments.selfplay._challengers import arm_challenger

    config = study.StudyConfig()
    family = family_spec(config.experiment.task)
    challenger, spec = arm_challenger("learned", family, 2, {"width": 8})
    assert spec["state"].params["embed"]["embedding"].shape == (family.num_levels, 8)
    key = jax.random.key(0)
    payloads = [challenger.generate(spec, jax.random.fold_in(key, i)) for i in range(8)]
    for p in payloads:
        task = challenger.validate(p)
        level = int(task.level)
        n = family.length(level)
        symbols = np.asarray(task.prompt)[-n - 1 : -1]  # <bos> <rev> x1 .. xn <sep>, left-padded
        np.testing.assert_array_equal(np.asarray(task.answer)[:n], symbols[::-1])
    verdict = Verdict(jax.tree.map(lambda x: np.asarray(x).tolist(), payloads[0]), 0.5, True)
    assert isinstance(verdict.task, T.TaskSet) and int(verdict.task.key) == int(payloads[0].key)
    report = stub_report(0, spec, [], make_validate())
    spec = challenger.propose(spec, dataclasses.replace(report, judged=(verdict,)))
    assert int(spec["state"].updates) == 1 and int(spec["state"].proposals) == 8
    bridge = pathlib.Path(__file__).parents[2] / "experiments/configs/selfplay/bridge.toml"
    args = ["--config", str(bridge), "--run-dir", str(tmp_path), "--arms", "learned"]
    with pytest.raises(ValueError, match=r"\['learned.widht'\]"):
        study.main([*args, "--set", "learned.widht=8"])
    with pytest.raises(ValueError, match="learned: num_levels, num_symbols and min_length"):
        study.main([*args, "--set", "learned.num_levels=3"])
