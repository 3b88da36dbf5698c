"""With several processes, ``--devices N`` makes a mesh of N / processes devices from each
process, also when a process has more devices than that (a GPU host with more cards): two
processes of 2 fake CPU devices each, ``--devices 2 --num-processes 2``, each hold one device
of the mesh. Every process is a subprocess (the device count is fixed when JAX starts)."""

from tests.scale._processes import lines, run_processes

SCRIPT = r"""
import sys

import jax

jax.config.update("jax_num_cpu_devices", 2)  # more than --devices / --num-processes
from experiments import _cli

pid, port = sys.argv[1], sys.argv[2]
parser = _cli.base_parser("x", steps=1, run_dir="unused")
args = parser.parse_args(
    ["--devices", "2", "--num-processes", "2", "--process-id", pid,
     "--coordinator", f"127.0.0.1:{port}"]
)
mesh = _cli.setup_devices(args)
print("MESH", jax.device_count(), *[d.process_index for d in mesh.devices.ravel()], flush=True)
"""


def test_each_process_gives_the_mesh_the_same_number_of_devices():
    for out in run_processes(SCRIPT):
        # 4 devices in all; the mesh: process 0's first device, then process 1's.
        assert lines(out, "MESH") == ["MESH 4 0 1"], out[-3000:]
