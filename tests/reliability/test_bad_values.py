"""Values that cannot make a run are refused before anything runs, each with a message that
names the key: a pool too large for memory (with the estimate), periods of 0 or below, an
unknown or non-factory curriculum type, a seed JAX cannot hold."""

import re

import pytest

import curriculax as cx
from curriculax.engine import run
from experiments import _cli, quickstart

GIB = 2**30

BAD = [
    (
        ["--set", "tasks_per_env=1000000000"],
        r"^tasks_per_env=1,000,000,000 needs about \d+\.\d GiB of memory \(the task pools and "
        r"the engine state keep \d+\.\d GiB, \d+ bytes per task measured on pools of 256 and "
        r"512; building them takes about 5x that\), more than the 16\.0 GiB available; use a "
        r"smaller tasks_per_env$",
    ),
    (["--set", "eval_every=0"], r"^eval_every must be >= 1, got 0 \(updates between two"),
    (["--set", "checkpoint_every=-1"], r"^checkpoint_every must be >= 0, got -1 \(updates between"),
    (["--checkpoint-every", "-1"], r"^--checkpoint-every must be >= 0, got -1"),
    (["--steps", "-3"], r"^--steps must be >= 0, got -3 \(updates to train\)"),
    (
        ["--set", "curriculum.sampler.type=foo"],
        r"^sampler \(type 'foo'\): unknown sampler type 'foo'; registered types are \[",
    ),
    (
        ["--set", "curriculum.sampler.type=os:getcwd"],
        r"^sampler \(type 'os:getcwd'\): getcwd is not a factory: it cannot be called as "
        r"factory\(num_tasks, \*\*options\)",
    ),
    (["--set", "curriculum.gates.zero_advantage.low=2.0"], r"low=2\.0 > high=0\.0"),
    (["--set", "curriculum.sampler=3"], r"^sampler must be a table/mapping with a 'type' key"),
    (["--seed", "99999999999999999999"], r"^--seed must be an int in \[0, 2\*\*32\)"),
    (["--seed", "-1"], r"^--seed must be an int in \[0, 2\*\*32\)"),
    (["--set", "seed=4294967296"], r"^seed must be an int in \[0, 2\*\*32\)"),
]


@pytest.mark.parametrize(("args", "message"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_bad_value_is_refused_naming_the_key(tmp_path, monkeypatch, args, message):
    # The machine's memory is fixed at 16 GiB, so the pool estimate is checked the same way
    # everywhere (and nothing near 10**9 tasks is ever built).
    monkeypatch.setattr(_cli, "available_memory", lambda: 16 * GIB, raising=False)
    with pytest.raises((ValueError, TypeError)) as e:
        quickstart.main(["--run-dir", str(tmp_path), "--steps", "1", "--no-progress", *args])
    assert re.search(message, str(e.value)), str(e.value)
    assert not (tmp_path / "metrics.jsonl").exists()


def test_the_pool_estimate_scales_with_the_pool(monkeypatch):
    """The estimate is what the engine holds: twice the tasks, about twice the bytes."""
    config = quickstart.QuickstartConfig()

    def build(n):
        return quickstart.build(quickstart.QuickstartConfig(tasks_per_env=n))[0]

    small, large = _cli.engine_bytes(build(1000)), _cli.engine_bytes(build(2000))
    assert 1.8 < large / small < 2.0
    monkeypatch.setattr(_cli, "available_memory", lambda: small * 100)
    _cli.check_memory("tasks_per_env", 50_000, build, above=0)  # fits: no error
    with pytest.raises(ValueError, match="tasks_per_env=500,000 needs about"):
        _cli.check_memory("tasks_per_env", 500_000, build, above=0)
    assert config.tasks_per_env < 1 << 20  # the default is never probed


def test_an_import_path_that_is_not_a_factory_is_named():
    with pytest.raises(ValueError, match=r"gates\.g \(type 'os:getcwd'\): unknown key"):
        cx.curriculum_from_config({"gates": {"g": {"type": "os:getcwd", "x": 1}}}, 10)
    with pytest.raises(TypeError, match=r"the factory returned str, not a cx\.AdmissionGate"):
        cx.curriculum_from_config({"gates": {"g": {"type": "os:getcwd"}}}, 10)


def test_the_library_refuses_bad_checkpoint_settings(engine):
    with pytest.raises(ValueError, match=r"checkpoint_every must be >= 0, got -1"):
        run(engine, steps=1, checkpoint_every=-1, progress=False)
    with pytest.raises(ValueError, match=r"keep_checkpoints must be >= 1, got 0"):
        run(engine, steps=1, keep_checkpoints=0, progress=False)


def test_a_set_type_starts_its_table_afresh_and_a_set_preset_its_curriculum():
    """The main job's sampler (a category bandit with ``reward = "advantage"``) once kept its
    arguments under a new type, which the build then refused naming a key never written."""
    from experiments import grpo

    config = _cli.override(grpo.MAIN_JOB, ["curriculum.sampler.type=learnability"])
    assert config.curriculum["sampler"] == {"type": "learnability"}
    cx.curriculum_from_config(config.curriculum, 8, categories=[0] * 8)
    config = _cli.override(
        grpo.MAIN_JOB,
        ["curriculum.sampler.type=learnability", "curriculum.sampler.half_life=2.0"],
    )
    assert config.curriculum["sampler"] == {"type": "learnability", "half_life": 2.0}
    config = _cli.override(grpo.MAIN_JOB, ["curriculum.preset=robust"])
    assert config.curriculum == {"preset": "robust"}


def test_a_set_argument_before_its_new_type_is_kept():
    """``--set sampler.half_life=2 --set sampler.type=learnability`` once dropped the half-life
    (the type, applied second, started the table afresh); resets now apply first."""
    from experiments import grpo

    config = _cli.override(
        grpo.MAIN_JOB,
        ["curriculum.sampler.half_life=2.0", "curriculum.sampler.type=learnability"],
    )
    assert config.curriculum["sampler"] == {"type": "learnability", "half_life": 2.0}
    config = _cli.override(
        grpo.MAIN_JOB, ["curriculum.gates.x.type=reward_consistency", "curriculum.preset=robust"]
    )
    assert config.curriculum == {"preset": "robust", "gates": {"x": {"type": "reward_consistency"}}}
    config = _cli.override(
        grpo.MAIN_JOB, ["curriculum.sampler.type=uniform", "curriculum.sampler.type=learnability"]
    )
    assert config.curriculum["sampler"] == {"type": "learnability"}


def test_sequential_refuses_a_shuffle_that_is_not_a_bool():
    """``--set curriculum.sampler.shuffle=False`` reads the string "False" (TOML spells it
    false), which once shuffled."""
    with pytest.raises(TypeError, match=r"shuffle must be a bool .* got 'False'"):
        cx.samplers.sequential(8, shuffle="False")
