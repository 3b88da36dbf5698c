"""A run directory written before 64-bit task keys (``fixtures/keys32_run``: the small engine,
4 updates, checkpoint 4, written by commit 379f1e5) resumes with today's keys: the checkpoint's
32-bit keys are the low words of today's, so the per-task state lands on the same tasks and
the resumed run logs what an uninterrupted run of today logs."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import reliability_helpers as helpers

from curriculax.engine import CheckpointMismatch, Engine, Env, run

FIXTURE = Path(__file__).with_name("fixtures") / "keys32_run"


@pytest.fixture
def old_run(tmp_path):
    run_dir = tmp_path / "old"
    shutil.copytree(FIXTURE, run_dir)
    return run_dir


def test_a_checkpoint_with_32_bit_keys_resumes_as_an_uninterrupted_run(engine, old_run, tmp_path):
    meta = json.loads((old_run / "checkpoints/4/meta/metadata").read_text())
    assert "key_bits" not in meta  # written before 64-bit keys
    run(engine, steps=8, run_dir=str(old_run), resume=True, progress=False)
    run(engine, steps=8, run_dir=str(tmp_path / "whole"), progress=False)
    got = helpers.without_time(helpers.read_jsonl(old_run / "metrics.jsonl"))
    whole = helpers.without_time(helpers.read_jsonl(tmp_path / "whole/metrics.jsonl"))
    assert [r["step"] for r in got] == [r["step"] for r in whole] == list(range(1, 9))
    # Steps 5-8 are computed today from the restored checkpoint: bit for bit the whole run's.
    assert got[4:] == whole[4:]
    # Steps 1-4 are the fixture's own lines, written by the JAX of its day: the same run, but
    # float32 arithmetic may differ in the last place between JAX releases (jax 0.12.1 moved
    # step 2's solver/skill_mean by 3e-8), so they agree to float32 precision.
    for old_line, new_line in zip(got[:4], whole[:4]):
        assert old_line == pytest.approx(new_line, rel=1e-6, abs=0)
    new_meta = json.loads((old_run / "checkpoints/8/meta/metadata").read_text())
    assert new_meta["key_bits"] == 64
    # Traces written after the resume carry the 64-bit keys; their low words are the old ones.
    traces = helpers.read_jsonl(old_run / "traces.jsonl")
    old, new = [t for t in traces if t["step"] < 4], [t for t in traces if t["step"] >= 4]
    assert old and new and all(t["key"] < 2**32 for t in old)
    keys = {e.name: e.keys for e in engine.envs}
    assert all(t["key"] == int(keys[t["env"]][t["task"]]) for t in new)
    assert any(t["key"] >= 2**32 for t in new)


def test_a_32_bit_checkpoint_follows_its_keys_onto_a_reordered_pool(engine, old_run):
    perm = np.random.default_rng(0).permutation(engine.envs[1].num_tasks)
    pools = engine.envs[1]
    reordered = Engine(
        engine.solver,
        [
            engine.envs[0],
            Env(
                "pools",
                {k: np.asarray(v)[perm] for k, v in pools.tasks.items()},
                pools.curriculum,
                group_size=4,
                weight=2.0,
            ),
        ],
        engine.config,
    )
    result = run(reordered, steps=4, run_dir=str(old_run), resume=True, progress=False)
    plain = run(engine, steps=4, run_dir=str(old_run) + "-plain", progress=False)
    got = np.asarray(result.state.curricula["pools"].sampler.scores)
    np.testing.assert_array_equal(
        got, np.asarray(plain.state.curricula["pools"].sampler.scores)[perm]
    )


def test_a_32_bit_checkpoint_of_another_pool_is_refused_naming_the_keys(engine, old_run):
    pools = engine.envs[1]
    changed = {k: np.asarray(v) + np.float32(1e-3) for k, v in pools.tasks.items()}
    other = Engine(
        engine.solver,
        [engine.envs[0], Env("pools", changed, pools.curriculum, group_size=4, weight=2.0)],
        engine.config,
    )
    with pytest.raises(CheckpointMismatch, match=r"env 'pools': 64 of 64 task keys are not in"):
        run(other, steps=8, run_dir=str(old_run), resume=True, progress=False)
