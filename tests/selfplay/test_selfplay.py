"""Self-play acceptance: honest learnability, isolation, robustness, one compiled step."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curriculax as cx
from curriculax.engine import content_keys
from curriculax.selfplay import (
    Challenger,
    InvalidTask,
    curriculum_evolve,
    frontier_sampler,
    held_out_mask,
)
from curriculax.selfplay.toy import capped_solver, level_challenger, level_tasks
from curriculax.testing import check_sampler

SMALL = dict(rounds=4, steps_per_round=8, generated_per_round=24, batch_groups=16)


def _totals(result):
    gen = sum(r.generated for r in result.curriculum)
    learned = sum(r.learned for r in result.curriculum)
    return gen, learned


def test_a_solver_that_never_learns_gets_fewer_than_5_percent_judged_learned():
    gen = learned = 0
    for seed in range(2):
        result = curriculum_evolve(
            capped_solver(learning_rate=0.0, initial_cap=2.0),
            level_tasks(),
            challenger=level_challenger(step_up=0.0, step_down=0.0),
            spec={"level": 1.8},  # pass rates spread over ~0.3..0.9: the noisiest region
            key=seed,
            **SMALL,
        )
        g, l = _totals(result)
        gen, learned = gen + g, learned + l
        assert float(result.state.solver.cap) == 2.0
    assert gen >= 150
    assert learned / gen < 0.05, (learned, gen)


def test_a_learning_solver_gets_tasks_learned_with_positive_r0():
    result = curriculum_evolve(
        capped_solver(), level_tasks(), challenger=level_challenger(), spec={"level": 1.5}, **SMALL
    )
    _, learned = _totals(result)
    assert learned >= 10, [r.learned for r in result.curriculum]
    assert max(r.r0 for r in result.curriculum) > 0.3
    frozen = curriculum_evolve(
        capped_solver(learning_rate=0.0),
        level_tasks(),
        challenger=level_challenger(),
        spec={"level": 1.5},
        **SMALL,
    )
    _, frozen_learned = _totals(frozen)
    assert learned > 3 * max(frozen_learned, 1)
    assert np.mean([r.r0 for r in result.curriculum]) > np.mean([r.r0 for r in frozen.curriculum])
    # The challenger raised its level after rounds that learned tasks.
    assert result.curriculum[-1].spec["level"] > 1.5


def test_a_challenger_whose_payloads_are_all_invalid_leaves_the_run_alive():
    def validate(payload):
        raise InvalidTask("never well-formed")

    base = level_challenger()
    bad = Challenger(base.generate, validate, base.propose)
    with pytest.warns(UserWarning, match="many invalid payloads"):
        result = curriculum_evolve(
            capped_solver(), level_tasks(), challenger=bad, spec={"level": 2.0}, **SMALL
        )
    assert [r.generated for r in result.curriculum] == [0] * 4
    assert [r.invalid for r in result.curriculum] == [4 * 24] * 4  # every try counted
    fstate = result.state.curricula["train"].sampler
    assert int(fstate.invalid) == 4 * 4 * 24
    assert int(fstate.inserted) == 0
    assert result.curriculum[-1].steps == 4 * 8  # training went on, on seed tasks


def test_malformed_payloads_count_as_invalid():
    base = level_challenger()

    def generate(spec, key):
        return {"level": np.float32(1.0)}  # missing the 'variant' field

    with pytest.warns(UserWarning, match="differs from the pool's"):
        result = curriculum_evolve(
            capped_solver(),
            level_tasks(),
            challenger=Challenger(generate, lambda p: p, base.propose),
            spec={"level": 1.0},
            rounds=1,
            steps_per_round=2,
            generated_per_round=4,
        )
    assert result.curriculum[0].invalid == 16 and result.curriculum[0].generated == 0


def test_held_out_split_is_identical_with_and_without_a_challenger_and_never_generated():
    tasks = level_tasks()
    keys = content_keys(tasks)
    mask = held_out_mask(keys, 0.2)
    assert 0.1 < mask.mean() < 0.3
    np.testing.assert_array_equal(mask, held_out_mask(keys[::-1], 0.2)[::-1])  # order-free
    held = {int(k) for k in keys[mask]}

    # A challenger that proposes copies of seed tasks, held-out ones included.
    levels = np.asarray(tasks["level"])
    variants = np.asarray(tasks["variant"])

    def generate(spec, key):
        i = int(jax.random.randint(key, (), 0, len(levels)))
        return {"level": levels[i], "variant": variants[i]}

    copycat = Challenger(generate, lambda p: p, lambda spec, report: spec)
    with_ch = curriculum_evolve(
        capped_solver(), tasks, challenger=copycat, spec={}, held_out_frac=0.2, **SMALL
    )
    without = curriculum_evolve(capped_solver(), tasks, held_out_frac=0.2, **SMALL)
    for result in (with_ch, without):
        env = result.engine.envs[0]
        assert {int(k) for k in env.keys}.isdisjoint(held)
        assert len(env.keys) + len(held) == len(keys)
    np.testing.assert_array_equal(with_ch.engine.envs[0].keys, without.engine.envs[0].keys)
    collisions = sum(r.collisions for r in with_ch.curriculum)
    assert collisions > 0
    fstate = with_ch.state.curricula["train"].sampler
    assert {int(k) for k in np.asarray(fstate.keys)[np.asarray(fstate.status) != 0]}.isdisjoint(
        held
    )


def test_the_compiled_step_is_traced_once_across_rounds():
    result = curriculum_evolve(
        capped_solver(), level_tasks(), challenger=level_challenger(), spec={"level": 2.0}, **SMALL
    )
    assert result.engine._generate._cache_size() == 1
    assert result.engine._train._cache_size() == 1


def test_without_a_challenger_it_is_an_ordinary_training_run():
    result = curriculum_evolve(capped_solver(), level_tasks(), **SMALL)
    assert all(r.generated == 0 and r.spec is None for r in result.curriculum)
    assert result.final_reward == result.curriculum[-1].held_out_reward
    assert result.curriculum[-1].held_out_reward > result.curriculum[0].held_out_reward


def test_frontier_sampler_conforms_and_mixes_the_frontier_share():
    n = 40
    inner = cx.samplers.sequential(n)
    layout = {"level": jax.ShapeDtypeStruct((), jnp.float32)}
    fr = frontier_sampler(inner, n, layout, capacity=16, frontier_share=0.25)
    check_sampler(fr.sampler, num_tasks=n + 16, num=8)
    state = fr.sampler.init(jax.random.key(0))
    # Empty frontier: every slot is a seed task.
    draw, _ = fr.sampler.sample(state, jax.random.key(1), 8)
    assert bool(jnp.all(draw.from_pool)) and int(jnp.max(draw.ids)) < n
    tasks = {"level": jnp.arange(4, dtype=jnp.float32) + 10.0}
    state = fr.insert(
        state,
        tasks,
        jnp.ones(4, bool),
        jnp.arange(4, dtype=jnp.uint32) + 100,
        0,
        jnp.zeros(4, jnp.uint32),
        jnp.int32(0),
    )
    draw, _ = fr.sampler.sample(state, jax.random.key(2), 8)
    front = np.asarray(draw.ids) >= n
    assert front.sum() == 2  # round(0.25 * 8)
    assert sorted(np.asarray(draw.tasks["level"])[front].tolist()) == sorted(
        (np.asarray(draw.ids)[front] - n + 10).astype(float).tolist()
    )
    assert set(np.asarray(draw.keys)[front].tolist()) <= {100, 101, 102, 103}


def test_frontier_judgement_on_hand_made_counts():
    n = 10
    layout = {"level": jax.ShapeDtypeStruct((), jnp.float32)}
    fr = frontier_sampler(
        cx.samplers.sequential(n), n, layout, capacity=4, max_attempts=3, pass_rate=0.5
    )
    s = fr.sampler.init(jax.random.key(0))
    s = fr.insert(
        s,
        {"level": jnp.zeros(4)},
        jnp.ones(4, bool),
        jnp.arange(4, dtype=jnp.uint32),
        0,
        jnp.zeros(4, jnp.uint32),
        jnp.int32(0),
    )

    def observe(s, slot_rewards):
        ids = jnp.array([n + slot for slot, _ in slot_rewards], jnp.int32)
        rewards = jnp.array([r for _, r in slot_rewards], jnp.float32)
        valid = jnp.ones_like(rewards, bool)
        results = cx.GroupResults(ids, rewards, valid, rewards[:, :, None] * 0, valid[:, :, None])
        return fr.sampler.observe(s, results)

    fail8, pass8 = [0.0] * 8, [1.0] * 8
    # slot 0: 0/8 then 8/8 -> learned; slot 1: passes at first -> dropped easy;
    # slot 2: 0/8 three times -> stuck; slot 3: 0/8 then 2/8 -> neither yet (1 attempt left)
    s = observe(s, [(0, fail8), (1, pass8), (2, fail8), (3, fail8)])
    assert int(s.dropped_easy) == 1 and int(s.status[1]) == 0
    s = observe(s, [(0, pass8), (2, fail8), (3, [1.0, 1.0] + [0.0] * 6)])
    s = observe(s, [(2, fail8)])
    s, report = fr.judge(s)
    assert int(report.learned) == 1 and int(report.stuck) == 1
    assert abs(float(report.r0) - 0.5) < 1e-6  # (1.0 + 0.0) / 2
    assert np.asarray(s.status).tolist() == [0, 0, 0, 1]
    assert int(report.occupancy) == 1
