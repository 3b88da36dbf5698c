"""Built-in admission gates."""

from curriculax.gates.advantage_range import AdvantageRangeState, advantage_range

__all__ = ["AdvantageRangeState", "advantage_range"]
