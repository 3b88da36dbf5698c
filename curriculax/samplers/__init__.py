"""Built-in task samplers."""

from curriculax.samplers.category_bandit import CategoryBanditState, category_bandit
from curriculax.samplers.difficulty_pools import (
    DEFAULT_BANDS,
    Band,
    DifficultyPoolsState,
    difficulty_pools,
)
from curriculax.samplers.floor import FloorState, floor
from curriculax.samplers.learnability import LearnabilityState, learnability
from curriculax.samplers.sequential import SequentialState, sequential
from curriculax.samplers.skip_zero_variance import SkipState, skip_zero_variance
from curriculax.samplers.uniform import uniform

__all__ = [
    "DEFAULT_BANDS",
    "Band",
    "CategoryBanditState",
    "DifficultyPoolsState",
    "FloorState",
    "LearnabilityState",
    "SequentialState",
    "SkipState",
    "category_bandit",
    "difficulty_pools",
    "floor",
    "learnability",
    "sequential",
    "skip_zero_variance",
    "uniform",
]
