"""Warm-started bases: cached by config hash, never used half-written, spread at step 0."""

import dataclasses
import os

import jax
import numpy as np
import pytest

from curriculax import rl
from experiments import _base, _cli, pretrain
from experiments._builders import (
    HARD_SKEW,
    GRPOExperimentConfig,
    TaskConfig,
    build,
    experiment_model,
    make_study_pool,
)

TINY = GRPOExperimentConfig(
    task=TaskConfig(num_levels=3, num_symbols=4, level_mass=(1, 1, 1), pool_size=24),
    model=experiment_model(width=16, depth=1, heads=2),
    init={"base": {"level_mass": [1, 1], "examples": 16, "steps": 3, "batch_size": 8}},
)


@pytest.fixture
def builds(tmp_path, monkeypatch):
    """A fresh cache in tmp_path; counts the bases actually built."""
    monkeypatch.setenv(_base.CACHE_ENV, str(tmp_path))
    calls = []
    real = _base.build_base

    def counting(config, **kw):
        calls.append(_base.spec_hash(_base.base_spec(config)))
        return real(config, **kw)

    monkeypatch.setattr(_base, "build_base", counting)
    return calls


def _checksum(params):
    return _base.params_checksum(params)


def test_a_base_is_built_once_and_found_by_its_config_hash(builds, tmp_path):
    params, path = _base.load_base(TINY, progress=False)
    assert builds == [os.path.basename(path)] and path.startswith(str(tmp_path))
    again, path2 = _base.load_base(TINY, progress=False)
    assert path2 == path and len(builds) == 1  # a hit: read back, not rebuilt
    assert _checksum(again) == _checksum(params)
    # Anything the base depends on is in the hash: its schedule, the model, the family.
    longer = dataclasses.replace(TINY, init={"base": {**TINY.init["base"], "steps": 4}})
    _, path3 = _base.load_base(longer, progress=False)
    assert path3 != path and len(builds) == 2
    wider = dataclasses.replace(TINY, model=experiment_model(width=32, depth=1, heads=2))
    assert _base.base_dir(wider) != path
    # ... but not what only the RL run uses (its pool's size, its curriculum, its seed).
    rl_only = dataclasses.replace(
        TINY, task=dataclasses.replace(TINY.task, pool_size=48), seed=3, curriculum={}
    )
    assert _base.base_dir(rl_only) == path
    assert not [n for n in os.listdir(os.path.join(str(tmp_path), "base")) if n.startswith(".")]


def test_one_base_for_experiments_that_differ_only_in_what_it_does_not_read():
    """The key holds the level shares as the pool builder reads them (normalised) and leaves
    out the experiment's fields base_task overrides; each such pair builds the same pool."""

    def with_base(config, **base):
        return dataclasses.replace(config, init={"base": {**config.init["base"], **base}})

    def pool_keys(config):
        task = _base.base_task(config, _base.base_config(config.init))
        pool = make_study_pool(dataclasses.replace(config, task=task, init="scratch"))
        return np.asarray(pool.train.key).tolist()

    scaled = with_base(TINY, level_mass=[2.0, 2])
    other_rl = dataclasses.replace(
        TINY,
        task=dataclasses.replace(
            TINY.task, train_per_level=7, distractors=0.25, distractor_p=0.9, eval_levels=(2,)
        ),
    )
    for same in (scaled, other_rl):
        assert _base.base_dir(same) == _base.base_dir(TINY)
        assert pool_keys(same) == pool_keys(TINY)
    skewed = with_base(TINY, level_mass=[2, 1])
    assert _base.base_dir(skewed) != _base.base_dir(TINY)
    assert pool_keys(skewed) != pool_keys(TINY)


@pytest.mark.parametrize("damage", ["no_meta", "checksum", "missing_array", "garbage"])
def test_a_partial_or_corrupt_entry_is_rebuilt_not_used(builds, damage, capsys):
    params, path = _base.load_base(TINY, progress=False)
    good = _checksum(params)
    meta = os.path.join(path, "meta.json")
    files = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(path, "params")) for f in fs]
    if damage == "no_meta":  # a copy that stopped before its last file
        os.remove(meta)
    elif damage == "checksum":  # the arrays are not the ones the entry was written with
        with open(meta) as f:
            text = f.read().replace(f'"checksum": "{good}"', '"checksum": "0"')
        with open(meta, "w") as f:
            f.write(text)
    elif damage == "missing_array":
        for f in files:
            if "d/" in f or f.endswith(".zarray") or "ocdbt" in f:
                os.remove(f)
    else:
        for f in files:
            with open(f, "r+b") as fh:
                size = os.path.getsize(f)
                fh.write(b"\x00garbage" * max(1, size // 8))
    rebuilt, path2 = _base.load_base(TINY, progress=False)
    assert path2 == path and len(builds) == 2
    assert _checksum(rebuilt) == good  # the same base, built again (pretraining is seeded)
    assert "rebuilding it" in capsys.readouterr().err
    _base.load_base(TINY, progress=False)
    assert len(builds) == 2  # the rebuilt entry is whole


def test_only_process_0_shows_the_build_progress(builds, monkeypatch, capsys):
    """On several processes each builds (or reads) the same base; one progress bar, not one
    per process."""
    monkeypatch.setattr(_base, "_first_process", lambda: False)
    _base.load_base(TINY, progress=True)
    assert len(builds) == 1 and capsys.readouterr().err == ""
    monkeypatch.setattr(_base, "_first_process", lambda: True)
    _base.load_base(dataclasses.replace(TINY, init={"base": {**TINY.init["base"], "steps": 2}}))
    err = capsys.readouterr().err
    assert len(builds) == 2 and "building the base policy" in err and "step 2/2" in err


def test_a_killed_build_leaves_nothing_under_the_hash(builds, monkeypatch, tmp_path):
    def killed(path, params, meta):
        os.makedirs(path)
        open(os.path.join(path, "half"), "w").close()
        raise KeyboardInterrupt

    monkeypatch.setattr(_base, "_write_entry", killed)
    with pytest.raises(KeyboardInterrupt):
        _base.load_base(TINY, progress=False)
    root = os.path.join(str(tmp_path), "base")
    assert os.listdir(root) == []  # neither the entry nor the temporary folder
    monkeypatch.undo()
    monkeypatch.setenv(_base.CACHE_ENV, str(tmp_path))


def test_bad_init_values_are_named():
    with pytest.raises(ValueError, match='must be "scratch"'):
        dataclasses.replace(TINY, init="pretrained")
    with pytest.raises(ValueError, match="no base named 'nope'"):
        _base.base_spec(dataclasses.replace(TINY, init={"base": "nope"}))
    with pytest.raises(ValueError, match="unknown key"):
        _base.base_spec(dataclasses.replace(TINY, init={"base": {"stepz": 3}}))
    with pytest.raises(ValueError, match="4 shares but the experiment's family has 3 levels"):
        _base.base_spec(dataclasses.replace(TINY, init={"base": {"level_mass": [1, 1, 1, 1]}}))
    assert _base.base_spec(GRPOExperimentConfig()) is None  # scratch: no base


@pytest.mark.parametrize("mass", [[float("inf"), 1.0], [float("nan"), 1.0], [1e308, 1e308]])
def test_a_base_level_mass_that_is_not_finite_is_named(mass):
    """``init.base.level_mass = [inf, 1]`` was once accepted at load and failed at the build
    with "train_per_level ... must be >= 1, got -9223372036854775807"."""
    with pytest.raises(ValueError, match=r"base.level_mass .*finite"):
        _cli.check_values(dataclasses.replace(TINY, init={"base": {"level_mass": mass}}))


def test_the_shipped_base_spreads_step0_pass_rates_on_the_hard_skew_family(
    tmp_path, monkeypatch, capsys
):
    """The named base on the hard-skew family: at RL step 0 some tasks are never solved, a
    real share sometimes, some always (32 rollouts per task, 8 tasks per level)."""
    monkeypatch.setenv(_base.CACHE_ENV, str(tmp_path))
    config = GRPOExperimentConfig(
        task=dataclasses.replace(HARD_SKEW, pool_size=60), init={"base": "short-lengths"}
    )
    p, category, names = pretrain.step0_pass_rates(config, samples=32, per_category=8)
    hist = pretrain.pass_rate_histogram(p, category, names)["pool"]
    assert hist["never"] >= 8 and hist["always"] >= 1
    assert hist["sometimes"] >= 0.1 * hist["tasks"]
    assert np.all(p[np.isin(category, [6, 7])] == 0)  # lengths 7-8: never seen, never solved
    # The command builds nothing more (the base is cached) and prints the same table.
    pretrain.main(["--set", "task.pool_size=60", "--set", 'init={base="short-lengths"}'])
    out = capsys.readouterr().out
    assert "| level 6 | 24 | 1.00 | 0.00 | 0.00 |" in out and "| pool |" in out


def test_the_rl_run_starts_from_the_base_and_scratch_is_unchanged(builds):
    params, _ = _base.load_base(TINY, progress=False)
    state = build(TINY).engine.init()
    assert _checksum(state.solver.params) == _checksum(params) and len(builds) == 1
    # From scratch: the random weights of the engine's solver key, as before bases existed.
    scratch = dataclasses.replace(TINY, init="scratch")
    fresh = build(scratch).engine.init()
    k_solver = jax.random.split(jax.random.key(scratch.seed), 3)[0]
    assert _checksum(fresh.solver.params) == _checksum(rl.init_policy(scratch.model, k_solver)[1])
    assert len(builds) == 1


def test_every_named_base_parses_for_the_shipped_pools():
    names = [f[:-5] for f in os.listdir(_base.BASE_CONFIG_DIR) if f.endswith(".toml")]
    assert "short-lengths" in names
    for name in names:
        spec = _base.base_spec(GRPOExperimentConfig(init={"base": name}))
        assert spec["base"]["steps"] >= 1 and len(spec["task"]["level_mass"]) == 8


def test_pretrain_refuses_a_misspelled_key_in_its_config(tmp_path):
    """Keys it did not know were once dropped: a typo built another base without a word."""
    config = tmp_path / "typo.toml"
    config.write_text('steps = 7\ninitt = "scratch"\n')
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['initt'\]"):
        pretrain.load_experiment(str(config), [])
    # A file that is not TOML is named (it was "Invalid value (at line 1, column 5)" alone).
    config.write_text("x = = 1\n")
    with pytest.raises(ValueError, match=rf"--config {config}: not valid TOML"):
        pretrain.load_experiment(str(config), [])
