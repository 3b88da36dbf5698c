"""Built-in admission gates."""

from curriculax.gates.advantage_range import AdvantageRangeState, advantage_range
from curriculax.gates.reward_consistency import ConsistencyGateState, reward_consistency

__all__ = ["AdvantageRangeState", "ConsistencyGateState", "advantage_range", "reward_consistency"]
