"""curriculax: composable curricula for reinforcement learning, as pure JAX functions."""

from curriculax import credit, gates, samplers
from curriculax._config import (
    curriculum_from_config,
    gate_from_config,
    register_gate,
    register_sampler,
    robust_curriculum,
    sampler_from_config,
)
from curriculax._curriculum import curriculum
from curriculax._types import (
    Admission,
    AdmissionGate,
    Curriculum,
    CurriculumState,
    EmptyState,
    GroupResults,
    TaskDraw,
    TaskSampler,
)
from curriculax.host import HostCurriculum, IncompatibleKeys

__version__ = "0.1.0"

__all__ = [
    "Admission",
    "AdmissionGate",
    "Curriculum",
    "CurriculumState",
    "EmptyState",
    "GroupResults",
    "HostCurriculum",
    "IncompatibleKeys",
    "TaskDraw",
    "TaskSampler",
    "__version__",
    "credit",
    "curriculum",
    "curriculum_from_config",
    "gate_from_config",
    "gates",
    "register_gate",
    "register_sampler",
    "robust_curriculum",
    "sampler_from_config",
    "samplers",
]
