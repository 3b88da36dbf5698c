"""Runs a script in several processes of one JAX distributed run on this machine (CPU, the
tests' compilation cache), each a subprocess: the device count is fixed when JAX starts."""

import socket
import subprocess
import sys

from tests.reliability._helpers import REPO, subprocess_env

# The start of a script for run_processes: two processes of one CPU device each, with
# pid, port and run_dir from its arguments.
PREAMBLE = r"""
import faulthandler
import os
import signal
import sys

faulthandler.dump_traceback_later(150, exit=True)  # a hang shows where it waits

import jax

jax.config.update("jax_num_cpu_devices", 1)
jax.config.update("jax_cpu_collectives_implementation", "gloo")
pid, port, run_dir = int(sys.argv[1]), sys.argv[2], sys.argv[3]
jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=pid)

import numpy as np
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_processes(script: str, *args: str, processes: int = 2, timeout: int = 300) -> list[str]:
    """Runs ``python -c script PROCESS_ID PORT *args`` in ``processes`` processes and returns
    each one's output (stdout and stderr), asserting that every one exited with 0."""
    port = str(free_port())
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(i), port, *args],
            cwd=REPO,
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(processes)
    ]
    outs: list[str] = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=timeout)[0])
    except subprocess.TimeoutExpired:
        outs += [kill(p) for p in procs[len(outs) :]]
        raise AssertionError(
            f"no exit in {timeout} s (a hang?):\n" + "\n----\n".join(o[-3000:] for o in outs)
        ) from None
    finally:
        for p in procs:  # one that failed leaves the others waiting for it
            if p.poll() is None:
                p.kill()
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-3000:]
    return outs


def kill(p: subprocess.Popen) -> str:
    """Kills ``p`` and returns what it wrote."""
    p.kill()
    return p.communicate()[0]


def lines(out: str, tag: str) -> list[str]:
    """The lines of ``out`` that start with ``tag``."""
    return [line for line in out.splitlines() if line.startswith(tag)]
