"""The training-loop machinery: the solver interface, env mixing, admission with backfill."""

from curriculax.engine._solver import Rollouts, Solver, TrainBatch

__all__ = ["Rollouts", "Solver", "TrainBatch"]
