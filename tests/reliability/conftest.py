"""Shared set-up of the reliability tests: a small two-env engine (the shapes of
``tests/engine/test_resume.py``, so compiled programs are shared through the cache) and a
runner for the quick start in a subprocess."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import curriculax as cx
from curriculax.engine import Engine, EngineConfig, Env
from curriculax.engine.synthetic import synthetic_solver, synthetic_tasks

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def engine():
    """Two envs like the quick start; B = 8, G = 4, so groups wait across updates."""
    gated = cx.curriculum(
        cx.samplers.difficulty_pools(64),
        {"zero_advantage": cx.gates.advantage_range(0.0, 0.0)},
    )
    envs = [
        Env("steady", synthetic_tasks(48, seed=1), group_size=4),
        Env("pools", synthetic_tasks(64, seed=2), gated, group_size=4, weight=2.0),
    ]
    return Engine(
        synthetic_solver(), envs, EngineConfig(batch_groups=8, groups_per_generation=4, seed=3)
    )


def subprocess_env() -> dict[str, str]:
    """The environment of a quick start subprocess: CPU, and the tests' compilation cache."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    cache = os.environ.get("CURRICULAX_TEST_JAX_CACHE")
    if cache:
        env["JAX_COMPILATION_CACHE_DIR"] = cache
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0.2"
    return env


def quickstart_command(run_dir, *args) -> list[str]:
    cmd = [sys.executable, "-m", "experiments.quickstart", "--run-dir", str(run_dir)]
    return [*cmd, "--no-progress", *map(str, args)]


@pytest.fixture(scope="session")
def quickstart():
    """``quickstart(run_dir, *args, timeout=120)``: runs ``python -m experiments.quickstart
    --run-dir RUN_DIR --no-progress ARGS`` to the end and returns the completed process (its
    output in ``.stdout`` and ``.stderr``)."""

    def run(run_dir, *args, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            quickstart_command(run_dir, *args),
            cwd=REPO,
            env=subprocess_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return run
