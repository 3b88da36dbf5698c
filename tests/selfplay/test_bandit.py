"""The level bandit: it leaves the easy/stuck oscillation the old level rule fell into.

The scripted judge stream below replays what the self-play study saw on two of eight seeds
(2026-12-01): fresh tasks at level 2 (length 3) were all stuck, tasks at levels 0-1 were all
passed (dropped as easy), so ``level_direction`` alternated 2, 1, 2, 1 for all 1500 updates.
"""

import types

import jax
import numpy as np
import pytest

from curriculax.selfplay import (
    RoundReport,
    Verdict,
    bandit_spec,
    curriculum_evolve,
    level_probs,
    update_values,
)
from curriculax.selfplay.toy import capped_solver, level_bandit, level_tasks
from experiments.selfplay._challengers import sequence_challenger

PER_ROUND = 32
LEVELS = 6  # reversal lengths 1-6, as in the study


def scripted_report(r, spec, levels, frontier, rng):
    """The judge's report on one round of tasks at ``levels``: levels below ``frontier`` are
    passed (dropped as easy), the frontier gains a little (+0.12 on average: learning, but not
    yet passing, so stuck), higher levels gain nothing (noise only)."""
    judged = []
    easy = 0
    for level in levels:
        if level < frontier:
            easy += 1
            continue
        mean = 0.12 if level == frontier else 0.0
        gain = float(np.clip(mean + rng.normal(0.0, 0.08), -1.0, 1.0))
        judged.append(Verdict({"level": float(level) + 0.5, "variant": 0}, gain, False))
    gains = [v.gain for v in judged]
    return RoundReport(
        round=r,
        spec=spec,
        generated=len(levels),
        invalid=0,
        collisions=0,
        learned=0,
        stuck=len(judged),
        dropped_easy=easy,
        r0=float(np.mean(gains)) if gains else 0.0,
        occupancy=0,
        steps=150 * (r + 1),
        rollouts=0,
        judged=tuple(judged),
    )


def run_stream(challenger, spec, levels_of, rounds, frontier_at, seed=0):
    """Drives ``challenger.propose`` with the scripted judge; returns the levels drawn per
    round (``int[rounds, PER_ROUND]``) and the specs."""
    rng = np.random.default_rng(seed)
    key = jax.random.key(seed)
    drawn, specs = [], []
    for r in range(rounds):
        levels = levels_of(spec, jax.random.fold_in(key, r))
        drawn.append(levels)
        specs.append(spec)
        spec = challenger.propose(spec, scripted_report(r, spec, levels, frontier_at(r), rng))
    return np.array(drawn), specs


def old_rule():
    return sequence_challenger(types.SimpleNamespace(num_levels=LEVELS))


def bandit_levels(challenger):
    """Each round's task levels through the challenger's own ``generate``."""

    def levels_of(spec, key):
        payloads = [challenger.generate(spec, jax.random.fold_in(key, i)) for i in range(PER_ROUND)]
        return [int(p["level"]) for p in payloads]

    return levels_of


def test_the_old_level_rule_oscillates_between_an_easy_and_a_stuck_level():
    drawn, specs = run_stream(
        old_rule(),
        {"level": 2},
        lambda spec, key: [spec["level"]] * PER_ROUND,
        rounds=40,
        frontier_at=lambda r: 2,
    )
    levels = [s["level"] for s in specs]
    assert levels == [2, 1] * 20  # the study's seeds 0 and 1: never left the bottom
    assert np.mean(drawn < 2) == 0.5  # half of all generated tasks were already passed


def test_the_bandit_leaves_the_oscillation_and_follows_the_frontier():
    challenger = level_bandit(max_level=LEVELS)
    drawn, specs = run_stream(
        challenger,
        bandit_spec(LEVELS),
        bandit_levels(challenger),
        rounds=40,
        frontier_at=lambda r: 2 if r < 20 else 3,  # the solver masters level 2 at round 20
    )
    modes = [s["level"] for s in specs]
    # Stationary frontier at 2: after a few rounds the most likely level is 2 and stays there.
    assert modes[5:20] == [2] * 15, modes
    settled = drawn[5:20]
    assert np.mean(settled == 2) > 0.4, np.mean(settled == 2)
    assert np.mean(settled < 2) < 0.25, np.mean(settled < 2)  # old rule: 0.5
    # The frontier moves to 3: level 2 turns easy, its value decays, the mass follows.
    assert modes[26:] == [3] * 14, modes
    assert np.mean(drawn[26:] == 3) > 0.4
    assert np.mean(drawn[26:] < 3) < 0.35


def test_rate_0_is_the_random_generator():
    challenger = level_bandit(max_level=LEVELS, rate=0.0)
    drawn, specs = run_stream(
        challenger,
        bandit_spec(LEVELS),
        bandit_levels(challenger),
        rounds=12,
        frontier_at=lambda r: 2,
    )
    assert all(s["values"] == (0.0,) * LEVELS for s in specs)
    share = np.bincount(drawn.ravel(), minlength=LEVELS) / drawn.size
    assert np.all(np.abs(share - 1 / LEVELS) < 0.06), share


def test_update_values_moves_judged_levels_and_decays_the_rest():
    values = jax.numpy.array([0.4, 0.0, 0.2, 0.0])
    new = update_values(
        values, np.array([1, 1, 2, 3]), np.array([0.2, 0.4, 0.0, 9.0]), np.array([1, 1, 1, 0]), 0.5
    )
    # level 0: unjudged, decays; 1: toward mean 0.3; 2: toward 0; 3: masked entry ignored.
    np.testing.assert_allclose(new, [0.2, 0.15, 0.1, 0.0], atol=1e-6)
    p = level_probs(new, 0.05, 0.2)
    assert float(p.sum()) == pytest.approx(1.0) and float(p.min()) >= 0.05 - 1e-7


def test_bandit_parameters_are_checked():
    with pytest.raises(ValueError, match="rate"):
        level_bandit(rate=1.5)
    with pytest.raises(ValueError, match="temperature"):
        level_bandit(temperature=0.0)


def test_a_frozen_solver_under_the_bandit_gets_at_most_5_percent_learned_and_r0_0():
    # The null on the bandit path: verdicts feed back into the level draw, which must not bias
    # the judge (it judges each task once, on rollouts the draw never saw).
    judged = learned = 0
    gain = 0.0
    for seed in range(3):
        result = curriculum_evolve(
            capped_solver(learning_rate=0.0, initial_cap=2.0),
            level_tasks(),
            challenger=level_bandit(max_level=6),
            spec=bandit_spec(6),
            key=seed,
            rounds=12,
            steps_per_round=8,
            generated_per_round=96,
            frontier_share=0.5,
            batch_groups=32,
        )
        assert float(result.state.solver.cap) == 2.0
        for rep in result.curriculum:
            assert len(rep.judged) == rep.learned + rep.stuck
            assert sum(v.learned for v in rep.judged) == rep.learned
            if rep.judged:
                assert np.mean([v.gain for v in rep.judged]) == pytest.approx(rep.r0, abs=1e-5)
            judged += len(rep.judged)
            learned += rep.learned
            gain += sum(v.gain for v in rep.judged)
        assert "judged" not in result.history[0]  # per-task verdicts stay out of the records
    assert judged >= 300, judged
    assert learned / judged <= 0.05, (learned, judged)
    assert abs(gain / judged) <= 0.05, gain / judged
