"""Registers ``_helpers.py`` as ``reliability_helpers`` (pytest runs with
``--import-mode=importlib``, so a test folder is not on ``sys.path``) and shares its engine and
quick start runner as fixtures.

A test marked ``read_only_dirs`` needs a read-only directory to refuse writes. Run as root (as
CI runs), such a test is run again in a child process that lost the capabilities letting root
write there, and passes only if it passed there (see
``reliability_helpers.rerun_without_dac_override``); it never skips.
"""

import importlib.util
import os
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


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "read_only_dirs: needs read-only directories to refuse writes (as root: rerun in a "
        "child without CAP_DAC_OVERRIDE)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    if pyfuncitem.get_closest_marker("read_only_dirs") is None or os.environ.get(helpers.CHILD_ENV):
        return None
    if not helpers.can_write_read_only_dirs():
        return None  # read-only means read-only here: run the test in this process
    helpers.rerun_without_dac_override(pyfuncitem.nodeid)
    return True
