"""The same seed gives the same run on 1 device, on 8 fake CPU devices, and on 2 processes of
4 devices each; a checkpoint saved by the 2-process run restores in 1 process on another
device count. Every run is a subprocess (the device count is fixed when JAX starts)."""

import json
import os
import subprocess
import sys

import pytest

from tests.scale._processes import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL = ["--set", "tasks_per_env=256", "--set", "checkpoint_every=6", "--no-progress"]
TIMEOUT = 600


def quickstart(run_dir, steps, *extra, env=None):
    cmd = [sys.executable, "-m", "experiments.quickstart", "--run-dir", str(run_dir)]
    cmd += ["--steps", str(steps), *SMALL, *extra]
    return subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def finish(proc):
    out, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, out[-3000:]
    return out


def lines(path):
    return [json.loads(x) for x in open(path).read().splitlines()]


def assert_same_metrics(a, b, rel=1e-5):
    assert [x["step"] for x in a] == [x["step"] for x in b]
    for x, y in zip(a, b):
        assert set(x) == set(y)
        for k in x:
            if k == "time":
                continue
            if float(x[k]).is_integer() and float(y[k]).is_integer():
                assert x[k] == y[k], (x["step"], k, x[k], y[k])
            else:
                assert y[k] == pytest.approx(x[k], rel=rel, abs=1e-6), (x["step"], k)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("devices")
    one = quickstart(base / "one", 12)
    eight = quickstart(base / "eight", 12, "--devices", "8")
    port = free_port()
    multi = [
        quickstart(
            base / "multi",
            12,
            "--devices",
            "8",
            "--num-processes",
            "2",
            "--process-id",
            str(i),
            "--coordinator",
            f"127.0.0.1:{port}",
        )
        for i in (0, 1)
    ]
    longer = quickstart(base / "longer", 18)
    for p in [one, eight, *multi, longer]:
        finish(p)
    return base


def test_one_and_eight_devices_give_the_same_run(runs):
    # Integer metrics and every task choice, reward and admission are identical; floats agree
    # to rounding (sums over a sharded batch may add in another order).
    assert_same_metrics(lines(runs / "one/metrics.jsonl"), lines(runs / "eight/metrics.jsonl"))
    assert lines(runs / "one/traces.jsonl") == lines(runs / "eight/traces.jsonl")


def test_two_processes_match_the_single_process_eight_device_run(runs):
    assert_same_metrics(lines(runs / "eight/metrics.jsonl"), lines(runs / "multi/metrics.jsonl"))
    assert lines(runs / "eight/traces.jsonl") == lines(runs / "multi/traces.jsonl")
    assert sorted(os.listdir(runs / "multi/checkpoints")) == ["12", "6"]


@pytest.mark.parametrize("devices", ["1", "2"])
def test_a_two_process_checkpoint_restores_on_another_device_count(runs, tmp_path, devices):
    import shutil

    target = tmp_path / "resumed"
    shutil.copytree(runs / "multi", target)
    finish(quickstart(target, 18, "--resume", "--devices", devices))
    assert_same_metrics(lines(runs / "longer/metrics.jsonl"), lines(target / "metrics.jsonl"))
    assert lines(runs / "longer/traces.jsonl") == lines(target / "traces.jsonl")
