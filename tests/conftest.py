"""Shared test set-up: keep JAX on CPU and quiet."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
