"""The quick start runs end to end and logs both envs' curriculum metrics."""

import dataclasses
import json

import pytest

from experiments import quickstart


def test_quickstart_writes_the_run_directory(tmp_path):
    run_dir = tmp_path / "q"
    quickstart.main(["--run-dir", str(run_dir), "--steps", "12", "--no-progress"])
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == list(range(1, 13))
    last = lines[-1]
    assert "curriculum/steady/sampler/epoch" in last
    assert "curriculum/pools/sampler/pool/medium" in last
    assert "curriculum/pools/gate/zero_advantage/rejected" in last
    assert (run_dir / "summary.json").exists()
    assert (run_dir / "traces.jsonl").read_text().count("\n") >= 12 * 16
    assert (run_dir / "checkpoints").is_dir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == 12 and summary["stopped"] == "completed"


def test_a_sampler_that_is_no_table_is_named_with_a_mesh_too():
    """With --devices it was "AttributeError: 'int' object has no attribute 'get'"."""
    config = dataclasses.replace(quickstart.QuickstartConfig(), curriculum={"sampler": 3})
    with pytest.raises(TypeError, match="sampler must be a table/mapping with a 'type' key, got 3"):
        quickstart.build(config, mesh=object())  # refused before the mesh is used
