"""Shared test set-up: JAX on CPU, quick compiles, and a compilation cache shared by the whole
session.

Many tests build engines whose compiled programs are identical; the persistent cache lets
every test after the first reuse them instead of compiling again. The directory is exported as
``CURRICULAX_TEST_JAX_CACHE`` before pytest-xdist starts its workers, so the workers and the
subprocesses the tests start (``tests/reliability/_helpers.subprocess_env``) share it.
"""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# The tests compile hundreds of programs on tiny shapes and run each for milliseconds, so most
# of their time is XLA compiling, and most of that is LLVM optimising code that then runs for
# those milliseconds. Level 0 runs the tiny study of tests/experiments/test_compare.py in 18.7 s
# instead of 26.2 s (docs/studies.md, "The test suite's wall time"). Set before JAX starts and
# exported, so the subprocesses the tests start inherit it; a level the caller already set wins
# (.ci/run's python3.12 suite sets XLA's default, 3, so the programs users run are tested there).
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    _flags = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = f"{_flags} --xla_backend_optimization_level=0".strip()

import jax

_CACHE = os.environ.get("CURRICULAX_TEST_JAX_CACHE")
if not _CACHE:
    # This process made the directory (the pytest process; xdist's workers and the tests'
    # subprocesses inherit it through the environment), so it removes it on exit: each run left
    # ~60 MB in the temporary folder. A directory the caller named is kept.
    _CACHE = tempfile.mkdtemp(prefix="cx-jax-cache-")
    atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
os.environ["CURRICULAX_TEST_JAX_CACHE"] = _CACHE
jax.config.update("jax_compilation_cache_dir", _CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)

# The skip policy (--skips=none|allowed|any): a run fails on a skip nobody allowed.
from tests.skip_policy import pytest_addoption, pytest_configure  # noqa: E402, F401
