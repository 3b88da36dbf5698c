"""Built-in task samplers."""

from curriculax._contradiction import contradicting_groups
from curriculax.samplers.category_bandit import (
    CategoryBanditState,
    category_bandit,
    category_reliability,
    noisy_categories,
)
from curriculax.samplers.category_learnability import (
    CategoryLearnabilityState,
    category_learnability,
)
from curriculax.samplers.difficulty_pools import (
    DEFAULT_BANDS,
    Band,
    DifficultyPoolsState,
    difficulty_pools,
)
from curriculax.samplers.floor import FloorState, floor
from curriculax.samplers.hierarchical_learnability import hierarchical_learnability
from curriculax.samplers.learnability import LearnabilityState, learnability
from curriculax.samplers.learning_progress import (
    LearningProgressState,
    learning_progress,
    looks_like_noise,
    noisy_tasks,
)
from curriculax.samplers.reward_consistency import (
    RewardConsistencyState,
    contradicted_tasks,
    reward_consistency,
)
from curriculax.samplers.sequential import SequentialState, sequential
from curriculax.samplers.skip_zero_variance import SkipState, skip_zero_variance
from curriculax.samplers.uniform import uniform

__all__ = [
    "DEFAULT_BANDS",
    "Band",
    "CategoryBanditState",
    "CategoryLearnabilityState",
    "DifficultyPoolsState",
    "FloorState",
    "LearnabilityState",
    "LearningProgressState",
    "RewardConsistencyState",
    "SequentialState",
    "SkipState",
    "category_bandit",
    "category_learnability",
    "category_reliability",
    "contradicted_tasks",
    "contradicting_groups",
    "difficulty_pools",
    "floor",
    "hierarchical_learnability",
    "learnability",
    "learning_progress",
    "looks_like_noise",
    "noisy_categories",
    "noisy_tasks",
    "reward_consistency",
    "sequential",
    "skip_zero_variance",
    "uniform",
]
