"""cx.HostCurriculum: the host-side driver keeps the jitted curriculum's semantics exactly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import curriculax as cx
from curriculax.credit import grpo_advantages

N, NUM, K = 64, 16, 4


def _curriculum(n=N):
    return cx.curriculum(
        cx.samplers.difficulty_pools(n),
        gates={"zero_advantage": cx.gates.advantage_range(0.0, 0.0)},
    )


def _rollouts(rng, g, k=K):
    """Bernoulli rewards with some invalid rollouts, one NaN, and one group with none valid."""
    rewards = (rng.random((g, k)) < 0.5).astype(np.float32)
    valid = rng.random((g, k)) < 0.85
    valid[0] = False  # a failed group: counted as failed, never admitted
    if g > 1:
        rewards[1, 0] = np.nan  # counted non-finite; must not poison its group's credit
        valid[1, 0] = True
    return rewards, valid


class _Reference:
    """The curriculum driven by hand, jitted, with the key sequence HostCurriculum documents."""

    def __init__(self, cur, seed):
        self.cur = cur
        init_key, self.key = jax.random.split(jax.random.key(seed))
        self.state = jax.jit(cur.init)(init_key)
        self._sample = jax.jit(cur.sample, static_argnums=2)
        self._observe = jax.jit(cur.observe)

    def sample(self, n):
        self.key, sub = jax.random.split(self.key)
        ids, self.state = self._sample(self.state, sub, n)
        return np.asarray(ids)

    def observe(self, ids, rewards, valid):
        finite = np.isfinite(rewards)
        adv = grpo_advantages(np.where(finite, rewards, 0.0), valid & finite)
        results = cx.GroupResults(
            jnp.asarray(ids, jnp.int32),
            jnp.asarray(rewards),
            jnp.asarray(valid),
            adv[:, :, None],
            jnp.ones((*adv.shape, 1), bool),
        )
        admission, self.state = self._observe(self.state, results)
        return np.asarray(admission.admitted)


def _state_leaves(host):
    return {k[len("state/") :]: v for k, v in host.state_dict().items() if k.startswith("state/")}


def _assert_same_state(host, ref):
    flat = jax.tree_util.tree_flatten_with_path(ref.state)[0]
    want = {cx.checkpoint.path_str(p): np.asarray(x) for p, x in flat}
    got = _state_leaves(host)
    assert set(got) == set(want)
    for path in want:
        np.testing.assert_array_equal(got[path], want[path], err_msg=path)


def test_same_draws_admissions_and_state_as_the_jitted_curriculum():
    """Batch sizes 16 (a full bucket), 13 and 5 (padded to 16 and 8): padding is invisible."""
    cur = _curriculum()
    host, ref = cx.HostCurriculum(cur, seed=3), _Reference(cur, seed=3)
    rng = np.random.default_rng(0)
    for step, g in enumerate([16, 13, 5, 16, 13, 16, 5, 16]):
        ids = host.sample(NUM)
        np.testing.assert_array_equal(ids, ref.sample(NUM), err_msg=f"step {step}")
        assert ids.dtype == np.int32 and ids.shape == (NUM,)
        rewards, valid = _rollouts(rng, g)
        admitted = host.observe(ids[:g], rewards, valid)
        assert admitted.dtype == np.bool_ and admitted.shape == (g,)
        np.testing.assert_array_equal(admitted, ref.observe(ids[:g], rewards, valid))
        _assert_same_state(host, ref)
    want = {k: float(v) for k, v in cur.metrics(ref.state).items()}
    assert host.metrics() == want
    # the padded calls counted only real groups: one failed group per call, 13 + 5 ... groups
    assert want["failed_groups"] == 8.0 and want["groups"] == 16 * 4 + 13 * 2 + 5 * 2
    assert want["nonfinite"] == 8.0
    assert (host.sample_calls, host.observe_calls) == (8, 8)


def test_padding_reaches_no_count_and_no_component_state():
    """5 groups padded to 8: failed groups, admission rate and the gate's rate count 5."""
    cur = _curriculum()
    host = cx.HostCurriculum(cur)
    drawn = host.sample(8)  # a full draw: the sampler counts 8 tasks as dispatched (seen)
    ids = drawn[:5]
    rewards = np.array([[1, 0], [1, 1], [0, 0], [0, 1], [1, 0]], np.float32)
    valid = np.ones((5, 2), bool)
    valid[4] = False  # one genuinely failed group
    admitted = host.observe(ids, rewards, valid)
    assert admitted.tolist() == [True, False, False, True, False]
    m = host.metrics()
    assert m["groups"] == 5 and m["failed_groups"] == 1 and m["admitted"] == 2
    assert m["admission_rate"] == pytest.approx(2 / 5)
    assert m["gate/zero_advantage/admit_rate"] == pytest.approx(2 / 4)  # the failed group:
    assert m["gate/zero_advantage/rejected"] == 2  # not judged
    assert m["sampler/pool/unseen"] == N - 8  # padding rows marked no task as seen
    seen = _state_leaves(host)["sampler/seen"]
    assert sorted(np.flatnonzero(seen).tolist()) == sorted(drawn.tolist())


def test_no_recompilation_within_a_bucket():
    host = cx.HostCurriculum(_curriculum())
    rng = np.random.default_rng(1)
    for g in range(9, 17):  # one bucket: 16
        ids = host.sample(8)
        host.observe(rng.integers(0, N, g), *_rollouts(rng, g))
    assert host.trace_counts["observe"] == 1
    assert host.trace_counts["sample"] == 1
    host.observe(rng.integers(0, N, 3), *_rollouts(rng, 3))  # bucket 8
    host.observe(rng.integers(0, N, 8), *_rollouts(rng, 8))
    host.observe(rng.integers(0, N, 17), *_rollouts(rng, 17))  # bucket 32
    assert host.trace_counts["observe"] == 3
    host.metrics()
    host.metrics()
    assert host.trace_counts["metrics"] == 1
    assert ids.shape == (8,)


def test_ragged_groups_are_padded_with_invalid_rollouts():
    cur = _curriculum()
    ragged, dense = cx.HostCurriculum(cur), cx.HostCurriculum(cur)
    ids = ragged.sample(4)
    np.testing.assert_array_equal(ids, dense.sample(4))
    groups = [[1.0, 0.0, 1.0], [0.0], [], [1.0, 1.0]]  # sizes 3, 1, 0, 2
    rewards = np.zeros((4, 3), np.float32)
    valid = np.zeros((4, 3), bool)
    for i, r in enumerate(groups):
        rewards[i, : len(r)] = r
        valid[i, : len(r)] = True
    got = ragged.observe(ids, groups)
    np.testing.assert_array_equal(got, dense.observe(ids, rewards, valid))
    assert got.tolist() == [True, False, False, False]
    assert ragged.metrics() == dense.metrics()
    assert ragged.metrics()["failed_groups"] == 1.0  # the empty group

    # ragged valid and ragged sequence-level advantages go with ragged rewards
    ids = ragged.sample(2)
    dense.sample(2)
    got = ragged.observe(ids, [[1.0, 0.0], [1.0]], valid=[[True, False], [True]])
    assert got.tolist() == [False, False]  # one valid rollout each: zero advantage
    got = ragged.observe(ids, [[1.0, 0.0], [1.0]], advantages=[[0.5, -0.5], [0.0]])
    assert got.tolist() == [True, False]
    with pytest.raises(ValueError, match="valid is ragged but does not match rewards"):
        ragged.observe(ids, [[1.0, 0.0], [1.0]], valid=[[True], [True, False]])


def test_given_advantages_sequence_and_token_level():
    host = cx.HostCurriculum(_curriculum())
    ids = host.sample(3)
    rewards = np.ones((3, 2), np.float32)  # all equal: own credit would be zero everywhere
    adv2 = np.array([[0.0, 0.0], [0.3, -0.3], [0.0, 0.0]], np.float32)
    assert host.observe(ids, rewards, advantages=adv2).tolist() == [False, True, False]
    adv3 = np.zeros((3, 2, 4), np.float32)
    adv3[2, 1, 3] = 1.0  # non-zero only at a masked position of group 2, and at 1's position 0
    adv3[1, 0, 0] = 1.0
    mask = np.ones((3, 2, 4), bool)
    mask[2, 1, 3] = False
    got = host.observe(ids, rewards, advantages=adv3, token_mask=mask)
    assert got.tolist() == [False, True, False]
    with pytest.raises(ValueError, match="token_mask must match advantages"):
        host.observe(ids, rewards, advantages=adv3, token_mask=mask[:, :, :2])
    with pytest.raises(TypeError, match="token_mask must hold booleans or integers, got float"):
        host.observe(ids, rewards, advantages=adv3, token_mask=np.full((3, 2, 4), 0.2))


def test_state_dict_round_trip_gives_identical_next_draws():
    cur = _curriculum()
    host = cx.HostCurriculum(cur, seed=5)
    rng = np.random.default_rng(2)
    for _ in range(5):  # past the warm-up (64 tasks), into the banded draws
        ids = host.sample(NUM)
        host.observe(ids, *_rollouts(rng, NUM))
    sd = host.state_dict()
    assert all(isinstance(v, np.ndarray) for v in sd.values())
    assert sd["key"].dtype == np.uint32 and int(sd["sample_calls"]) == 5
    snapshot = {k: v.copy() for k, v in sd.items()}
    rewards = _rollouts(rng, NUM)
    first = [host.sample(NUM)]
    first.append(host.observe(first[0], *rewards))
    first.append(host.metrics())
    # the returned arrays are copies: the donated state did not write through them
    for k in sd:
        np.testing.assert_array_equal(sd[k], snapshot[k], err_msg=k)

    for target in (host, cx.HostCurriculum(cur, seed=99)):  # the same object, and a fresh one
        assert target.load_state_dict(sd) == cx.IncompatibleKeys([], [])
        again = target.sample(NUM)
        np.testing.assert_array_equal(again, first[0])
        np.testing.assert_array_equal(target.observe(again, *rewards), first[1])
        assert target.metrics() == first[2]
        assert (target.sample_calls, target.observe_calls) == (6, 6)


def test_load_state_dict_is_strict_and_says_what_differs():
    host = cx.HostCurriculum(_curriculum())
    sd = host.state_dict()
    other = cx.HostCurriculum(_curriculum(n=32)).state_dict()
    with pytest.raises(ValueError) as err:
        host.load_state_dict(other)
    assert "state/sampler/scores: float32[32] given, float32[64] expected" in str(err.value)

    broken = dict(sd)
    del broken["state/gates/zero_advantage/rejected"]
    broken["state/gates/other/rejected"] = np.int32(0)
    with pytest.raises(ValueError) as err:
        host.load_state_dict(broken)
    msg = str(err.value)
    assert "state/gates/zero_advantage/rejected: missing" in msg
    assert "state/gates/other/rejected: unexpected" in msg
    assert "strict=False" in msg

    before = host.state_dict()["state/gates/zero_advantage/rejected"]
    out = host.load_state_dict(broken, strict=False)
    assert out.missing_keys == ["state/gates/zero_advantage/rejected"]
    assert out.unexpected_keys == ["state/gates/other/rejected"]
    assert host.state_dict()["state/gates/zero_advantage/rejected"] == before
    with pytest.raises(TypeError, match="must be a mapping"):
        host.load_state_dict([1, 2])


def test_orbax_save_and_restore(tmp_path):
    cur = _curriculum()
    host = cx.HostCurriculum(cur, seed=7)
    rng = np.random.default_rng(3)
    for _ in range(5):
        ids = host.sample(NUM)
        host.observe(ids, *_rollouts(rng, NUM))
    host.save(tmp_path / "cur")
    rewards = _rollouts(rng, NUM)
    ids = host.sample(NUM)
    admitted = host.observe(ids, *rewards)
    metrics = host.metrics()
    host.save(tmp_path / "cur")  # a second save replaces the first once written
    host.save(tmp_path / "cur")

    fresh = cx.HostCurriculum(cur, seed=0)
    fresh.restore(tmp_path / "cur")
    assert fresh.metrics() == metrics
    assert fresh.state_dict().keys() == host.state_dict().keys()
    for k, v in host.state_dict().items():
        np.testing.assert_array_equal(fresh.state_dict()[k], v, err_msg=k)
    np.testing.assert_array_equal(fresh.sample(NUM), host.sample(NUM))
    assert len(list((tmp_path / "cur").iterdir())) == 1

    # restore the first save: the same next draws and admissions as the first time
    first = cx.HostCurriculum(cur)
    first.save(tmp_path / "first")
    host2 = cx.HostCurriculum(cur, seed=7)
    rng = np.random.default_rng(3)
    for _ in range(5):
        host2.observe(host2.sample(NUM), *_rollouts(rng, NUM))
    host2.save(tmp_path / "again")
    first.restore(tmp_path / "again")
    again = first.sample(NUM)
    np.testing.assert_array_equal(again, ids)
    np.testing.assert_array_equal(first.observe(again, *rewards), admitted)


def test_restore_errors_name_the_problem(tmp_path):
    host = cx.HostCurriculum(_curriculum())
    with pytest.raises(FileNotFoundError, match="no HostCurriculum checkpoint"):
        host.restore(tmp_path / "empty")
    cx.HostCurriculum(_curriculum(n=32)).save(tmp_path / "small")
    with pytest.raises(ValueError) as err:
        host.restore(tmp_path / "small")
    assert "state/sampler/scores: float32[32] in the checkpoint, float32[64] expected" in str(
        err.value
    )
    other = cx.HostCurriculum(cx.curriculum(cx.samplers.difficulty_pools(N)))
    other.save(tmp_path / "no_gate")
    with pytest.raises(ValueError, match="gates/zero_advantage/rejected: in this state, not in"):
        host.restore(tmp_path / "no_gate")


def test_clear_errors():
    with pytest.raises(TypeError, match=r"wrap it: cx.HostCurriculum\(cx.curriculum"):
        cx.HostCurriculum(cx.samplers.uniform(8))
    with pytest.raises(TypeError, match="seed must be an int"):
        cx.HostCurriculum(_curriculum(), seed=1.5)
    with pytest.raises(
        ValueError, match="seed must fit in a signed 64-bit int, got 18446744073709551616"
    ):
        cx.HostCurriculum(_curriculum(), seed=2**64)
    host = cx.HostCurriculum(_curriculum())
    with pytest.raises(ValueError, match="n must be >= 0"):
        host.sample(-1)
    with pytest.raises(TypeError, match="n must be an int"):
        host.sample(2.0)
    ids = host.sample(2)
    with pytest.raises(ValueError, match=r"rewards must be \[G=2, K"):
        host.observe(ids, np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"valid must be bool\[G=2, K=4\]"):
        host.observe(ids, np.zeros((2, 4)), np.ones((2, 3), bool))
    with pytest.raises(ValueError, match="task_ids must be int"):
        host.observe(ids[None], np.zeros((2, 4)))
    with pytest.raises(TypeError, match="task_ids must be integers"):
        host.observe(ids.astype(float), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="rewards holds 3 groups, task_ids 2"):
        host.observe(ids, [[1.0], [0.0], [1.0]])
    assert host.observe([], np.zeros((0, 4))).shape == (0,)


def test_out_of_range_ids_are_refused_on_the_host():
    host = cx.HostCurriculum(_curriculum())
    assert host.num_tasks == N
    with pytest.raises(ValueError, match=r"2 task id\(s\) outside \[0, 64\).*row 1: 64.*row 2: -1"):
        host.observe(np.array([3, N, -1]), np.zeros((3, 2), np.float32))
    assert host.observe_calls == 0 and host.metrics()["groups"] == 0


def test_ids_of_a_pool_of_unknown_size_are_refused_below_0_and_past_int32():
    """``sequential(None)`` declares no pool: a negative id would index a gate's per-task
    state from its end, so it is refused on the host all the same."""
    host = cx.HostCurriculum(
        cx.curriculum(cx.samplers.sequential(None), gates={"c": cx.gates.reward_consistency(8)})
    )
    assert host.num_tasks is None
    answers = np.zeros((3, 2), np.int64)
    with pytest.raises(
        ValueError, match=r"2 task id\(s\) outside \[0, 2\*\*31\).*row 0: -1.*row 1: 2147483648"
    ):
        host.observe(np.array([-1, 2**31, 5]), np.zeros((3, 2), np.float32), answers=answers)
    assert host.observe_calls == 0


SIZES = [13, 5, 30, 17, 9, 31, 20, 8, 3, 27, 16, 11]  # buckets 8, 16, 32


def test_varying_n_compiles_once_per_bucket_and_hands_out_every_draw_in_order():
    """Sequential in source order: whatever the n, the ids handed out are 0, 1, 2, ... (no
    draw discarded or reordered), and the sampler's cursor is ahead by exactly the kept."""
    n_tasks = 50
    host = cx.HostCurriculum(cx.curriculum(cx.samplers.sequential(n_tasks, shuffle=False)))
    handed = []
    for n in SIZES * 3:
        ids = host.sample(n)
        assert ids.shape == (n,) and ids.dtype == np.int32
        handed.extend(ids.tolist())
        assert 0 <= host.num_kept < 32  # fewer than the largest draw
        state = _state_leaves(host)
        drawn = int(state["sampler/epoch"]) * n_tasks + int(state["sampler/cursor"])
        assert drawn == len(handed) + host.num_kept
    assert handed == [i % n_tasks for i in range(len(handed))]
    assert host.trace_counts["sample"] == len({cx.host.bucket(n) for n in SIZES}) == 3
    assert host.sample_calls == 3 * len(SIZES)
    assert host.sample(0).shape == (0,)


def test_varying_n_with_a_learning_sampler_and_a_state_dict_round_trip():
    """difficulty_pools through warm-up: each task dispatched once (the kept draws are counted
    as seen and handed out later, none lost); after a state_dict round trip, and after an
    Orbax save/restore, the same calls give the same ids and admissions."""
    cur = _curriculum()
    host = cx.HostCurriculum(cur, seed=11)
    rng = np.random.default_rng(5)
    handed = []
    for n in SIZES[:4]:  # 65 ids: the 64-task warm-up and one more
        ids = host.sample(n)
        handed.extend(ids.tolist())
        host.observe(ids, *_rollouts(rng, n))
    unseen = host.metrics()["sampler/pool/unseen"]
    assert sorted(handed[:N]) == list(range(N))  # warm-up: each unseen task once
    assert unseen == 0 and host.num_kept > 0

    def run(driver, rng):
        out = []
        for n in SIZES[4:]:
            ids = driver.sample(n)
            out.append((ids, driver.observe(ids, *_rollouts(rng, n))))
        return out, driver.metrics()

    sd = host.state_dict()
    assert sd["kept"].shape == (host.num_kept,) and sd["kept"].dtype == np.int32
    want, want_metrics = run(host, np.random.default_rng(9))
    for target in (host, cx.HostCurriculum(cur, seed=99)):
        target.load_state_dict(sd)
        got, got_metrics = run(target, np.random.default_rng(9))
        for (a, b), (c, d) in zip(got, want):
            np.testing.assert_array_equal(a, c)
            np.testing.assert_array_equal(b, d)
        assert got_metrics == want_metrics


def test_kept_draws_survive_save_and_restore(tmp_path):
    cur = cx.curriculum(cx.samplers.sequential(40))
    host = cx.HostCurriculum(cur, seed=2)
    host.sample(13)
    kept = host.num_kept
    assert kept == 3
    host.save(tmp_path / "c")
    want = [host.sample(n) for n in (2, 9, 30)]
    fresh = cx.HostCurriculum(cur, seed=0)
    fresh.restore(tmp_path / "c")
    assert fresh.num_kept == kept
    for n, w in zip((2, 9, 30), want):
        np.testing.assert_array_equal(fresh.sample(n), w)


def test_a_state_dict_without_kept_draws_loads_with_none_kept():
    cur = cx.curriculum(cx.samplers.sequential(40, shuffle=False))
    host = cx.HostCurriculum(cur)
    host.sample(13)
    sd = {k: v for k, v in host.state_dict().items() if k != "kept"}  # as written before
    fresh = cx.HostCurriculum(cur)
    assert "kept" not in fresh.state_dict()  # none kept: no entry (Orbax writes no empty array)
    assert fresh.load_state_dict(sd) == cx.IncompatibleKeys([], [])
    assert fresh.num_kept == 0
    np.testing.assert_array_equal(fresh.sample(3), [16, 17, 18])


@pytest.mark.parametrize("scale", [1e20, 1e30, 3e38])
def test_huge_finite_rewards_get_correct_admissions(scale):
    host = cx.HostCurriculum(_curriculum())
    rewards = np.tile([0, 1, 0, 1], (3, 1)).astype("f4") * np.float32(scale)
    rewards[2] = np.float32(scale)  # all equal: nothing to prefer
    assert host.observe(np.arange(3), rewards).tolist() == [True, True, False]
    assert host.metrics()["nonfinite"] == 0


def test_a_3d_rewards_error_names_the_callers_batch_size():
    host = cx.HostCurriculum(_curriculum())
    with pytest.raises(ValueError, match=r"rewards must be float\[G=3, K\], got shape \(3, 4, 2\)"):
        host.observe(np.arange(3), np.zeros((3, 4, 2), np.float32))


def _refused(host, sd, *fragments):
    before = host.state_dict()
    with pytest.raises(ValueError) as err:
        host.load_state_dict(sd)
    for fragment in fragments:
        assert fragment in str(err.value), str(err.value)
    for k, v in host.state_dict().items():  # nothing was loaded
        np.testing.assert_array_equal(v, before[k], err_msg=k)


def test_load_state_dict_refuses_values_no_run_reaches_naming_the_field():
    host = cx.HostCurriculum(_curriculum())
    host.observe(host.sample(8), np.eye(8, 4, dtype=np.float32))
    good = host.state_dict()

    def edited(**changes):
        sd = {k: v.copy() for k, v in good.items()}
        for name, value in changes.items():
            sd[name.replace("__", "/")] = value
        return sd

    _refused(host, edited(sample_calls=np.int64(-1)), "sample_calls: -1 is below 0")
    _refused(host, edited(state__groups=np.int32(-3)), "state/groups: -3 is below 0")
    _refused(
        host,
        edited(state__gates__zero_advantage__rejected=np.int32(-1)),
        "state/gates/zero_advantage/rejected: -1 is below 0",
    )
    scores = good["state/sampler/scores"].copy()
    scores[[3, 7]] = np.nan
    _refused(host, edited(state__sampler__scores=scores), "state/sampler/scores: NaN in 2 of 64")
    _refused(
        host,
        edited(state__admitted=np.int64(2**40)),
        "state/admitted: values in [1099511627776, 1099511627776] do not fit int32",
    )
    _refused(
        host,
        edited(state__sampler__clock=np.float32(1.5)),
        "state/sampler/clock: float32[] given, int32[] expected",
    )
    _refused(host, edited(kept=np.array([3, 64], np.int32)), "kept: task id 64 outside [0, 64)")
    _refused(
        host, edited(kept=np.zeros((2, 2), np.int32)), "kept: int32[2, 2] given, int32[m] expected"
    )


def test_load_state_dict_floors_come_from_the_fresh_state():
    """floor's last_drawn starts at -1 (never drawn): -1 loads, -2 does not."""
    cur = cx.curriculum(cx.samplers.floor(16, cx.samplers.uniform(16), staleness_share=0.5))
    host = cx.HostCurriculum(cur)
    sd = host.state_dict()
    assert sd["state/sampler/last_drawn"].min() == -1
    host.load_state_dict(sd)
    sd["state/sampler/last_drawn"][4] = -2
    _refused(host, sd, "state/sampler/last_drawn: -2 is below -1")


def test_a_payload_sampler_keeps_its_draws_as_a_task_draw(tmp_path):
    """The frontier sampler hands out TaskDraws: kept rows of every leaf, in the state dict
    (``kept/<path>``) and through save/restore."""
    from curriculax.selfplay import frontier_sampler

    layout = {"level": jax.ShapeDtypeStruct((), jnp.float32)}
    fr = frontier_sampler(cx.samplers.sequential(40, shuffle=False), 40, layout, capacity=16)
    cur = cx.curriculum(fr.sampler)
    host = cx.HostCurriculum(cur, seed=1)
    draw = host.sample(5)
    assert isinstance(draw, cx.TaskDraw) and draw.ids.shape == (5,)
    assert host.num_kept == 3
    whole = cx.HostCurriculum(cur, seed=1).sample(8)  # the one draw of 8 it came from
    sd = host.state_dict()
    np.testing.assert_array_equal(np.concatenate([draw.ids, sd["kept/ids"]]), whole.ids)
    np.testing.assert_array_equal(sd["kept/from_pool"], whole.from_pool[5:])
    assert sd["kept/tasks/level"].shape == (3,)
    host.save(tmp_path / "c")
    want = host.sample(6).ids
    for load in ("state_dict", "restore"):
        fresh = cx.HostCurriculum(cur, seed=0)
        fresh.load_state_dict(sd) if load == "state_dict" else fresh.restore(tmp_path / "c")
        np.testing.assert_array_equal(fresh.sample(6).ids, want)
    np.testing.assert_array_equal(want[:3], whole.ids[5:])


def test_answers_reach_the_sampler_dense_and_ragged():
    n = 8
    cur = cx.curriculum(cx.samplers.reward_consistency(n, cx.samplers.uniform(n)))
    dense, ragged = cx.HostCurriculum(cur), cx.HostCurriculum(cur)
    ids = dense.sample(3)
    ragged.sample(3)
    rewards = np.array([[1.0, 0.0, 1.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0]], np.float32)
    valid = np.array([[1, 1, 1], [1, 1, 1], [1, 1, 0]], bool)
    # group 0: answer 7 got 1 and 0; group 1: each answer one reward; group 2: the rollout
    # that disagrees is not valid. 64-bit ids keep their low 32 bits.
    answers = np.array([[7, 7, 2**40], [1, 2, 2], [5, 5, 5]], np.int64)
    dense.observe(ids, rewards, valid, answers=answers)
    ragged.observe(
        ids,
        [[1.0, 0.0, 1.0], [1.0, 0.0, 0.0], [1.0, 1.0]],
        answers=[[7, 7, 2**40], [1, 2, 2], [5, 5]],
    )
    for host in (dense, ragged):
        marked = cx.samplers.contradicted_tasks(host._state)
        np.testing.assert_array_equal(marked, np.sort(ids[:1]))
        assert host.metrics()["sampler/noise/contradicted"] == 1.0
    with pytest.raises(ValueError, match=r"answers must be int\[G=3, K=3\]"):
        dense.observe(ids, rewards, answers=np.zeros((3, 2), np.int64))
    with pytest.raises(ValueError, match=r"GroupResults\.answers"):
        dense.observe(ids, rewards)


def test_save_refuses_a_folder_whose_numbered_folders_are_not_its_checkpoints(tmp_path):
    """Orbax counts every numbered folder as a step and deletes the old ones: a user's
    ``0/`` or another kind of checkpoint must stop the save, untouched."""
    mine = tmp_path / "mine"
    (mine / "0").mkdir(parents=True)
    (mine / "0" / "notes.txt").write_text("mine")
    (mine / "7").mkdir()
    host = cx.HostCurriculum(_curriculum())
    with pytest.raises(ValueError, match=r"refusing to save .*2 numbered folder\(s\).*/0, .*/7"):
        host.save(mine)
    assert sorted(p.name for p in mine.iterdir()) == ["0", "7"]
    assert (mine / "0" / "notes.txt").read_text() == "mine"

    other = tmp_path / "engine"  # a checkpoint of the same items but another format
    store = cx.checkpoint.CheckpointStore(other)
    store.save(3, {"x": np.zeros(2)}, {"format": "something else"})
    store.close()
    with pytest.raises(ValueError, match=r"step\(s\) 3 there are checkpoints of another kind"):
        host.save(other)
    assert sorted(p.name for p in other.iterdir()) == ["3"]


def test_restore_refuses_another_pool_size_and_kept_ids_outside_the_pool(tmp_path):
    """uniform's state does not depend on the pool size: the saved size and the kept draws
    are what tell, as load_state_dict checks them."""
    big = cx.HostCurriculum(cx.curriculum(cx.samplers.uniform(1000)), seed=1)
    big.sample(3)  # drawn in a bucket of 4: one kept
    big.save(tmp_path / "big")
    small = cx.HostCurriculum(cx.curriculum(cx.samplers.uniform(10)))
    before = small.state_dict()
    with pytest.raises(ValueError, match="pool of 1000 tasks, this one 10"):
        small.restore(tmp_path / "big")
    for k, v in small.state_dict().items():
        np.testing.assert_array_equal(v, before[k], err_msg=k)
    assert not (tmp_path / "missing").exists()
    with pytest.raises(FileNotFoundError):
        small.restore(tmp_path / "missing")
    assert not (tmp_path / "missing").exists()  # not created by looking


def test_observe_refuses_float_answers_and_valid_and_empty_groups():
    host = cx.HostCurriculum(
        cx.curriculum(cx.samplers.uniform(10), gates={"c": cx.gates.reward_consistency(10)})
    )
    with pytest.raises(TypeError, match="answers must hold booleans or integers, got float64"):
        host.observe([1], [[1.0, 0.0]], answers=np.array([[3.5, 3.9]]))
    with pytest.raises(TypeError, match="answers must hold booleans or integers, got float64"):
        host.observe([1], [[1.0, 0.0]], answers=[[3.5, 3.9]])
    with pytest.raises(TypeError, match="valid must hold booleans or integers, got float64"):
        host.observe([1], [[1.0, 0.0]], [[0.2, 0.0]])
    with pytest.raises(ValueError, match=r"rewards: the 2 groups hold no rollouts \(K = 0\)"):
        host.observe([1, 2], np.zeros((2, 0), np.float32))
    with pytest.raises(ValueError, match=r"rewards: the 2 groups hold no rollouts \(K = 0\)"):
        host.observe([1, 2], [[], []])
    assert host.observe_calls == 0 and host.metrics()["gate/c/contradicted"] == 0
    # integer ids (and 0/1 validity) still pass
    admitted = host.observe([1], [[1.0, 0.0]], np.array([[1, 1]]), answers=np.array([[3, 4]]))
    assert admitted.tolist() == [True]


def test_a_batch_of_the_default_sample_may_span_two_draws_an_exact_one_never_does():
    """``uniform`` never repeats a task within one call of the sampler. The default
    ``sample(5)`` serves batches from two calls (kept draws, then a fresh draw of 8), so some
    batches repeat a task; ``exact=True`` draws 5 in one call: no batch repeats one, nothing is
    kept, one program for the size, and the draws are the curriculum's own draws of 5."""
    n_tasks, n = 20, 5
    cur = cx.curriculum(cx.samplers.uniform(n_tasks))
    default = cx.HostCurriculum(cur)
    repeats = sum(len(set(default.sample(n).tolist())) < n for _ in range(200))
    assert repeats > 0  # documented: a batch may repeat a task across the two draws
    exact, ref = cx.HostCurriculum(cur, seed=4), _Reference(cur, seed=4)
    for _ in range(200):
        ids = exact.sample(n, exact=True)
        assert len(set(ids.tolist())) == n and exact.num_kept == 0
        np.testing.assert_array_equal(ids, ref.sample(n))
    assert exact.trace_counts["sample"] == 1
    exact.sample(3, exact=True)
    assert exact.trace_counts["sample"] == 2  # one program per distinct size


def test_an_exact_sample_hands_out_the_kept_draws_first_and_keeps_nothing():
    """Kept draws (from a default call, or a restored state) come first, then exactly the
    rest is drawn: ``sequential``'s stream is unbroken."""
    host = cx.HostCurriculum(cx.curriculum(cx.samplers.sequential(40, shuffle=False)))
    handed = host.sample(5).tolist()  # draws 8, keeps 3
    assert host.num_kept == 3
    handed += host.sample(2, exact=True).tolist()  # from the kept draws only
    assert host.num_kept == 1
    handed += host.sample(6, exact=True).tolist()  # 1 kept and 5 drawn
    assert host.num_kept == 0
    handed += host.sample(4, exact=True).tolist()
    assert handed == list(range(17)) and host.num_kept == 0
    assert host.sample(0, exact=True).shape == (0,)


def test_metrics_and_state_dict_are_safe_beside_a_draw_in_another_thread():
    """``sample`` donates the state: without the driver's lock a ``metrics()`` or
    ``state_dict()`` beside it reads a deleted buffer (a data loader draws in its thread)."""
    import threading
    import time

    host = cx.HostCurriculum(cx.curriculum(cx.samplers.learnability(4096)))
    host.sample(8)
    host.metrics()
    stop, errors = threading.Event(), []

    def draw():
        try:
            while not stop.is_set():
                host.sample(8)
        except Exception as e:  # reported below
            errors.append(e)

    thread = threading.Thread(target=draw)
    thread.start()
    try:
        end = time.monotonic() + 3.0
        while time.monotonic() < end and not errors:
            host.metrics()
            host.state_dict()
    except Exception as e:
        errors.append(e)
    finally:
        stop.set()
        thread.join()
    assert not errors, errors
    assert host.sample_calls > 1


def test_a_state_dict_of_lists_loads_after_a_json_round_trip():
    """Lists (a JSON round trip: the u32 key comes back as Python ints) are cast to each
    entry's dtype once their values are checked to fit it."""
    import json

    cur = cx.curriculum(cx.samplers.sequential(40))
    host = cx.HostCurriculum(cur, seed=1)
    host.observe(host.sample(5), np.eye(5, 4, dtype=np.float32))  # 3 kept
    sd = host.state_dict()
    as_lists = json.loads(json.dumps({k: v.tolist() for k, v in sd.items()}))
    want = [host.sample(n) for n in (2, 9, 4)]
    fresh = cx.HostCurriculum(cur, seed=2)
    assert fresh.load_state_dict(as_lists) == cx.IncompatibleKeys([], [])
    for k, v in sd.items():
        got = fresh.state_dict()[k]
        assert got.dtype == v.dtype, k
        np.testing.assert_array_equal(got, v, err_msg=k)
    for n, w in zip((2, 9, 4), want):
        np.testing.assert_array_equal(fresh.sample(n), w)
    # values out of the dtype's range are still refused, not wrapped
    _refused(fresh, {**as_lists, "key": [-1, 0]}, "key: values in [-1, 0] do not fit uint32")
    _refused(fresh, {**as_lists, "kept": [1, 2**40]}, "kept: values in [1, 1099511627776]")
    _refused(fresh, {**as_lists, "kept": [1.5]}, "kept: float64[1] given, int32[m] expected")


def test_a_float_too_large_for_its_leaf_is_refused_not_loaded_as_infinity():
    """A float64 (or a JSON number) past float32's range once loaded as inf, unchecked."""
    host = cx.HostCurriculum(cx.curriculum(cx.samplers.learnability(8)))
    sd = host.state_dict()
    big = np.array(sd["state/sampler/successes"], np.float64)
    big[3] = 1e39
    want = "state/sampler/successes: 1e+39 does not fit float32"
    _refused(host, {**sd, "state/sampler/successes": big}, want)
    _refused(host, {**sd, "state/sampler/successes": big.tolist()}, want)
    big[3] = 3e38  # fits
    host.load_state_dict({**sd, "state/sampler/successes": big})
    assert host.state_dict()["state/sampler/successes"][3] == np.float32(3e38)


def test_a_non_strict_load_without_kept_draws_keeps_the_current_ones():
    """Loading only a counter leaves the sampler as it is: the draws it counted as handed out
    stay kept (and are reported missing). A state dict that replaces the sampler state
    brings its own kept draws: none when it gives none."""
    cur = cx.curriculum(cx.samplers.sequential(40, shuffle=False))
    host = cx.HostCurriculum(cur)
    np.testing.assert_array_equal(host.sample(5), np.arange(5))
    out = host.load_state_dict({"observe_calls": np.int64(0)}, strict=False)
    assert out == cx.IncompatibleKeys(
        sorted(k for k in host._state_dict() if k != "observe_calls"), []
    )
    assert "kept" in out.missing_keys and host.num_kept == 3
    np.testing.assert_array_equal(host.sample(3), [5, 6, 7])

    other = cx.HostCurriculum(cur)
    other.sample(8)  # nothing kept: its state dict has no kept draws
    host.sample(5)  # 3 kept again
    sd = {**other.state_dict(), "extra": np.int32(0)}
    out = host.load_state_dict(sd, strict=False)
    assert out == cx.IncompatibleKeys([], ["extra"]) and host.num_kept == 0
    np.testing.assert_array_equal(host.sample(3), [8, 9, 10])


def _frontier_curriculum(layout=None):
    from curriculax.selfplay import frontier_sampler

    layout = layout or {"level": jax.ShapeDtypeStruct((), jnp.float32)}
    fr = frontier_sampler(cx.samplers.sequential(40, shuffle=False), 40, layout, capacity=16)
    return fr, cx.curriculum(fr.sampler)


def test_a_refused_load_loads_nothing_payload_kept_rows_of_different_counts():
    """Kept payload entries of different row counts: refused before anything is installed
    (the state, key and counters once went in before the kept draws were built)."""
    _, cur = _frontier_curriculum()
    src = cx.HostCurriculum(cur, seed=1)
    for _ in range(3):
        src.sample(5)  # 1 kept
    sd = src.state_dict()
    sd["kept/from_pool"] = sd["kept/from_pool"][:-1]
    dst = cx.HostCurriculum(cur, seed=0)
    before = dst.state_dict()
    with pytest.raises(ValueError) as err:
        dst.load_state_dict(sd)
    after = dst.state_dict()
    assert after.keys() == before.keys()
    for k, v in before.items():
        np.testing.assert_array_equal(after[k], v, err_msg=k)
    assert dst.sample_calls == 0
    assert str(err.value).startswith("load_state_dict: ")
    assert "entries hold different numbers of rows: kept/from_pool 0, kept/ids 1" in str(err.value)


def test_load_state_dict_refuses_kept_ids_of_payload_samplers_and_of_unknown_pools():
    _, cur = _frontier_curriculum()  # num_tasks 40 + 16
    host = cx.HostCurriculum(cur, seed=1)
    host.sample(5)
    sd = host.state_dict()
    fresh = cx.HostCurriculum(cur)
    _refused(fresh, {**sd, "kept/ids": np.array([3, 10**6, 4], np.int32)}, "kept/ids: task id")
    _refused(fresh, {**sd, "kept/ids": np.array([3, -7, 4], np.int32)}, "kept/ids: -7 is below 0")
    unknown = cx.HostCurriculum(cx.curriculum(cx.samplers.sequential(None)))
    unknown.sample(3)
    sd = unknown.state_dict()
    assert unknown.num_tasks is None and sd["kept"].shape == (5,)
    sd["kept"][2] = -1
    _refused(cx.HostCurriculum(unknown.curriculum), sd, "kept: -1 is below 0")


def test_load_state_dict_floors_reach_a_samplers_per_task_state_named_tasks():
    """category_learnability keeps its per-task learnability state under ``tasks``: only a
    frontier's generated payloads (also under ``tasks``) are exempt from the floors."""
    cur = cx.curriculum(cx.samplers.category_learnability(16, np.arange(16) % 4))
    host = cx.HostCurriculum(cur)
    sd = host.state_dict()
    for name in ("state/sampler/tasks/updated", "state/sampler/tasks/clock"):
        _refused(host, {**sd, name: np.full_like(sd[name], -5)}, f"{name}: -5 is below")


def test_a_frontiers_task_payloads_may_hold_any_value():
    """Generated payloads are the env's, not counts: negative integers and NaN load."""
    layout = {
        "level": jax.ShapeDtypeStruct((), jnp.float32),
        "tokens": jax.ShapeDtypeStruct((2,), jnp.int32),
    }
    _, cur = _frontier_curriculum(layout)
    host = cx.HostCurriculum(cur)
    host.sample(5)
    sd = host.state_dict()
    sd["state/sampler/tasks/level"][0] = np.nan
    sd["state/sampler/tasks/tokens"][1] = -3
    sd["kept/tasks/level"][0] = np.nan
    sd["kept/tasks/tokens"][0] = -9
    fresh = cx.HostCurriculum(cur)
    fresh.load_state_dict(sd)
    assert np.isnan(fresh.state_dict()["state/sampler/tasks/level"][0])
    assert fresh.sample(1).tasks["tokens"][0].tolist() == [-9, -9]
    sd["state/sampler/status"][0] = -1  # the frontier's own counts are still checked
    _refused(fresh, sd, "state/sampler/status: -1 is below 0")


def test_per_token_and_ragged_batches_of_varying_t_and_k_share_few_programs():
    """``T`` pads to ``bucket(T)`` and ``K`` to a power of two: one program per pair of
    buckets, not one per batch."""
    cur = cx.curriculum(
        cx.samplers.learnability(1000), gates={"z": cx.gates.advantage_range(0.0, 0.0)}
    )
    host = cx.HostCurriculum(cur)
    rng = np.random.default_rng(0)
    ts = set()
    for _ in range(20):  # T: the batch's longest completion
        ids = host.sample(16)
        t = int(rng.integers(100, 400))
        adv = rng.standard_normal((16, 8, t)).astype(np.float32)
        mask = rng.random((16, 8, t)) < 0.9
        host.observe(ids, rng.random((16, 8)).astype(np.float32), advantages=adv, token_mask=mask)
        ts.add(cx.host.bucket(t))
    assert host.trace_counts["observe"] == len(ts) == 3  # 128, 256, 512
    for _ in range(10):  # K: 5 to 7 rollouts, padded to 8 (T = 200: bucket 256)
        ids = host.sample(16)
        k = int(rng.integers(5, 8))
        adv = rng.standard_normal((16, k, 200)).astype(np.float32)
        host.observe(ids, rng.random((16, k)).astype(np.float32), advantages=adv)
    assert host.trace_counts["observe"] == 3  # (16, 8, 256) ran above: its program is reused
    for _ in range(10):  # ragged groups: K is the batch's largest group, 9 to 16
        ids = host.sample(16)
        groups = [rng.random(int(rng.integers(9, 17))).tolist() for _ in range(16)]
        host.observe(ids, groups)
    assert host.trace_counts["observe"] == 4
    # A batch whose K or T is its bucket already needs no padding: it compiled a program of
    # its own (its masks passed as None), twice the documented count.
    fresh = cx.HostCurriculum(cur)
    for k, t in ((3, 5), (4, 8), (4, 6), (3, 7)):  # K bucket 4, T bucket 8
        ids = fresh.sample(16)
        adv = rng.standard_normal((16, k, t)).astype(np.float32)
        fresh.observe(ids, rng.random((16, k)).astype(np.float32), advantages=adv)
        fresh.observe(ids, rng.random((16, k)).astype(np.float32))  # per-group credit
    assert fresh.trace_counts["observe"] == 2  # one per-token program, one per-group


def _padding_cases():
    cats = np.arange(N) % 4
    yield (
        "category_bandit",
        cx.curriculum(
            cx.samplers.category_bandit(N, cats),
            gates={"z": cx.gates.advantage_range(0.0, 0.0), "c": cx.gates.reward_consistency(N)},
        ),
    )
    yield "learning_progress", cx.curriculum(cx.samplers.learning_progress(N))


@pytest.mark.parametrize("advantages", ["per_token", "sequence", "none"])
def test_padding_k_and_t_reaches_no_component(advantages):
    """G = 5, K = 3, T = 5 observed through the driver (padded to 8, 4, 8) leave the same state
    and admissions as the curriculum's own observe of the unpadded batch, for components
    that read per-token advantages, the token mask and the even/odd halves of a group."""
    rng = np.random.default_rng(7)
    g, k, t = 5, 3, 5
    for name, cur in _padding_cases():
        host = cx.HostCurriculum(cur, seed=1)
        for _ in range(3):
            ids = host.sample(g, exact=True)
            rewards = (rng.random((g, k)) < 0.5).astype(np.float32)
            valid = rng.random((g, k)) < 0.9
            answers = rng.integers(0, 2, (g, k)).astype(np.int32)
            adv = mask = None
            if advantages == "per_token":
                adv = rng.standard_normal((g, k, t)).astype(np.float32)
                mask = rng.random((g, k, t)) < 0.7
            elif advantages == "sequence":
                adv = rng.standard_normal((g, k)).astype(np.float32)
            state = jax.tree.map(jnp.array, host._state)  # a copy: the driver donates its own
            if advantages == "none":  # and no validity: every given rollout is valid
                valid[:] = True
            given = None if advantages == "none" else valid
            got = host.observe(ids, rewards, given, adv, token_mask=mask, answers=answers)
            if adv is None:
                adv = np.asarray(grpo_advantages(rewards, valid))
            if adv.ndim == 2:
                adv = adv[:, :, None]
            if mask is None:
                mask = np.ones(adv.shape, bool)
            results = cx.GroupResults(ids, rewards, valid, adv, mask, answers)
            admission, want = jax.jit(cur.observe)(state, results)
            np.testing.assert_array_equal(got, np.asarray(admission.admitted), err_msg=name)
            flat = jax.tree_util.tree_flatten_with_path(want)[0]
            got_state = _state_leaves(host)
            for p, leaf in flat:
                path, leaf = cx.checkpoint.path_str(p), np.asarray(leaf)
                if leaf.dtype.kind == "f":
                    np.testing.assert_allclose(got_state[path], leaf, rtol=1e-6, err_msg=path)
                else:
                    np.testing.assert_array_equal(got_state[path], leaf, err_msg=f"{name} {path}")


def test_padding_k_keeps_a_frontiers_even_and_odd_halves():
    """The frontier judges a generated task's first attempt by its even rollouts and takes
    its odd ones as the baseline: K = 3 padded to 4 appends an invalid rollout, so the halves
    are those of the 3 real ones."""
    fr, cur = _frontier_curriculum()
    host = cx.HostCurriculum(cur)
    sampler = fr.insert(
        host._state.sampler,
        {"level": jnp.arange(4, dtype=jnp.float32)},
        jnp.ones(4, bool),
        jnp.arange(4, dtype=jnp.uint32),
        0,
        jnp.arange(4, dtype=jnp.uint32),
        0,
    )
    host._state = host._state._replace(sampler=sampler)
    ids = np.arange(40, 44)  # the 4 generated tasks, first attempts
    rewards = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 1]], np.float32)
    state = jax.tree.map(jnp.array, host._state)
    host.observe(ids, rewards)
    adv = np.asarray(grpo_advantages(rewards, np.ones((4, 3), bool)))[:, :, None]
    results = cx.GroupResults(ids, rewards, np.ones((4, 3), bool), adv, np.ones((4, 3, 1), bool))
    _, want = jax.jit(cur.observe)(state, results)
    got = _state_leaves(host)
    for p, leaf in jax.tree_util.tree_flatten_with_path(want)[0]:
        path = cx.checkpoint.path_str(p)
        np.testing.assert_allclose(got[path], np.asarray(leaf), rtol=1e-6, err_msg=path)
    # the halves: evens (0, 2) and odds (1) of the real rollouts
    assert got["sampler/filter_samples"][:4].tolist() == [2, 2, 2, 2]
    assert got["sampler/base_samples"][:4].tolist() == [1, 1, 1, 1]


def test_ragged_token_masks_go_with_ragged_per_token_advantages():
    host, dense = cx.HostCurriculum(_curriculum()), cx.HostCurriculum(_curriculum())
    ids = host.sample(2)
    dense.sample(2)
    adv = [np.ones((2, 3), np.float32), np.array([[0, 1, 1]], np.float32)]
    mask = [[[1, 0, 0], [0, 0, 0]], [[1, 0, 0]]]  # group 1: its one trainable position is 0
    got = host.observe(ids, [[1.0, 0.0], [1.0]], advantages=adv, token_mask=mask)
    dense_adv = np.ones((2, 2, 3), np.float32)
    dense_adv[1, 0, 0] = 0.0
    dense_mask = np.zeros((2, 2, 3), bool)
    dense_mask[:, 0, 0] = True
    valid = np.array([[True, True], [True, False]])
    want = dense.observe(
        ids,
        np.array([[1.0, 0.0], [1.0, 0.0]], np.float32),
        valid,
        dense_adv,
        token_mask=dense_mask,
    )
    np.testing.assert_array_equal(got, want)
    assert got.tolist() == [True, False]
    with pytest.raises(ValueError, match="token_mask is ragged but does not match rewards"):
        host.observe(ids, [[1.0, 0.0], [1.0]], advantages=adv, token_mask=[mask[1], mask[0]])


def test_state_is_a_snapshot_the_host_side_diagnostics_read():
    """``cx.samplers.contradicted_tasks(host.state)`` lists the robust preset's marks (the
    diagnostic docs/noise.md points host-loop users to); the snapshot is a copy, so it stays
    readable after ``sample``/``observe`` donate the driver's buffers and does not follow them."""
    host = cx.HostCurriculum(cx.robust_curriculum(8), seed=0)
    ids = host.sample(8)
    rewards = np.tile(np.array([1.0, 0.0], np.float32), (8, 1))
    answers = np.tile(np.array([0, 1], np.int32), (8, 1))  # two answers: no proof
    answers[:2] = 5  # one answer, two rewards: tasks ids[0] and ids[1] are contradicted
    host.observe(ids, rewards, answers=answers)
    state = host.state
    assert isinstance(state, cx.CurriculumState)
    assert cx.samplers.contradicted_tasks(state).tolist() == sorted(ids[:2].tolist())
    rest = [i for i in range(8) if i not in ids[:2]]
    more = host.sample(8)
    host.observe(np.array(rest[:1], np.int32), np.array([[1.0, 0.0]], np.float32), answers=[[3, 3]])
    assert len(more) == 8
    assert not any(leaf.is_deleted() for leaf in jax.tree.leaves(state))
    assert cx.samplers.contradicted_tasks(state).tolist() == sorted(ids[:2].tolist())
    assert cx.samplers.contradicted_tasks(host.state).tolist() == sorted([*ids[:2], rest[0]])
    assert host.metrics()["sampler/noise/contradicted"] == 3
    # the other diagnostics: per task (learning_progress), per category (the bandit's own state)
    lp = cx.HostCurriculum(cx.curriculum(cx.samplers.learning_progress(8)))
    lp.observe(lp.sample(8), rewards)
    assert cx.samplers.noisy_tasks(lp.state).tolist() == []
    bandit = cx.HostCurriculum(
        cx.curriculum(cx.samplers.category_bandit(8, np.arange(8) % 2, reward="advantage_progress"))
    )
    bandit.observe(bandit.sample(8), rewards)
    assert cx.samplers.noisy_categories(bandit.state.sampler).tolist() == []


def test_every_seed_gets_its_own_key_and_seeds_below_2_32_keep_theirs():
    """With JAX's 64-bit mode off, ``jax.random.key`` keeps a seed's low 32 bits: 1 and
    2**32 + 1 (or -1 and 2**32 - 1) once gave one run. The key is now the seed's two 32-bit
    words (64-bit mode's key), and a seed in [0, 2**32) keeps the key it always had."""
    cur = cx.curriculum(cx.samplers.uniform(1000))

    def key_data(seed):
        return tuple(cx.HostCurriculum(cur, seed=seed).state_dict()["key"].tolist())

    def today(seed):  # HostCurriculum's key before: jax.random.key(seed) split once
        return tuple(jax.random.key_data(jax.random.split(jax.random.key(seed))[1]).tolist())

    for seed in (0, 1, 7, 2**31 - 1, 2**31, 2**32 - 1):
        assert key_data(seed) == today(seed)
    seeds = [0, 1, 2**32 + 1, 2**32 - 1, -1, 2**40, 2**63 - 1, -(2**63), -(2**31)]
    keys = [key_data(s) for s in seeds]
    assert len(set(keys)) == len(seeds)
    assert not jax.config.jax_enable_x64
    from curriculax._random import seed_key  # the helper the driver builds its key with

    for seed in (2**32 + 1, -1, -(2**63)):  # 64-bit mode's key, whichever mode is on
        with jax.enable_x64(True):
            want = jax.random.key_data(jax.random.key(seed)).tolist()
        hi, lo = (seed >> 32) % 2**32, seed % 2**32
        assert want == [hi, lo] == jax.random.key_data(seed_key(seed)).tolist()
    with pytest.raises(ValueError, match="seed must fit in a signed 64-bit int, got 1844674"):
        seed_key(2**64)


def test_a_non_strict_load_of_only_unknown_names_keeps_the_kept_draws():
    """A name this curriculum does not have (even one under ``state/sampler``) replaces no
    sampler state: the draws the sampler counted as handed out stay kept, and are listed
    missing. They were once dropped, and never handed out."""
    host = cx.HostCurriculum(cx.curriculum(cx.samplers.sequential(20, shuffle=False)))
    np.testing.assert_array_equal(host.sample(3), [0, 1, 2])
    assert host.num_kept == 5
    out = host.load_state_dict({"state/sampler/not_here": np.zeros(2, np.int32)}, strict=False)
    assert out.unexpected_keys == ["state/sampler/not_here"]
    assert "kept" in out.missing_keys and host.num_kept == 5
    np.testing.assert_array_equal(host.sample(3), [3, 4, 5])


def test_restore_refuses_a_checkpoint_saved_under_another_copy_map(tmp_path):
    """Per-task state of a pool that repeats tasks lives at each task's first entry: a state
    saved under one copy map (``entry_task``) must not land in a curriculum with another of
    the same size. A checkpoint written before the copy map was saved still restores."""
    import json

    n = 8
    by_four = np.array([0, 1, 2, 3, 0, 1, 2, 3])
    by_pairs = np.array([0, 0, 2, 2, 4, 4, 6, 6])

    def make(entry_task):
        sampler = cx.samplers.learnability(n, entry_task=entry_task)
        return cx.HostCurriculum(cx.curriculum(sampler), seed=0)

    saved = make(by_four)
    saved.observe(np.array([1, 3]), np.array([[1, 1, 1, 1], [0, 0, 0, 0]], np.float32))
    saved.save(tmp_path / "ckpt")
    for other in (make(by_pairs), make(None)):
        before = other.state_dict()
        with pytest.raises(ValueError, match=r"copy map \(the sampler's entry_task\) sha256 "):
            other.restore(tmp_path / "ckpt")
        for k, v in other.state_dict().items():
            np.testing.assert_array_equal(v, before[k], err_msg=k)
    same = make(by_four)
    same.restore(tmp_path / "ckpt")
    for k, v in saved.state_dict().items():
        np.testing.assert_array_equal(same.state_dict()[k], v, err_msg=k)
    with pytest.raises(ValueError, match=r"copy map .* sha256 \w+, this one none"):
        make(None).restore(tmp_path / "ckpt")
    # a checkpoint without the field (written before it was saved) is not checked for it
    meta_file = tmp_path / "ckpt" / "0" / "meta" / "metadata"
    meta = json.loads(meta_file.read_text())
    del meta["entry_task_sha256"]
    meta_file.write_text(json.dumps(meta))
    make(by_pairs).restore(tmp_path / "ckpt")
    # Maps that keep state in the same slots are one map: none and every entry its own task
    # (distinct_tasks of a pool without repeats), or two labellings of one grouping.
    pairs = [(None, np.arange(n)), (np.arange(n), None), (by_four, by_four + 4)]
    for i, (saved_map, restored_map) in enumerate(pairs):
        saved = make(saved_map)
        saved.observe(np.array([1]), np.array([[1, 0, 1, 1]], np.float32))
        saved.save(tmp_path / f"slots{i}")
        make(restored_map).restore(tmp_path / f"slots{i}")


def test_restore_of_another_kind_of_checkpoint_names_its_items(tmp_path):
    """A grain or tunix checkpoint folder holds other items (no ``meta``): a ValueError saying
    so, not Orbax's KeyError."""
    import orbax.checkpoint as ocp

    store = cx.checkpoint.CheckpointStore(tmp_path, item_names=("curriculum", "data"))
    store.save_items(
        0,
        curriculum=ocp.args.StandardSave({"x": np.zeros(2, np.float32)}),
        data=ocp.args.JsonSave({"draws": 0}),
    )
    store.close()
    host = cx.HostCurriculum(_curriculum())
    with pytest.raises(
        ValueError,
        match=r"holds the items \['curriculum', 'data'\], not a HostCurriculum checkpoint",
    ):
        host.restore(tmp_path)


def test_answers_wider_than_64_bits_keep_their_low_32_bits():
    """Python ints of any width (a 256-bit hash; one past int64 beside a negative one, which
    numpy reads as floats) give what their low 32 bits give, as 64-bit ids do: 2**64 - 1 and
    -1 are one answer."""
    big = 2**255 + 7
    low = big % 2**32
    ids = np.array([0, 1, 2])
    rewards = np.array([[1, 0], [1, 1], [1, 0]], np.float32)
    given = {  # groups 0 and 2: one answer (equal low bits), two rewards
        "lists": [[big, big + 2**32], [1, 2], [-1, 2**64 - 1]],
        "objects": np.array([[big, big + 2**32], [1, 2], [-1, 2**64 - 1]], dtype=object),
    }
    want = np.array([[low, low], [1, 2], [-1, -1]], np.int64)

    def marked(answers):
        host = cx.HostCurriculum(cx.robust_curriculum(4), seed=0)
        admitted = host.observe(ids, rewards, answers=answers)
        return admitted.tolist(), cx.samplers.contradicted_tasks(host.state).tolist()

    expected = marked(want)
    assert expected == ([False, True, False], [0, 2])
    for name, answers in given.items():
        assert marked(answers) == expected, name
