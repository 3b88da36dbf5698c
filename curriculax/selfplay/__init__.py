"""Solver-challenger self-play: a challenger proposes tasks at the solver's frontier.

``Challenger(generate, validate, propose)`` owns a task-generation spec; the frontier sampler
mixes seed tasks with generated ones and judges whether the solver learns each one (latest
pass rate against a baseline independent of the "already passed?" filter);
``curriculum_evolve`` runs the rounds (challenge, solve, judge, tune) on one engine,
evaluating on held-out tasks that neither the challenger nor ``propose`` ever sees.
"""

from curriculax.selfplay._bandit import (
    bandit_challenger,
    bandit_spec,
    draw_levels,
    level_probs,
    pure_bandit_challenger,
    pure_bandit_spec,
    update_values,
)
from curriculax.selfplay._challenger import (
    Challenge,
    Challenger,
    InvalidTask,
    judged_direction,
    level_direction,
    run_challenge,
)
from curriculax.selfplay._compiled import (
    CompiledResult,
    Judged,
    PureChallenger,
    compiled_evolve,
    host_challenger,
    row_keys,
)
from curriculax.selfplay._evolve import (
    EvolutionResult,
    RoundReport,
    Verdict,
    curriculum_evolve,
)
from curriculax.selfplay._frontier import (
    Frontier,
    FrontierState,
    JudgeReport,
    frontier_sampler,
)
from curriculax.selfplay._learned import (
    Generator,
    LearnedConfig,
    LearnedState,
    learned_challenger,
    learned_config,
    learned_spec,
    proposal_rewards,
    restore_learned,
    save_learned,
)

__all__ = [
    "Challenge",
    "Challenger",
    "CompiledResult",
    "EvolutionResult",
    "Frontier",
    "FrontierState",
    "Generator",
    "InvalidTask",
    "JudgeReport",
    "Judged",
    "LearnedConfig",
    "LearnedState",
    "PureChallenger",
    "RoundReport",
    "Verdict",
    "bandit_challenger",
    "bandit_spec",
    "compiled_evolve",
    "curriculum_evolve",
    "draw_levels",
    "frontier_sampler",
    "host_challenger",
    "judged_direction",
    "learned_challenger",
    "learned_config",
    "learned_spec",
    "level_direction",
    "level_probs",
    "proposal_rewards",
    "pure_bandit_challenger",
    "pure_bandit_spec",
    "restore_learned",
    "row_keys",
    "run_challenge",
    "save_learned",
    "update_values",
]
