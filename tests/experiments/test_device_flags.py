"""The device flags of the experiment CLI: a script refuses the ones it does not use, the
multi-host flags are refused without several processes, ``make_mesh`` refuses a device count
that is not a positive int and takes the same number of devices from each process, and the
quick start says which pool sizes work when it splits a pool over the devices."""

import os
import re
import subprocess
import sys
from collections import namedtuple

import numpy as np
import pytest

from curriculax.engine import make_mesh
from experiments import _cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_study_speed_refuses_the_shared_options_it_does_not_use(monkeypatch, tmp_path):
    from experiments.selfplay import study, study_speed

    def ran(*_):
        raise AssertionError("study_speed ran a seed despite options it ignores")

    monkeypatch.setattr(study, "run_one", ran)
    monkeypatch.setattr(study, "run_compiled", ran)
    argv = ["--devices", "4", "--num-processes", "2", "--steps", "99", "--wandb", "proj"]
    with pytest.raises(SystemExit) as e:
        study_speed.main([*argv, "--run-dir", str(tmp_path / "ss"), "--seeds", "2"])
    message = str(e.value)
    assert message.startswith("error: ") and "not used by this script" in message, message
    for flag in ("--devices", "--num-processes", "--steps", "--wandb"):
        assert flag in message, message
    assert not (tmp_path / "ss").exists()


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--coordinator", "10.0.0.1:1234", "--process-id", "3"], "--coordinator"),
        (["--coordinator", "10.0.0.1:1234"], "--coordinator"),
        (["--process-id", "7"], "--process-id"),
        (["--devices", "2", "--process-id", "1"], "--process-id"),
    ],
)
def test_multi_host_flags_are_refused_with_one_process(argv, flag):
    parser = _cli.base_parser("x", steps=1, run_dir="unused")
    only = rf"^error: {flag} only means something with --num-processes > 1"
    with pytest.raises(SystemExit, match=only):
        _cli.setup_devices(parser.parse_args(argv))


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--num-processes", "0"], r"^error: --num-processes must be >= 1, got 0"),
        (
            ["--devices", "2", "--num-processes", "2", "--coordinator", "h:1", "--process-id", "2"],
            r"^error: --process-id must lie in \[0, 2\) for --num-processes 2, got 2",
        ),
    ],
)
def test_a_process_count_below_1_or_an_id_out_of_range_is_refused(argv, match):
    parser = _cli.base_parser("x", steps=1, run_dir="unused")
    with pytest.raises(SystemExit, match=match):
        _cli.setup_devices(parser.parse_args(argv))


@pytest.mark.parametrize("count", [0, -1, 2.0, True, "2"])
def test_make_mesh_refuses_a_device_count_that_is_not_a_positive_int(count):
    with pytest.raises((TypeError, ValueError), match="a device count must be a positive int"):
        make_mesh(count)


def test_make_mesh_takes_a_numpy_int_and_the_first_devices_in_one_process():
    import jax

    assert make_mesh(np.int64(1)).devices.tolist() == jax.devices()[:1]
    assert make_mesh().devices.size == jax.device_count()


Dev = namedtuple("Dev", "id process_index")


def test_mesh_devices_takes_the_same_number_from_each_process():
    from curriculax.engine._mesh import mesh_devices

    # jax.devices() lists process 0's devices, then process 1's: 4 each (a GPU host with more
    # cards than --devices / --num-processes).
    available = [Dev(i, i // 4) for i in range(8)]
    assert mesh_devices(available, 2, 2) == [Dev(0, 0), Dev(4, 1)]
    assert mesh_devices(available, 4, 2) == [Dev(0, 0), Dev(1, 0), Dev(4, 1), Dev(5, 1)]
    assert mesh_devices(available, 8, 2) == available
    assert mesh_devices(available, 3, 1) == available[:3]  # one process: the first n
    with pytest.raises(ValueError, match="must be a multiple of the process count"):
        mesh_devices(available, 3, 2)
    with pytest.raises(ValueError, match="process 0 has 4"):
        mesh_devices(available, 10, 2)
    with pytest.raises(ValueError, match="asked for 9 devices but 8 are visible"):
        mesh_devices(available, 9, 1)


def test_quickstart_names_pool_sizes_that_split_over_the_devices(tmp_path):
    flags = ["--devices", "4", "--set", "tasks_per_env=402", "--run-dir", str(tmp_path / "q")]
    out = subprocess.run(
        [sys.executable, "-m", "experiments.quickstart", "--no-progress", *flags],
        cwd=ROOT,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 1, out.stderr
    first = out.stderr.splitlines()[0]
    assert re.match(r"^error: tasks_per_env=402: with --devices 4 .*\(shard_tasks\)", first), first
    assert first.endswith("use e.g. --set tasks_per_env=400 or 404"), first
    assert "Traceback" not in out.stderr
