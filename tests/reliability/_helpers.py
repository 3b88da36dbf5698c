"""Building blocks of the reliability tests: the engine tests' small two-env engine, log
readers, the environment and command of a quick start subprocess, a run that kills itself, and
a test rerun in a child that cannot write read-only directories (when the suite runs as root).

Imported by the tests as ``reliability_helpers`` (registered by this folder's conftest); run as
a script, ``python tests/reliability/_helpers.py RUN_DIR STEPS EVERY KILL_AFTER`` trains the
small engine and SIGKILLs itself as soon as checkpoint ``KILL_AFTER`` is committed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Set in the child of rerun_without_dac_override (a pytest that runs one test).
CHILD_ENV = "CX_TEST_WITHOUT_DAC_OVERRIDE"
# What lets root write a read-only directory: dropped from the child's bounding and inheritable
# sets, so the child (still uid 0, so it can read root's interpreter and venv) gets a
# PermissionError there as any other user does.
DROPPED_CAPS = "-dac_override,-dac_read_search,-fowner"


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


def can_write_read_only_dirs() -> bool:
    """Whether this process writes into a ``0o555`` directory (root with CAP_DAC_OVERRIDE)."""
    probe = Path(tempfile.mkdtemp(prefix="cx-probe-"))
    (probe / "ro").mkdir(mode=0o555)
    try:
        (probe / "ro" / "x").mkdir()
        return True
    except PermissionError:
        return False
    finally:
        (probe / "ro").chmod(0o755)
        shutil.rmtree(probe)


def rerun_without_dac_override(nodeid: str, timeout: float = 600) -> None:
    """Runs test ``nodeid`` in a child pytest (``setpriv``, uid 0 without the capabilities
    that override file permissions) and fails the calling test unless it passed there (a skip
    there fails too: ``--skips=none``)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise AssertionError(
            "the read-only-directory tests run as root need setpriv (util-linux) to drop "
            "CAP_DAC_OVERRIDE in a child; install it or run the suite as a non-root user"
        )
    command = [
        setpriv, "--inh-caps=-all", f"--bounding-set={DROPPED_CAPS}", "--",
        sys.executable, "-m", "pytest", nodeid, "-p", "no:cacheprovider", "-p", "no:xdist",
        "-rs", "--skips=none",
    ]  # fmt: skip
    env = {**subprocess_env(), CHILD_ENV: "1"}
    out = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )
    if out.returncode != 0 or " passed" not in out.stdout:
        raise AssertionError(
            f"{nodeid} failed in a child without CAP_DAC_OVERRIDE (exit {out.returncode}):\n"
            + out.stdout[-4000:]
            + out.stderr[-2000:]
        )


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
