"""Building blocks of the reliability tests: the engine tests' small two-env engine, log
readers, the environment and command of a quick start subprocess, and a run that kills itself.

Imported by the tests as ``reliability_helpers`` (registered by this folder's conftest); run as
a script, ``python tests/reliability/_helpers.py RUN_DIR STEPS EVERY KILL_AFTER`` trains the
small engine and SIGKILLs itself as soon as checkpoint ``KILL_AFTER`` is committed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def small_engine():
    """The engine tests' two-env engine (``two_env_engine`` in ``tests/engine/_helpers.py``):
    its shapes match ``tests/engine/test_resume.py``, so compiled programs are shared."""
    name = "engine_test_helpers"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "tests/engine/_helpers.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name].two_env_engine()


def read_jsonl(path) -> list[dict]:
    """The records of a JSON-lines file (``[]`` if it does not exist)."""
    path = Path(path)
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def without_time(records: list[dict]) -> list[dict]:
    """Records without their wall-clock field (the only one that differs between runs)."""
    return [{k: v for k, v in r.items() if k != "time"} for r in records]


def snapshot(run_dir) -> dict[str, bytes]:
    """Every file under ``run_dir`` (but the lock) with its bytes."""
    files = [p for p in Path(run_dir).rglob("*") if p.is_file() and p.name != "run.lock"]
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in files}


def subprocess_env() -> dict[str, str]:
    """The environment of a test subprocess: CPU, this checkout first on the path, and the
    tests' compilation cache."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": path}
    cache = os.environ.get("CURRICULAX_TEST_JAX_CACHE")
    if cache:
        env["JAX_COMPILATION_CACHE_DIR"] = cache
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0.2"
    return env


def quickstart_command(run_dir, *args) -> list[str]:
    """``python -m experiments.quickstart --run-dir RUN_DIR --no-progress ARGS``."""
    cmd = [sys.executable, "-m", "experiments.quickstart", "--run-dir", str(run_dir)]
    return [*cmd, "--no-progress", *map(str, args)]


def kill_after_checkpoint(run_dir: str, steps: int, every: int, kill_after: int) -> None:
    """Trains :func:`small_engine` and SIGKILLs this process at the first update after
    checkpoint ``kill_after`` is committed (nothing of the run is closed or flushed)."""
    from curriculax.engine import run

    committed = Path(run_dir) / "checkpoints" / str(kill_after)

    def hook(state, record):
        if record["step"] > kill_after:
            while not committed.is_dir():
                time.sleep(0.001)
            os.kill(os.getpid(), signal.SIGKILL)

    run(
        small_engine(),
        steps=steps,
        run_dir=run_dir,
        checkpoint_every=every,
        progress=False,
        on_update=hook,
    )


if __name__ == "__main__":
    run_dir, steps, every, kill_after = sys.argv[1:]
    kill_after_checkpoint(run_dir, int(steps), int(every), int(kill_after))
