"""Values of the engine's settings: numpy numbers are taken as the Python numbers they hold,
anything else that cannot work is refused with the argument's name."""

import dataclasses
import json

import jax
import numpy as np
import pytest
from engine_test_helpers import id_pool, id_solver

from curriculax.engine import Engine, EngineConfig, Env, run


def test_numpy_ints_are_stored_as_python_ints():
    config = EngineConfig(
        batch_groups=np.int64(4),
        groups_per_generation=np.int32(2),
        pending_capacity=np.int64(8),
        stall_windows=np.int16(3),
        seed=np.uint32(5),
    )
    values = dataclasses.asdict(config)
    assert all(type(v) is int for k, v in values.items() if k != "stall_policy")
    assert values["batch_groups"] == 4 and values["seed"] == 5
    json.dumps(values)  # what a checkpoint saves


@pytest.mark.parametrize(
    ("seed", "error", "message"),
    [
        (1.5, TypeError, "seed must be an int >= -9223372036854775808, got 1.5"),
        ("x", TypeError, "seed must be an int >= -9223372036854775808, got 'x'"),
        (True, TypeError, "seed must be an int >= -9223372036854775808, got the bool True"),
        (2**63, ValueError, "seed must fit in a signed 64-bit int"),
    ],
)
def test_bad_seeds_are_refused(seed, error, message):
    with pytest.raises(error, match=message):
        EngineConfig(batch_groups=4, seed=seed)


def test_numpy_weights_are_taken_as_python_numbers():
    half = Env("a", id_pool(4), weight=np.float32(0.5))
    two = Env("a", id_pool(4), weight=np.int64(2))
    assert (half.weight, type(half.weight)) == (0.5, float)
    assert (two.weight, type(two.weight)) == (2, int)
    with pytest.raises(ValueError, match="weight must be a finite number"):
        Env("a", id_pool(4), weight=np.float32("nan"))
    with pytest.raises(ValueError, match="weight must be a finite number"):
        Env("a", id_pool(4), weight=np.bool_(True))


@pytest.fixture(scope="module")
def engine():
    return Engine(id_solver(), [Env("a", id_pool(8), group_size=2)], EngineConfig(batch_groups=2))


@pytest.mark.parametrize(("traces", "error"), [("yes", ValueError), ([0.5], TypeError)])
def test_bad_traces_name_the_argument(engine, traces, error):
    with pytest.raises(error, match=r"traces must be True/False, 'all'/'off' or a rate"):
        run(engine, steps=1, progress=False, traces=traces)


def test_resume_without_a_run_dir_is_refused(engine):
    with pytest.raises(ValueError, match="resume=True needs the run_dir"):
        run(engine, steps=1, resume=True, progress=False)


def test_seeds_that_share_their_low_32_bits_start_different_runs():
    # jax.random.key keeps a seed's low 32 bits with 64-bit mode off: 1 and 2**32 + 1 (or -1
    # and 2**32 - 1) were one run; a seed below 2**32 keeps the key it always had
    def key_of(seed=0, key=None):
        engine = Engine(id_solver(), [Env("e", id_pool(8))], EngineConfig(seed=seed))
        return np.asarray(jax.random.key_data(engine.init(key).key)).tolist()

    assert key_of(1) != key_of(2**32 + 1)
    assert key_of(-1) != key_of(2**32 - 1)
    assert key_of(7) == key_of(key=jax.random.key(7))
