"""What a study ran on: package versions, Python, the CPU and the backend.

Stored with every arm a study runs, so per-seed numbers that differ between two runs of one
config can be traced to what differed (docs/studies.md: a command reproduces a study's
distribution, not always its per-seed numbers).
"""

from __future__ import annotations

import importlib.metadata
import os
import platform

import jax

# The packages a run's numbers depend on, in the order they are printed.
PACKAGES = ("jax", "jaxlib", "flax", "optax", "numpy")


# CPU features XLA's CPU code generation may use (vector widths, fused multiply-add, matrix
# units): two machines that differ in these can round differently.
CPU_FEATURES = ("fma", "avx", "avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile")


def _cpuinfo(field: str) -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(field):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` says, else "unknown CPU"."""
    return _cpuinfo("model name") or platform.processor() or "unknown CPU"


def cpu_features() -> str | None:
    """Which of :data:`CPU_FEATURES` the CPU has, space-separated (None where unknown)."""
    flags = _cpuinfo("flags")
    if flags is None:
        return None
    have = set(flags.split())
    return " ".join(f for f in CPU_FEATURES if f in have)


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment() -> dict[str, str | int | None]:
    """``{"python", <each of PACKAGES>, "backend", "device", "cpu", "cpu_features", "cores"}``:
    the versions (None for a package not installed), the default JAX backend and its first
    device's kind, the CPU model, which of :data:`CPU_FEATURES` it has, and its core count."""
    device = jax.devices()[0]
    return {
        "python": platform.python_version(),
        **{p: _version(p) for p in PACKAGES},
        "backend": jax.default_backend(),
        "device": device.device_kind,
        "cpu": cpu_model(),
        "cpu_features": cpu_features(),
        "cores": os.cpu_count(),
    }


def describe(env: dict) -> str:
    """One line: ``Python 3.11.7, jax 0.10.2, ...; backend cpu; 2 CPU cores (MODEL; fma
    avx ...)``."""
    packages = ", ".join(f"{p} {env.get(p)}" for p in PACKAGES if env.get(p))
    return (
        f"Python {env.get('python')}, {packages}; backend {env.get('backend')} "
        f"({env.get('device')}); {env.get('cores')} CPU cores ({env.get('cpu')}; "
        f"{env.get('cpu_features') or 'features unknown'})"
    )


def describe_all(envs: list[dict | None]) -> str:
    """A sentence naming each distinct environment among ``envs`` (None: not recorded, an arm
    or run kept from before environments were stored)."""
    seen: list[str] = []
    for env in envs:
        line = "not recorded" if env is None else describe(env)
        if line not in seen:
            seen.append(line)
    if len(seen) == 1:
        return f"Environment: {seen[0]}."
    return "Environments (they differ between arms or runs): " + "; ".join(seen) + "."
