"""Shared test set-up: JAX on CPU, and a compilation cache shared by the whole session.

Many tests build engines whose compiled programs are identical; the persistent cache lets
every test after the first reuse them instead of compiling again. The directory is exported as
``CURRICULAX_TEST_JAX_CACHE`` before pytest-xdist starts its workers, so the workers and the
subprocesses the tests start (``reliability_helpers.subprocess_env``) share it.
"""

import os
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax

_CACHE = os.environ.get("CURRICULAX_TEST_JAX_CACHE") or tempfile.mkdtemp(prefix="cx-jax-cache-")
os.environ["CURRICULAX_TEST_JAX_CACHE"] = _CACHE
jax.config.update("jax_compilation_cache_dir", _CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)

# The skip policy (--skips=none|allowed|any): a run fails on a skip nobody allowed.
from tests.skip_policy import pytest_addoption, pytest_configure  # noqa: E402, F401
