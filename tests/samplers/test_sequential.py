"""cx.samplers.sequential: every task once per epoch, order a pure function of (seed, epoch)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import curriculax as cx
from curriculax.samplers import SequentialState

KEY = jax.random.key(0)  # sequential ignores keys; any key will do


@functools.cache
def _sampler(num_tasks, shuffle=True, seed=0):
    """One sampler and one jitted ``sample`` per configuration, shared by every test."""
    s = cx.samplers.sequential(num_tasks, shuffle=shuffle, seed=seed)
    return s, jax.jit(s.sample, static_argnums=2)


def _draw(num_tasks, num, *, shuffle=True, seed=0, state=None):
    s, sample = _sampler(num_tasks, shuffle, seed)
    state = s.init(KEY) if state is None else state
    ids, state = sample(state, KEY, num)
    return np.asarray(ids).tolist(), state


def _position(state):
    return int(state.epoch), int(state.cursor)


def test_source_order_without_shuffle():
    ids, state = _draw(5, 7, shuffle=False)
    assert ids == [0, 1, 2, 3, 4, 0, 1]
    assert _position(state) == (1, 2)
    ids, state = _draw(5, 4, shuffle=False, state=state)
    assert ids == [2, 3, 4, 0]
    assert _position(state) == (2, 1)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 16, 100])
def test_each_shuffled_epoch_is_a_permutation(n):
    epochs = 4
    ids, state = _draw(n, n * epochs)
    for e in range(epochs):
        assert sorted(ids[e * n : (e + 1) * n]) == list(range(n)), (n, e)
    assert _position(state) == (epochs, 0)


def test_epoch_orders_differ_between_epochs_and_between_seeds():
    n = 100
    ids, _ = _draw(n, 3 * n)
    orders = [tuple(ids[e * n : (e + 1) * n]) for e in range(3)]
    assert len(set(orders)) == 3
    assert orders[0] != tuple(range(n))  # actually shuffled
    by_seed = {tuple(_draw(n, n, seed=seed)[0]) for seed in (1, 2)}
    assert len(by_seed | {orders[0]}) == 3


def test_a_state_rebuilt_from_its_position_continues_with_the_same_tasks():
    n = 9
    _, state = _draw(n, 7)
    _, state = _draw(n, 13, state=state)  # crosses into epoch 2
    epoch, cursor = _position(state)
    assert (epoch, cursor) == (2, 2)
    continued, _ = _draw(n, 20, state=state)
    # Only the two integers survive: a new sampler object, a fresh state built from them.
    fresh = cx.samplers.sequential(n)
    rebuilt = SequentialState(jnp.asarray(epoch, jnp.int32), jnp.asarray(cursor, jnp.int32))
    ids, _ = jax.jit(fresh.sample, static_argnums=2)(rebuilt, jax.random.key(99), 20)
    assert ids.tolist() == continued
    # ...and both equal the tail of one long uninterrupted stream.
    whole, _ = _draw(n, 40)
    assert whole[20:40] == continued


def test_a_state_rebuilt_from_plain_python_ints_continues_with_the_same_tasks():
    # The position as it would be read back from a log line or JSON metadata: two ints.
    n = 9
    continued, _ = _draw(n, 5, state=SequentialState(jnp.int32(2), jnp.int32(2)))
    ids, state = cx.samplers.sequential(n).sample(SequentialState(2, 2), KEY, 5)
    assert ids.tolist() == continued
    assert _position(state) == (2, 7)


def test_epoch_and_cursor_metrics_after_exactly_one_epoch():
    n = 6
    s, _ = _sampler(n)
    state = s.init(KEY)
    assert {k: float(v) for k, v in s.metrics(state).items()} == {"epoch": 0.0, "cursor": 0.0}
    _, state = _draw(n, 2)
    assert {k: float(v) for k, v in s.metrics(state).items()} == {"epoch": 0.0, "cursor": 2.0}
    _, state = _draw(n, 4, state=state)
    assert {k: float(v) for k, v in s.metrics(state).items()} == {"epoch": 1.0, "cursor": 0.0}
    _, state = _draw(n, n)
    assert {k: float(v) for k, v in s.metrics(state).items()} == {"epoch": 1.0, "cursor": 0.0}
    for v in s.metrics(state).values():
        assert v.dtype == jnp.float32 and v.shape == ()


def test_one_call_spanning_several_epochs_equals_one_task_at_a_time():
    n = 3
    ids, state = _draw(n, 10)
    assert _position(state) == (3, 1)
    for e in range(3):
        assert sorted(ids[e * n : (e + 1) * n]) == [0, 1, 2]
    one_by_one, state1 = [], None
    for _ in range(10):
        got, state1 = _draw(n, 1, state=state1)
        one_by_one += got
    assert one_by_one == ids
    assert _position(state1) == (3, 1)


def test_infinite_stream_counts_up():
    ids, state = _draw(None, 5)
    assert ids == [0, 1, 2, 3, 4]
    ids, state = _draw(None, 3, state=state)
    assert ids == [5, 6, 7]
    assert _position(state) == (0, 8)
    s, _ = _sampler(None)
    assert {k: float(v) for k, v in s.metrics(state).items()} == {"epoch": 0.0, "cursor": 8.0}
    # shuffle has no meaning for a stream: ids are still 0, 1, 2, ...
    assert _draw(None, 4, shuffle=False)[0] == [0, 1, 2, 3]


def test_the_infinite_stream_starts_again_from_0_at_the_end_of_int32():
    """Ids are int32: past 2^31 - 2 the stream used to wrap to negative ids (the cursor then
    saturated and handed out the same ids forever)."""
    top = 2**31 - 1
    state = SequentialState(jnp.int32(0), jnp.int32(top - 3))
    ids, state = _draw(None, 5, state=state)
    assert ids == [top - 3, top - 2, top - 1, 0, 1]  # the last id is 2^31 - 2
    assert _position(state) == (1, 2)
    ids, state = _draw(None, 2, state=state)
    assert ids == [2, 3]


def test_sample_zero_tasks_is_a_no_op():
    _, state = _draw(5, 3)
    ids, new = _draw(5, 0, state=state)
    assert ids == []
    assert _position(new) == (0, 3)


def test_observe_changes_nothing():
    s, _ = _sampler(4)
    _, state = _draw(4, 3)
    results = cx.GroupResults(
        jnp.array([1, 2], jnp.int32),
        jnp.ones((2, 2)),
        jnp.ones((2, 2), bool),
        jnp.zeros((2, 2, 1)),
        jnp.ones((2, 2, 1), bool),
    )
    assert _position(s.observe(state, results)) == (0, 3)


def test_jit_equals_eager():
    for n, shuffle in [(7, True), (None, True)]:
        s, sample = _sampler(n, shuffle)
        eager_state = jit_state = s.init(KEY)
        for num in (3, 9, 3):
            eager_ids, eager_state = s.sample(eager_state, KEY, num)
            jit_ids, jit_state = sample(jit_state, KEY, num)
            assert eager_ids.tolist() == jit_ids.tolist()
            assert eager_ids.dtype == jit_ids.dtype == jnp.int32
            assert _position(eager_state) == _position(jit_state)
            assert eager_state.epoch.dtype == eager_state.cursor.dtype == jnp.int32


STREAM_N = 7
STREAM_LEN = 40


@functools.cache
def _reference_stream():
    return _draw(STREAM_N, STREAM_LEN)[0]


# A few chunk sizes (each compiles once), spanning 0, less than, equal to and above the pool.
@settings(max_examples=25, deadline=None)
@given(chunks=st.lists(st.sampled_from([0, 1, 3, 7, 8]), min_size=1, max_size=5))
def test_any_chunking_of_sample_calls_yields_the_same_stream(chunks):
    stream, state = [], None
    for num in chunks:
        ids, state = _draw(STREAM_N, num, state=state)
        assert len(ids) == num
        stream += ids
    assert stream == _reference_stream()[: len(stream)]
    assert _position(state) == divmod(sum(chunks), STREAM_N)


@pytest.mark.parametrize(
    ("num_tasks", "error", "match"),
    [
        (0, ValueError, r"num_tasks must be >= 1, got 0"),
        (-3, ValueError, r"num_tasks must be >= 1, got -3"),
        (True, TypeError, r"num_tasks must be an int >= 1, got the bool True"),
        (2.5, TypeError, r"num_tasks must be an int >= 1, got 2\.5"),
        ("5", TypeError, r"num_tasks must be an int >= 1, got '5'"),
        (2**31, ValueError, r"num_tasks must be below 2\*\*31"),
    ],
)
def test_bad_num_tasks_raise(num_tasks, error, match):
    with pytest.raises(error, match=match):
        cx.samplers.sequential(num_tasks)


def test_numpy_integer_num_tasks_is_accepted():
    s = cx.samplers.sequential(np.int64(4), shuffle=False)
    assert s.sample(s.init(KEY), KEY, 5)[0].tolist() == [0, 1, 2, 3, 0]


def test_bad_seed_raises():
    with pytest.raises(TypeError, match=r"seed must be an int >= 0, got 1\.5"):
        cx.samplers.sequential(4, seed=1.5)
    with pytest.raises(TypeError, match=r"seed must be an int >= 0, got the bool True"):
        cx.samplers.sequential(4, seed=True)


def test_a_seed_outside_32_bits_is_refused_not_aliased():
    """The sampler keeps 32 bits of its seed: 2**32 once drew seed 0's orders and -1 seed
    2**32 - 1's."""
    with pytest.raises(ValueError, match=r"seed must be below 2\*\*32 .* seed 0\), got 4294967296"):
        cx.samplers.sequential(4, seed=2**32)
    with pytest.raises(ValueError, match=r"seed must be >= 0, got -1"):
        cx.samplers.sequential(4, seed=-1)
    with pytest.raises(ValueError, match=r"sampler \(type 'sequential'\): seed must be >= 0"):
        cx.sampler_from_config({"type": "sequential", "seed": -1}, 4)
    assert cx.samplers.sequential(4, seed=2**32 - 1).num_tasks == 4


def test_bad_num_raises():
    s, _ = _sampler(4)
    state = s.init(KEY)
    with pytest.raises(ValueError, match=r"num must be >= 0, got -1"):
        s.sample(state, KEY, -1)
    with pytest.raises(TypeError, match=r"num must be a static Python int >= 0.*got 2\.0"):
        s.sample(state, KEY, 2.0)
    with pytest.raises(TypeError, match=r"got the bool True"):
        s.sample(state, KEY, True)
    # A traced num (forgot static_argnums) gets told how to fix it.
    with pytest.raises(TypeError, match=r"static_argnums"):
        jax.jit(s.sample)(state, KEY, 3)
