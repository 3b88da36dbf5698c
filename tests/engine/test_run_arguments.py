"""What ``run`` does with the state and the callback it is given: a state is consumed (the
compiled steps donate it), so one already consumed is refused saying so, and a copy keeps the
original; ``on_update`` may not replace the keys the engine logs itself."""

import re

import jax
import jax.numpy as jnp
import pytest
from engine_test_helpers import assert_trees_equal, host, two_env_engine

from curriculax.engine import run


@pytest.fixture(scope="module")
def engine():
    return two_env_engine()


def test_a_consumed_state_is_refused_and_a_copy_keeps_the_original(engine):
    start = run(engine, steps=2, progress=False, traces=False).state
    kept = host(start)
    # Two branches from one state: each gets a copy, and the state itself is untouched.
    a = run(engine, steps=4, state=jax.tree.map(jnp.copy, start), progress=False, traces=False)
    b = run(engine, steps=4, state=jax.tree.map(jnp.copy, start), progress=False, traces=False)
    assert_trees_equal(host(a.state), host(b.state), "two branches from copies of one state")
    assert_trees_equal(host(start), kept, "the state the copies were made from")
    run(engine, steps=4, state=start, progress=False, traces=False)
    # It failed deep in the run with "Array has been deleted".
    with pytest.raises(ValueError, match=r"state= was consumed by an earlier run .*jnp.copy"):
        run(engine, steps=6, state=start, progress=False, traces=False)


def test_on_update_may_not_replace_the_engines_own_keys(engine):
    # A returned "step" replaced the logged step (the sinks' x axis) with a float.
    with pytest.raises(ValueError, match=r"on_update returned \['step'\], key\(s\) the engine"):
        run(engine, steps=2, progress=False, traces=False, on_update=lambda s, r: {"step": 10})
    # A value that is no number was Python's bare "could not convert string to float".
    for bad in ("abc", None, [1, 2]):
        with pytest.raises(
            ValueError, match=rf"on_update returned .eval/x.: {re.escape(repr(bad))}, not a nu"
        ):
            run(
                engine,
                steps=1,
                progress=False,
                traces=False,
                on_update=lambda s, r, bad=bad: {"eval/x": bad},
            )
    logged = []
    run(
        engine,
        steps=2,
        progress=False,
        traces=False,
        on_update=lambda s, r: {"eval/x": r["step"] / 2},
        until=lambda r: logged.append((r["step"], r["eval/x"])) and False,
    )
    assert logged == [(1, 0.5), (2, 1.0)]
