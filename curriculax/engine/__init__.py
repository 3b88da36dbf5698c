"""The training-loop machinery: env mixing, rollout groups, admission with backfill, the
pending batch, the no-progress guard, checkpoints, traces and logs.

Example:
  >>> import curriculax as cx
  >>> from curriculax.engine import Engine, EngineConfig, Env, run
  >>> from curriculax.engine.synthetic import synthetic_solver, synthetic_tasks
  >>> engine = Engine(synthetic_solver(), [Env("a", synthetic_tasks(100))], EngineConfig(8))
  >>> result = run(engine, steps=5, progress=False)
  >>> result.stopped, result.metrics["step"]
  ('completed', 5)
"""

from curriculax.checkpoint import CheckpointSaveError
from curriculax.engine._engine import (
    Counters,
    Engine,
    EngineConfig,
    EngineState,
    Generation,
    StepReport,
)
from curriculax.engine._env import Env, content_keys
from curriculax.engine._guard import CurriculumStalled
from curriculax.engine._loop import RunResult, Stopped, run
from curriculax.engine._mesh import make_mesh
from curriculax.engine._mixer import MixerState
from curriculax.engine._pending import PendingBatch
from curriculax.engine._restore import CheckpointMismatch, CheckpointUnreadable
from curriculax.engine._rundir import RunDirError
from curriculax.engine._sinks import MetricSink, TensorBoardSink, WandbSink
from curriculax.engine._solver import Rollouts, Solver, TrainBatch
from curriculax.engine.synthetic import SyntheticState, synthetic_solver, synthetic_tasks

__all__ = [
    "CheckpointMismatch",
    "CheckpointSaveError",
    "CheckpointUnreadable",
    "Counters",
    "CurriculumStalled",
    "Engine",
    "EngineConfig",
    "EngineState",
    "Env",
    "Generation",
    "MetricSink",
    "MixerState",
    "PendingBatch",
    "Rollouts",
    "RunDirError",
    "RunResult",
    "Solver",
    "StepReport",
    "Stopped",
    "SyntheticState",
    "TensorBoardSink",
    "TrainBatch",
    "WandbSink",
    "content_keys",
    "make_mesh",
    "run",
    "synthetic_solver",
    "synthetic_tasks",
]
