"""Registers ``_helpers.py`` as ``reliability_helpers`` (pytest runs with
``--import-mode=importlib``, so a test folder is not on ``sys.path``) and shares its engine and
quick start runner as fixtures."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

_NAME = "reliability_helpers"
if _NAME not in sys.modules:
    _spec = importlib.util.spec_from_file_location(_NAME, Path(__file__).with_name("_helpers.py"))
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_NAME] = _module
    _spec.loader.exec_module(_module)
helpers = sys.modules[_NAME]


@pytest.fixture(scope="session")
def engine():
    return helpers.small_engine()


@pytest.fixture(scope="session")
def quickstart():
    """``quickstart(run_dir, *args, timeout=120)``: runs ``python -m experiments.quickstart
    --run-dir RUN_DIR --no-progress ARGS`` to the end and returns the completed process (its
    output in ``.stdout`` and ``.stderr``)."""

    def run(run_dir, *args, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            helpers.quickstart_command(run_dir, *args),
            cwd=helpers.REPO,
            env=helpers.subprocess_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return run
