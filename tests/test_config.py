"""cx.curriculum_from_config: plain data and TOML build the same objects; errors list options."""

import inspect
import pathlib
import re
import textwrap
import tomllib

import jax
import jax.numpy as jnp
import pytest

import curriculax as cx
from curriculax import _config
from curriculax.samplers import Band
from curriculax.testing import synthetic_results

REPO = pathlib.Path(__file__).resolve().parents[1]
SHIPPED_TOML = REPO / "experiments" / "configs" / "curriculum.toml"


def _run(cur, num_tasks, steps=3, num=8):
    """Drives ``cur`` for a few steps (one jitted step); returns ids, votes and metrics."""

    @jax.jit
    def step(state, key):
        k_sample, k_results = jax.random.split(key)
        ids, state = cur.sample(state, k_sample, num)
        admission, state = cur.observe(state, synthetic_results(k_results, ids % num_tasks))
        return ids, admission, state

    state = cur.init(jax.random.key(0))
    trace = []
    for i in range(steps):
        ids, admission, state = step(state, jax.random.key(i + 1))
        trace.append((ids.tolist(), {k: v.tolist() for k, v in admission.by_gate.items()}))
        trace.append(admission.admitted.tolist())
    metrics = {k: float(v) for k, v in cur.metrics(state).items()}
    return trace, metrics


def test_dict_config_equals_the_directly_built_curriculum():
    n = 32
    config = {
        "sampler": {
            "type": "difficulty_pools",
            "bands": {
                "hard": {"max_reward": 0.3, "weight": 0.5},
                "mid": {"max_reward": 0.6, "weight": 2.0},
                "easy": {"max_reward": 1.0, "weight": 0.0},
            },
            "unscored_weight": 0.7,
            "seed": 3,
        },
        "gates": {
            "zero_advantage": {"type": "advantage_range", "low": 0.0, "high": 0.0},
            "small": {"type": "advantage_range", "low": -0.1, "high": 0.1},
        },
    }
    direct = cx.curriculum(
        cx.samplers.difficulty_pools(
            n,
            [Band("hard", 0.3, 0.5), Band("mid", 0.6, 2.0), Band("easy", 1.0, 0.0)],
            unscored_weight=0.7,
            seed=3,
        ),
        {
            "zero_advantage": cx.gates.advantage_range(0.0, 0.0),
            "small": cx.gates.advantage_range(-0.1, 0.1),
        },
    )
    built = cx.curriculum_from_config(config, n)
    assert isinstance(built, cx.Curriculum)
    assert list(built.gates) == ["zero_advantage", "small"]
    # Warm-up (4 x 8 = 32 tasks) then banded draws: everything must match, metrics included.
    got, want = _run(built, n, steps=6), _run(direct, n, steps=6)
    assert got == want
    assert {"sampler/pool/hard", "sampler/pool/mid", "sampler/pool/easy"} <= set(got[1])


def test_sequential_config_and_the_default_config():
    built = cx.curriculum_from_config({"sampler": {"type": "sequential", "shuffle": False}}, 5)
    ids, _ = built.sample(built.init(jax.random.key(0)), jax.random.key(1), 6)
    assert ids.tolist() == [0, 1, 2, 3, 4, 0]
    # None / {}: the default sampler (shuffled sequential, seed 0) and no gates.
    for config in (None, {}):
        default = cx.curriculum_from_config(config, 5)
        assert default.gates == {}
        ids, _ = default.sample(default.init(jax.random.key(0)), jax.random.key(1), 5)
        direct = cx.samplers.sequential(5)
        assert ids.tolist() == direct.sample(direct.init(None), None, 5)[0].tolist()
        assert set(default.metrics(default.init(jax.random.key(0)))) == {
            "sampler/epoch",
            "sampler/cursor",
            "admission_rate",
            "failed_groups",
            "nonfinite",
            "out_of_range",
            "groups",
            "admitted",
        }


def test_sampler_and_gate_from_config():
    s = cx.sampler_from_config({"type": "sequential", "shuffle": False, "seed": 1}, None)
    assert s.sample(s.init(None), None, 3)[0].tolist() == [0, 1, 2]
    gate = cx.gate_from_config({"type": "advantage_range", "low": -1.0, "high": 1.0}, "g")
    assert isinstance(gate, cx.AdmissionGate)
    with pytest.raises(ValueError, match=r"low=1\.0 > high=-1\.0"):
        cx.gate_from_config({"type": "advantage_range", "low": 1.0, "high": -1.0})


def test_the_shipped_toml_builds_the_default_difficulty_pools_with_zero_advantage_gate():
    with open(SHIPPED_TOML, "rb") as f:
        config = tomllib.load(f)
    assert config["sampler"]["type"] == "difficulty_pools"
    assert config["sampler"]["bands"] == {
        "hard": {"max_reward": 0.25, "weight": 0.2},
        "medium": {"max_reward": 0.75, "weight": 1.0},
        "easy": {"max_reward": 1.0, "weight": 0.2},
    }
    assert config["gates"] == {
        "zero_advantage": {"type": "advantage_range", "low": 0.0, "high": 0.0}
    }
    n = 32
    built = cx.curriculum_from_config(config, n)
    direct = cx.curriculum(
        cx.samplers.difficulty_pools(n),
        {"zero_advantage": cx.gates.advantage_range(0.0, 0.0)},
    )
    got = _run(built, n, steps=5)
    assert got == _run(direct, n, steps=5)
    _, metrics = got
    assert {
        "sampler/pool/hard",
        "sampler/pool/medium",
        "sampler/pool/easy",
        "gate/zero_advantage/rejected",
        "admission_rate",
    } <= set(metrics)
    assert metrics["groups"] == 40.0
    assert metrics["sampler/warmup_remaining"] == 0.0


# ----------------------------------------------------------------------- errors


def test_unknown_types_list_the_registered_ones():
    with pytest.raises(
        ValueError,
        match=r"unknown sampler type 'pools'; registered types are \[.*'difficulty_pools'"
        r".*'sequential'.*\].*package\.module:factory",
    ):
        cx.curriculum_from_config({"sampler": {"type": "pools"}}, 10)
    with pytest.raises(
        ValueError,
        match=r"gates\.z \(type 'advantage'\): unknown gate type 'advantage'; "
        r"registered types are \[.*'advantage_range'.*\]",
    ):
        cx.curriculum_from_config({"gates": {"z": {"type": "advantage"}}}, 10)


@pytest.mark.parametrize(
    ("config", "error", "match"),
    [
        (
            {"sampeler": {"type": "sequential"}},
            ValueError,
            r"unknown key\(s\) \['sampeler'\]; accepted keys are \['gates', 'preset', 'sampler'\]",
        ),
        (
            {"sampler": {"type": "sequential", "shufle": True}},
            ValueError,
            re.escape(
                "sampler (type 'sequential'): unknown key(s) ['shufle']; "
                "accepted keys are ['type', 'shuffle', 'seed']"
            ),
        ),
        (
            {"sampler": {"type": "sequential", "num_tasks": 3}},
            ValueError,
            r"unknown key\(s\) \['num_tasks'\]",
        ),
        (
            {"sampler": {"type": "difficulty_pools", "unscored": 0.1}},
            ValueError,
            re.escape(
                "unknown key(s) ['unscored']; "
                "accepted keys are ['type', 'bands', 'unscored_weight', 'seed', 'score_half_life', "
                "'axis_name']"
            ),
        ),
        (
            {
                "sampler": {
                    "type": "difficulty_pools",
                    "bands": {"hard": {"max_reward": 0.5, "weigth": 1.0}},
                }
            },
            ValueError,
            re.escape(
                "band 'hard': unknown key(s) ['weigth']; accepted keys are ['max_reward', 'weight']"
            ),
        ),
        (
            {"sampler": {"type": "difficulty_pools", "bands": {"hard": {"weight": 1.0}}}},
            ValueError,
            r"band 'hard': missing key\(s\) \['max_reward'\]",
        ),
        (
            {"gates": {"z": {"type": "advantage_range", "hihg": 1.0}}},
            ValueError,
            re.escape(
                "gates.z (type 'advantage_range'): unknown key(s) ['hihg']; "
                "accepted keys are ['type', 'low', 'high']"
            ),
        ),
        ({"sampler": {"shuffle": False}}, ValueError, r"sampler: missing 'type'"),
        ({"gates": {"z": {"low": 0.0}}}, ValueError, r"gates\.z: missing 'type'"),
        ({"sampler": {"type": 3}}, ValueError, r"'type' must be a non-empty string, got 3"),
        (
            {"sampler": "sequential"},
            TypeError,
            r"sampler must be a table/mapping with a 'type' key",
        ),
        (
            {"gates": ["advantage_range"]},
            TypeError,
            r"'gates' must be a table of name -> gate spec",
        ),
        ({"gates": {"a/b": {"type": "advantage_range"}}}, ValueError, r"without '/', got 'a/b'"),
        (
            {
                "sampler": {
                    "type": "difficulty_pools",
                    "bands": {"hard": {"max_reward": 0.5, "weight": -1.0}},
                }
            },
            ValueError,
            r"negative weight",
        ),
        ([("sampler", {})], TypeError, r"curriculum config must be a mapping, got list"),
    ],
)
def test_bad_configs_name_the_bad_key_and_list_the_accepted_ones(config, error, match):
    with pytest.raises(error, match=match):
        cx.curriculum_from_config(config, 10)


# ----------------------------------------------------------------------- plug-ins


PLUGIN = """
import jax.numpy as jnp
import curriculax as cx


def shifted(num_tasks, *, offset=0):
    base = cx.samplers.sequential(num_tasks, shuffle=False)

    def sample(state, key, num):
        ids, state = base.sample(state, key, num)
        return (ids + offset) % num_tasks, state

    return cx.TaskSampler(base.init, sample, base.observe, base.metrics)


def odd_only(parity=1):
    def admit(state, results):
        return (results.task_ids % 2) == parity, state

    return cx.AdmissionGate(lambda key: cx.EmptyState(), admit, lambda state: {})


NOT_CALLABLE = 3


def not_a_sampler(num_tasks):
    return "nope"
"""


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """An importable module of user components, unique to the test."""
    name = f"cx_user_plugin_{abs(hash(str(tmp_path)))}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def _votes(cur, ids):
    results = cx.GroupResults(
        jnp.asarray(ids, jnp.int32),
        jnp.ones((len(ids), 2)),
        jnp.ones((len(ids), 2), bool),
        jnp.ones((len(ids), 2, 1)),
        jnp.ones((len(ids), 2, 1), bool),
    )
    admission, _ = cur.observe(cur.init(jax.random.key(0)), results)
    return admission.admitted.tolist()


def test_import_path_plugins(plugin):
    cur = cx.curriculum_from_config(
        {
            "sampler": {"type": f"{plugin}:shifted", "offset": 2},
            "gates": {"odd": {"type": f"{plugin}:odd_only"}},
        },
        5,
    )
    ids, _ = cur.sample(cur.init(jax.random.key(0)), jax.random.key(1), 5)
    assert ids.tolist() == [2, 3, 4, 0, 1]
    assert _votes(cur, [0, 1, 2, 3]) == [False, True, False, True]
    even = cx.curriculum_from_config(
        {"gates": {"even": {"type": f"{plugin}:odd_only", "parity": 0}}}, 5
    )
    assert _votes(even, [0, 1, 2, 3]) == [True, False, True, False]
    # A dotted package path works the same way.
    s = cx.sampler_from_config(
        {"type": "curriculax.samplers.sequential:sequential", "shuffle": False}, 3
    )
    assert s.sample(s.init(None), None, 4)[0].tolist() == [0, 1, 2, 0]


def test_import_path_plugin_errors(plugin):
    with pytest.raises(
        ValueError, match=r"unknown key\(s\) \['ofset'\]; accepted keys are \['type', 'offset'\]"
    ):
        cx.curriculum_from_config({"sampler": {"type": f"{plugin}:shifted", "ofset": 1}}, 5)
    with pytest.raises(ValueError, match=r"cannot import module 'no_such_cx_module'"):
        cx.curriculum_from_config({"sampler": {"type": "no_such_cx_module:f"}}, 5)
    with pytest.raises(ValueError, match=rf"module '{plugin}' has no attribute 'missing'"):
        cx.curriculum_from_config({"sampler": {"type": f"{plugin}:missing"}}, 5)
    with pytest.raises(ValueError, match=rf"'{plugin}:NOT_CALLABLE' is not callable"):
        cx.curriculum_from_config({"gates": {"g": {"type": f"{plugin}:NOT_CALLABLE"}}}, 5)
    with pytest.raises(TypeError, match=r"returned str"):
        cx.curriculum_from_config({"sampler": {"type": f"{plugin}:not_a_sampler"}}, 5)


# ----------------------------------------------------------------------- registry


@pytest.fixture
def registry(monkeypatch):
    """A private copy of the registries, so registrations here do not leak into other tests."""
    monkeypatch.setattr(_config, "_SAMPLERS", dict(_config._SAMPLERS))
    monkeypatch.setattr(_config, "_GATES", dict(_config._GATES))


def _shifted(num_tasks, *, offset=0):
    base = cx.samplers.sequential(num_tasks, shuffle=False)

    def sample(state, key, num):
        ids, state = base.sample(state, key, num)
        return (ids + offset) % num_tasks, state

    return cx.TaskSampler(base.init, sample, base.observe, base.metrics)


def _reject_odd():
    def admit(state, results):
        return (results.task_ids % 2) == 0, state

    return cx.AdmissionGate(lambda key: cx.EmptyState(), admit, lambda state: {})


def test_register_round_trip(registry):
    cx.register_sampler("shifted", _shifted)
    cx.register_gate("reject_odd", _reject_odd)
    cur = cx.curriculum_from_config(
        {"sampler": {"type": "shifted", "offset": 1}, "gates": {"r": {"type": "reject_odd"}}}, 4
    )
    ids, _ = cur.sample(cur.init(jax.random.key(0)), jax.random.key(1), 4)
    assert ids.tolist() == [1, 2, 3, 0]
    assert _votes(cur, [0, 1, 2]) == [True, False, True]
    # Registered names join the list an unknown type error shows.
    with pytest.raises(ValueError, match=r"registered types are \[.*'shifted'.*\]"):
        cx.sampler_from_config({"type": "shifed"}, 4)
    with pytest.raises(ValueError, match=r"registered types are \[.*'reject_odd'.*\]"):
        cx.gate_from_config({"type": "reject_od"})
    # Keys of a registered factory are checked too.
    with pytest.raises(ValueError, match=r"accepted keys are \['type', 'offset'\]"):
        cx.sampler_from_config({"type": "shifted", "shift": 1}, 4)


def test_duplicate_registration_raises_unless_overwrite(registry):
    cx.register_sampler("shifted", _shifted)
    cx.register_sampler("shifted", _shifted)  # the same factory again is harmless
    with pytest.raises(
        ValueError, match=r"a sampler named 'shifted' is already registered.*overwrite=True"
    ):
        cx.register_sampler("shifted", cx.samplers.sequential)
    with pytest.raises(ValueError, match=r"a sampler named 'sequential' is already registered"):
        cx.register_sampler("sequential", _shifted)
    with pytest.raises(ValueError, match=r"a gate named 'advantage_range' is already registered"):
        cx.register_gate("advantage_range", _reject_odd)
    cx.register_sampler("shifted", cx.samplers.sequential, overwrite=True)
    s = cx.sampler_from_config({"type": "shifted", "shuffle": False}, 3)
    assert s.sample(s.init(None), None, 3)[0].tolist() == [0, 1, 2]


def test_bad_registrations_raise(registry):
    with pytest.raises(ValueError, match=r"without ':', got 'a:b'"):
        cx.register_sampler("a:b", _shifted)
    with pytest.raises(ValueError, match=r"non-empty strings"):
        cx.register_gate("", _reject_odd)
    with pytest.raises(TypeError, match=r"gate factory for 'g' must be callable, got 3"):
        cx.register_gate("g", 3)


def test_builtins_are_registered():
    assert {"sequential", "difficulty_pools"} <= set(_config._SAMPLERS)
    assert "advantage_range" in _config._GATES
    assert _config._SAMPLERS["difficulty_pools"] is cx.samplers.difficulty_pools
    assert _config._SAMPLERS["learnability"] is cx.samplers.learnability
    assert _config._GATES["advantage_range"] is cx.gates.advantage_range


def test_a_factory_with_kwargs_still_gets_the_context_it_names(registry):
    """**kwargs lifts the unknown-key check only: num_tasks (a gate's context) and categories
    still reach a factory that names them."""
    seen = {}

    def gate(num_tasks, **options):
        seen.update(num_tasks=num_tasks, **options)
        return _reject_odd()

    def sampler(num_tasks, categories, **options):
        seen.update(categories=list(categories), **options)
        return cx.samplers.uniform(num_tasks)

    cx.register_gate("kw_gate", gate)
    cx.register_sampler("kw_sampler", sampler)
    cx.curriculum_from_config(
        {"sampler": {"type": "kw_sampler", "extra": 1}, "gates": {"g": {"type": "kw_gate"}}},
        4,
        categories=[0, 0, 1, 1],
    )
    assert seen == {"num_tasks": 4, "categories": [0, 0, 1, 1], "extra": 1}
    with pytest.raises(ValueError, match=r"missing \['categories'\]"):
        cx.curriculum_from_config({"sampler": {"type": "kw_sampler"}}, 4)


def test_a_misspelled_context_name_is_refused_and_unused_known_context_is_not(plugin):
    """Context a config's factories leave unused is fine (one call serves many curricula), but
    a name no factory could take is a misspelling that would silently drop pool data."""
    levels = [0, 0, 1, 1]
    with pytest.raises(ValueError, match=r"context \['axis_nam'\] is an argument of no sampler"):
        cx.curriculum_from_config(
            {"sampler": {"type": "category_bandit"}}, 4, categories=levels, axis_nam="data"
        )
    with pytest.raises(ValueError, match=r"context \['categries'\]"):
        cx.sampler_from_config({"type": "uniform"}, 4, categries=levels)
    with pytest.raises(ValueError, match=r"context \['num_task'\]"):
        cx.gate_from_config({"type": "advantage_range"}, num_task=4)
    # A name the config gives too is refused, not overridden either way (as the docs say).
    with pytest.raises(ValueError, match=r"'categories' is given both in the config and as"):
        cx.sampler_from_config(
            {"type": "category_bandit", "categories": levels}, 4, categories=levels
        )
    # categories and entry_task are taken by other registered factories: offered, not refused.
    cx.curriculum_from_config(
        {"sampler": {"type": "uniform"}}, 4, categories=levels, entry_task=levels
    )
    # A name only a plug-in factory of this config takes is known to it.
    cx.register_sampler(
        f"{plugin}_ctx", lambda num_tasks, pool_notes: cx.samplers.uniform(num_tasks)
    )
    try:
        cx.sampler_from_config({"type": f"{plugin}_ctx"}, 4, pool_notes="x")
    finally:
        _config._SAMPLERS.pop(f"{plugin}_ctx")


def test_a_preset_that_is_not_a_name_is_refused_by_name():
    with pytest.raises(ValueError, match=r"unknown preset \['robust'\]; presets are \['robust'\]"):
        cx.curriculum_from_config({"preset": ["robust"]}, 10)


def test_a_factory_error_names_the_table_it_came_from():
    bad = {"type": "difficulty_pools", "bands": {"hard": {"max_reward": 0.5, "weight": -1.0}}}
    with pytest.raises(
        ValueError, match=r"^sampler\.inner \(type 'difficulty_pools'\): .*negative"
    ):
        cx.curriculum_from_config({"sampler": {"type": "reward_consistency", "inner": bad}}, 10)
    with pytest.raises(ValueError, match=r"^gates\.z \(type 'advantage_range'\): "):
        cx.curriculum_from_config(
            {"gates": {"z": {"type": "advantage_range", "low": 2.0, "high": 1.0}}}, 10
        )


def test_the_sampler_tables_of_docs_config_md_show_the_factories_defaults():
    """docs/config.md spells out the samplers' defaults; its floor table once showed
    ``staleness_share = 0.1`` (the default is 0.0)."""
    text = (REPO / "docs" / "config.md").read_text()
    block = re.search(r"```toml\n(.*?)```", text, re.S).group(1)
    # Each table, commented out or not, on its own: the lines of one [sampler] and its inner.
    tables = re.split(r"\n(?=(?:# )?\[sampler\]\s)", block)
    checked = 0
    for table in tables:
        lines = [re.sub(r"^# ?", "", line) for line in table.splitlines()]
        spec = tomllib.loads("\n".join(lines))["sampler"]
        params = inspect.signature(_config._SAMPLERS[spec["type"]]).parameters
        for key, value in spec.items():
            default = params[key].default if key not in ("type", "inner") else value
            if default is None:  # "unset" is what the doc's comment explains
                continue
            expect = list(default) if isinstance(default, tuple) else default
            assert value == expect, (spec["type"], key, value, default)
            checked += 1
    assert checked >= 15, checked
