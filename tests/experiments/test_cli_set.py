"""``--set``: the assignments are applied together, as the same values in a TOML file are."""

import pytest

from experiments import _cli
from experiments._builders import MAIN_JOB, GRPOExperimentConfig

PARSER = _cli.base_parser("test", steps=1, run_dir="unused")


def _load(*sets, config=None):
    argv = [a for s in sets for a in ("--set", s)] + (["--config", str(config)] if config else [])
    return _cli.load_config(GRPOExperimentConfig, PARSER.parse_args(argv), defaults=MAIN_JOB)


def _toml(tmp_path, text):
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_a_table_set_whole_keeps_the_keys_it_does_not_name_as_toml_does(tmp_path):
    """``--set grpo={learning_rate=0.01}`` once rebuilt grpo from GRPOConfig's defaults (the
    experiments' entropy_coef 0.01 dropped to 0), and ``--set model={width=128}`` raised a
    TypeError (TransformerConfig's vocab_size has no default)."""
    whole = _load("grpo={learning_rate=0.01}")
    assert (whole.grpo.learning_rate, whole.grpo.entropy_coef) == (0.01, 0.01)
    assert whole == _load("grpo.learning_rate=0.01")
    assert whole == _load(config=_toml(tmp_path, "grpo = {learning_rate = 0.01}\n"))
    model = _load("model={width=128}")
    assert model.model.width == 128 and model.model == _load("model.width=128").model


@pytest.mark.parametrize(
    "sets",
    [
        ("task.num_levels=4", "task.level_mass=[1,1,1,1]"),
        ("task.level_mass=[1,1,1,1]", "task.num_levels=4"),
        ("task={num_levels=4, level_mass=[1,1,1,1]}",),
    ],
)
def test_keys_checked_together_are_set_together_in_any_order(tmp_path, sets):
    """Each --set once made its own config, checked on its own: num_levels and level_mass
    could not be changed together (either one alone is refused), and the whole table reset
    the task's other keys."""
    toml = _toml(tmp_path, "[task]\nnum_levels = 4\nlevel_mass = [1, 1, 1, 1]\n")
    assert _load(*sets) == _load(config=toml)
    assert _load(*sets).task.num_symbols == MAIN_JOB.task.num_symbols


def test_the_outcome_does_not_depend_on_the_order_of_the_assignments():
    """``level_mass`` then ``eval_levels`` was once refused (the eval levels of the old mass
    are not levels of the new pool), the other order accepted."""
    sets = ("task.level_mass=[1,0,0,0,0,0,0,0]", "task.eval_levels=[0]")
    assert _load(*sets) == _load(*reversed(sets))
    assert _load(*sets).task.eval_levels == (0,)


def test_a_later_type_inside_a_table_set_whole_wins():
    """Every ``type`` was once applied before a table set whole, which then overwrote it. A
    table starts afresh before the assignments inside it, wherever they stand."""
    table = 'curriculum.sampler={type="floor", inner={type="uniform"}}'
    sets = (table, "curriculum.sampler.inner.type=sequential")
    expect = {"sampler": {"type": "floor", "inner": {"type": "sequential"}}}
    assert _load(*sets).curriculum == _load(*reversed(sets)).curriculum == expect
    sets = (table, "curriculum.sampler.inner.distinct=true")
    assert _load(*sets).curriculum == _load(*reversed(sets)).curriculum


def test_an_inner_table_set_whole_outlives_its_outer_tables_new_type():
    sets = ("curriculum.sampler.inner={type='uniform'}", "curriculum.sampler.type=floor")
    expect = {"sampler": {"type": "floor", "inner": {"type": "uniform"}}}
    assert _load(*sets).curriculum == _load(*reversed(sets)).curriculum == expect


def test_later_assignments_of_one_key_win():
    assert _load("batch_groups=8", "batch_groups=4").batch_groups == 4
    sets = ("curriculum.sampler.type=uniform", "curriculum.sampler.type=sequential")
    assert _load(*sets).curriculum["sampler"] == {"type": "sequential"}
    assert _load("grpo={learning_rate=0.5}", "grpo={learning_rate=0.2}").grpo.learning_rate == 0.2


def test_a_bad_value_is_named_by_its_key_as_given():
    with pytest.raises(ValueError, match=r"grpo.learning_rate must be > 0.0, got -1.0"):
        _load("grpo={learning_rate=-1.0}")
    with pytest.raises(ValueError, match=r"--set model.widht: unknown key 'widht'"):
        _load("model={widht=128}")
    with pytest.raises(ValueError, match=r"grpo: expected a table, got 3"):
        _load("grpo=3")
    with pytest.raises(ValueError, match=r"'x' is set inside 16, which has no keys"):
        _load("batch_groups.x=1")


@pytest.mark.parametrize(
    "sets",
    [
        ("task={labels={noise=0.5}}", "task.labels.seed=3"),
        ("task.labels.seed=3", "task={labels={noise=0.5}}"),
        ("task.labels={noise=0.5}", "task.labels.seed=3"),
    ],
)
def test_a_free_form_table_inside_a_config_given_whole_is_reset_before_its_keys(sets):
    # task={labels={...}} replaced task.labels whole after task.labels.seed=3 was set inside
    # it (the seed lost, or refused, depending on the order given).
    assert _load(*sets).task.labels == {"noise": 0.5, "seed": 3}


def test_a_curriculum_inside_a_config_given_whole_keeps_a_gate_set_inside_it():
    from experiments.selfplay.study import StudyConfig

    parser = _cli.base_parser("test", steps=1, run_dir="unused")
    sets = (
        'experiment={curriculum={sampler={type="uniform"}}}',
        'experiment.curriculum.gates.z={type="zero_advantage"}',
    )
    for order in (sets, sets[::-1]):
        argv = [a for s in order for a in ("--set", s)]
        config = _cli.load_config(StudyConfig, parser.parse_args(argv))
        assert config.experiment.curriculum == {
            "sampler": {"type": "uniform"},
            "gates": {"z": {"type": "zero_advantage"}},
        }


def test_a_table_given_after_a_value_of_the_same_key_wins():
    # init=scratch then init={base=...}: the table was applied first (as a reset) and the
    # earlier string then replaced it.
    base = {"level_mass": [1, 1], "examples": 16, "steps": 3, "batch_size": 8}
    table = "{base = {level_mass = [1, 1], examples = 16, steps = 3, batch_size = 8}}"
    assert _load("init=scratch", f"init={table}").init == {"base": base}
    assert _load(f"init={table}", "init=scratch").init == "scratch"
