"""Isolation and argument checks shared by the host and the compiled self-play paths."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from curriculax.engine import content_keys
from curriculax.selfplay import (
    PureChallenger,
    compiled_evolve,
    curriculum_evolve,
    host_challenger,
    row_keys,
)
from curriculax.selfplay.toy import (
    capped_solver,
    level_challenger,
    level_tasks,
    pure_bandit_spec,
    pure_level_bandit,
)
from curriculax.tasks import held_out_mask

SPEC = {"unused": jnp.int32(0)}


def _pools():
    """Seed tasks (levels 0-3, variants 0-5) and a disjoint held-out set (variants 6-7)."""
    held = level_tasks(levels=4, per_level=8)
    held = jax.tree.map(lambda x: x[np.asarray(held["variant"]) >= 6], held)
    return level_tasks(levels=4, per_level=6), held


def _copies_of_held_out(level_dtype, variant_dtype=jnp.int32):
    """A pure challenger whose every payload is a held-out task (variant 6 or 7), its leaves
    of the given dtypes."""

    def generate(spec, keys):
        level = jax.vmap(lambda k: jax.random.randint(k, (), 0, 4))(keys)
        variant = jax.vmap(lambda k: jax.random.randint(jax.random.fold_in(k, 1), (), 6, 8))(keys)
        return {"level": level.astype(level_dtype), "variant": variant.astype(variant_dtype)}

    def validate(payloads):
        return payloads, jnp.ones(payloads["level"].shape, bool)

    return PureChallenger(generate, validate, lambda spec, judged: spec)


KW = dict(rounds=1, steps_per_round=1, generated_per_round=6, frontier_share=0.5, batch_groups=4)


def _both_paths(pure, tasks, held):
    compiled = compiled_evolve(
        capped_solver(),
        tasks,
        challenger=pure,
        spec=SPEC,
        held_out_tasks=held,
        keys=jax.random.key(0)[None],
        **KW,
    )
    host = curriculum_evolve(
        capped_solver(),
        tasks,
        challenger=host_challenger(pure, tasks, 4 * 6),
        spec=SPEC,
        held_out_tasks=held,
        key=0,
        **KW,
    )
    return compiled, host.curriculum[0]


def test_a_held_out_task_generated_with_another_dtype_is_a_collision_on_both_paths():
    # i32 levels for an f32 pool: cast to the pool's layout before keying, as the host does.
    # (Before: the compiled path keyed the i32 rows, missed every copy and put them on the
    # frontier.)
    tasks, held = _pools()
    compiled, host = _both_paths(_copies_of_held_out(jnp.int32), tasks, held)
    assert (host.generated, host.collisions) == (0, 6)
    assert int(compiled.generated[0, 0]) == 0
    assert int(compiled.collisions[0, 0]) == 6
    assert int(compiled.state.curricula["train"].sampler.inserted[0]) == 0


def _numpy_defaults(tasks):
    """The tasks as numpy's default dtypes build them (float64 levels, int64 variants)."""
    return {
        "level": np.asarray(tasks["level"], np.float64),
        "variant": np.asarray(tasks["variant"], np.int64),
    }


@pytest.mark.parametrize("seed_in_f64", [False, True])
def test_a_held_out_set_in_numpys_default_dtypes_is_keyed_as_generated_tasks_are(seed_in_f64):
    # An f64/i64 held-out set beside an f32/i32 seed pool (host), or both pools f64/i64
    # (compiled: generated tasks are keyed in JAX's f32/i32): the pools are keyed in the layout
    # generated tasks are keyed in. (Before: host and compiled collisions 0, copies of held-out
    # tasks went on the frontier.)
    tasks, held = _pools()
    held = _numpy_defaults(held)
    if seed_in_f64:
        tasks = _numpy_defaults(tasks)
    compiled, host = _both_paths(_copies_of_held_out(jnp.float32), tasks, held)
    assert (host.generated, host.collisions) == (0, 6)
    assert np.asarray(compiled.collisions)[0].tolist() == [6]
    assert np.asarray(compiled.generated)[0].tolist() == [0]


@pytest.mark.parametrize("seed_in_f64", [False, True])
def test_a_held_out_set_in_another_dtype_or_layout_than_the_seed_pool_is_checked(seed_in_f64):
    # Copies of seed rows in numpy's default dtypes are seed tasks; another structure or row
    # shape is refused by name. (Before: both ran, the copies as held-out tasks.)
    tasks, _ = _pools()
    copies = _numpy_defaults(jax.tree.map(lambda x: x[:3], tasks))
    if seed_in_f64:
        tasks = _numpy_defaults(tasks)
    run = dict(rounds=1, steps_per_round=1, batch_groups=4)
    compiled = dict(challenger=None, spec=None, keys=jax.random.key(0)[None], **run)
    bad = [
        (copies, r"held-out task\(s\) are also seed tasks|share keys with seed_tasks"),
        ({"level": copies["level"]}, r"held_out_tasks is not in the seed pool's layout"),
        ({**copies, "level": copies["level"][:, None]}, r"held_out_tasks is not in .* shape"),
        ({**copies, "variant": copies["variant"] + 0.5}, r"held_out_tasks .* dtype float64"),
    ]
    for held, match in bad:
        with pytest.raises(ValueError, match=match):
            curriculum_evolve(capped_solver(), tasks, held_out_tasks=held, key=0, **run)
        with pytest.raises(ValueError, match=match):
            compiled_evolve(capped_solver(), tasks, held_out_tasks=held, **compiled)


def test_payloads_that_do_not_cast_to_the_pool_are_invalid_on_both_paths():
    # f32 variants for an i32 pool leaf: the host counts each payload invalid; the compiled
    # path (whose layout is static) counts all of them so, and warns at trace time.
    tasks, held = _pools()
    with pytest.warns(UserWarning, match="outside the pool's layout"):
        compiled, host = _both_paths(_copies_of_held_out(jnp.float32, jnp.float32), tasks, held)
    assert (host.generated, host.invalid, host.collisions) == (0, 6, 0)
    assert np.asarray(compiled.invalid)[0].tolist() == [6]
    assert np.asarray(compiled.generated)[0].tolist() == [0]


def test_row_keys_hash_a_bool_leaf_as_the_host_does():
    # (Before: bitcast bool -> uint8 raised inside row_keys, so a pool with a bool leaf could
    # not run on the compiled path.)
    tasks = {"flag": np.array([[True, False], [False, True]]), "level": np.float32([1, 2])}
    want = content_keys(tasks, bits=32)
    np.testing.assert_array_equal(np.asarray(row_keys(tasks)), want)
    np.testing.assert_array_equal(np.asarray(jax.jit(row_keys)(tasks)), want)


def test_content_duplicated_across_the_held_out_frac_split_is_refused():
    # Task 0 again under another seed key that falls on the other side of the split: the
    # solver would train on a copy of a held-out task. (Before: no error.)
    tasks = level_tasks(levels=4, per_level=10)
    ids = np.arange(40, dtype=np.uint32)
    held0 = bool(np.asarray(held_out_mask(ids[:1], 0.2))[0])
    cand = np.arange(1000, 5000, dtype=np.uint32)
    dup_id = cand[np.flatnonzero(np.asarray(held_out_mask(cand, 0.2)) != held0)[0]]
    pool = jax.tree.map(lambda x: np.concatenate([np.asarray(x), np.asarray(x)[:1]]), tasks)
    seed_keys = np.concatenate([ids, [dup_id]]).astype(np.uint32)
    held_row, train_row = (0, 40) if held0 else (40, 0)
    match = rf"held-out rows \[{held_row}\] and training rows \[{train_row}\]"
    with pytest.raises(ValueError, match=match):
        curriculum_evolve(
            capped_solver(),
            pool,
            seed_keys=seed_keys,
            held_out_frac=0.2,
            challenger=level_challenger(),
            spec={"level": 1.0},
            rounds=1,
            steps_per_round=1,
            generated_per_round=2,
            batch_groups=4,
            key=0,
        )


def test_a_positive_frontier_share_that_rounds_to_no_group_is_refused_on_both_paths():
    # round(0.25 * 2) == 0: generated tasks would never be attempted. (Before: silently.)
    tasks, held = _pools()
    kw = dict(rounds=1, steps_per_round=1, generated_per_round=4, frontier_share=0.25)
    with pytest.raises(ValueError, match=r"frontier_share=0.25 .* 2 groups \(batch_groups\)"):
        curriculum_evolve(
            capped_solver(),
            tasks,
            challenger=level_challenger(),
            spec={"level": 1.0},
            held_out_tasks=held,
            batch_groups=2,
            **kw,
        )
    with pytest.raises(ValueError, match=r"2 groups \(groups_per_generation\)"):
        curriculum_evolve(
            capped_solver(),
            tasks,
            challenger=level_challenger(),
            spec={"level": 1.0},
            held_out_tasks=held,
            batch_groups=4,
            groups_per_generation=2,
            **kw,
        )
    with pytest.raises(ValueError, match=r"frontier_share=0.25 .* \(batch_groups\)"):
        compiled_evolve(
            capped_solver(),
            tasks,
            challenger=_copies_of_held_out(jnp.float32),
            spec=SPEC,
            held_out_tasks=held,
            keys=jax.random.key(0)[None],
            batch_groups=2,
            **kw,
        )


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(rounds=0), r"rounds must be an int >= 1, got 0"),
        (dict(steps_per_round=-3), r"steps_per_round must be an int >= 1, got -3"),
        (dict(rounds=2.0), r"rounds must be an int >= 1, got 2.0"),
        (dict(generated_per_round=0), r"generated_per_round must be an int >= 1, got 0"),
        (dict(held_out_tasks="empty"), r"held_out_tasks is empty"),
        (dict(held_out_tasks="duplicated"), r"held_out_tasks"),
        # (was "held_out_tasks is empty", for an argument never given)
        (dict(held_out_tasks="missing"), r"held_out_tasks is required on the compiled path"),
        # (was "held_out_tasks share keys with seed_tasks", with no count or key)
        (dict(held_out_tasks="seed rows"), r"^2 held-out task\(s\) are also seed tasks \(keys"),
    ],
)
def test_compiled_evolve_refuses_what_the_host_path_refuses(bad, match):
    # (Before: every one of these ran, e.g. rounds=0 returned empty records.)
    tasks, held = _pools()
    held_out = {
        "empty": jax.tree.map(lambda x: x[:0], held),
        "duplicated": jax.tree.map(lambda x: jnp.concatenate([x, x[:1]]), held),
        "missing": None,
        "seed rows": jax.tree.map(lambda x, y: jnp.concatenate([x, y[:2]]), held, tasks),
    }
    kw = {**dict(rounds=1, steps_per_round=1, batch_groups=4), **bad}
    kw["held_out_tasks"] = held_out.get(kw.get("held_out_tasks"), held)
    pure = _copies_of_held_out(jnp.float32)
    with pytest.raises(ValueError, match=match):
        compiled_evolve(
            capped_solver(), tasks, challenger=pure, spec=SPEC, keys=jax.random.key(0)[None], **kw
        )
    # the host path refuses the same (no challenger; without held_out_tasks it splits)
    if "generated_per_round" not in bad and kw["held_out_tasks"] is not None:
        with pytest.raises(ValueError, match=match):
            curriculum_evolve(capped_solver(), tasks, key=0, **kw)


@pytest.mark.parametrize("num_keys", [19, 21])
@pytest.mark.parametrize("held_out", ["frac", "tasks"])
def test_seed_keys_of_another_length_than_the_seed_tasks_are_refused(num_keys, held_out):
    # (Before, on the held_out_frac path: one key short, the last seed task silently neither
    # trained nor was evaluated; one key too many failed with an IndexError.)
    tasks = level_tasks(levels=2, per_level=10)  # 20 tasks
    split = (
        dict(held_out_frac=0.3)
        if held_out == "frac"
        else dict(held_out_tasks=jax.tree.map(lambda x: x[:4] + 100, tasks))
    )
    with pytest.raises(ValueError, match=rf"seed_keys holds {num_keys} keys .* 20 seed tasks"):
        curriculum_evolve(
            capped_solver(),
            tasks,
            seed_keys=np.arange(1, num_keys + 1, dtype=np.uint32),
            rounds=1,
            steps_per_round=1,
            batch_groups=2,
            group_size=2,
            key=0,
            **split,
        )


def _challenger_of(rows):
    """A pure challenger whose every payload is one of ``rows`` (JAX's f32/i32, as generated)."""
    level = jnp.asarray(rows["level"], jnp.float32)
    variant = jnp.asarray(rows["variant"], jnp.int32)

    def generate(spec, keys):
        i = jax.vmap(lambda k: jax.random.randint(k, (), 0, level.shape[0]))(keys)
        return {"level": level[i], "variant": variant[i]}

    return PureChallenger(
        generate, lambda p: (p, jnp.ones(p["level"].shape, bool)), lambda spec, judged: spec
    )


def test_a_float32_copy_of_a_float64_held_out_task_is_a_collision_on_both_paths():
    # Levels float32 cannot hold (2.1): the host keyed the held-out set in the seed pool's
    # float64 and the generated copy as float64(float32(2.1)), missed every copy and trained
    # it (host generated 2, collisions 0; the compiled path: 0 and 6).
    tasks, held = _pools()
    tasks, held = _numpy_defaults(tasks), _numpy_defaults(held)
    tasks["level"], held["level"] = tasks["level"] + 0.1, held["level"] + 0.1  # in float64
    compiled, host = _both_paths(_challenger_of(held), tasks, held)
    assert (host.generated, host.collisions) == (0, 6)
    assert np.asarray(compiled.collisions)[0].tolist() == [6]
    assert np.asarray(compiled.generated)[0].tolist() == [0]


@pytest.mark.parametrize("offset", [0.0, 0.1])
def test_copies_of_the_held_out_split_of_a_numpy_pool_are_collisions(offset):
    # The held_out_frac split of an f64/i64 pool: its held-out keys were the float64 rows',
    # generated tasks were keyed in float32/int32, so no copy ever collided (generated 4,
    # collisions 0: held-out tasks trained).
    tasks = _numpy_defaults(level_tasks(levels=4, per_level=10))
    tasks["level"] = tasks["level"] + offset
    held = np.asarray(held_out_mask(content_keys(tasks, bits=32), 0.2))
    assert held.any()
    rows = {name: x[held] for name, x in tasks.items()}
    res = curriculum_evolve(
        capped_solver(),
        tasks,
        challenger=host_challenger(_challenger_of(rows), tasks, 4 * 6),
        spec=SPEC,
        key=0,
        **KW,
    )
    report = res.curriculum[0]
    assert (report.generated, report.collisions) == (0, 6)


def test_float64_rows_one_task_in_float32_on_both_sides_of_the_split_are_refused():
    # Two rows that differ below float32 precision are one task as the solver trains it: one
    # in each side of the split was a held-out task in the training pool.
    base = _numpy_defaults(level_tasks(levels=4, per_level=10))
    i = int(np.flatnonzero(np.asarray(held_out_mask(content_keys(base, bits=32), 0.2)))[0])
    for j in (j for j in range(len(base["level"])) if j != i):  # a training row once nudged
        tasks = {name: x.copy() for name, x in base.items()}
        tasks["level"][j] = np.nextafter(tasks["level"][i], np.inf)  # float32 rounds it back
        tasks["variant"][j] = tasks["variant"][i]
        if not np.asarray(held_out_mask(content_keys(tasks, bits=32), 0.2))[j]:
            break
    else:
        raise AssertionError("no training row stays in the training split once nudged")
    with pytest.raises(ValueError, match=r"have a copy in the training split"):
        curriculum_evolve(
            capped_solver(), tasks, key=0, rounds=1, steps_per_round=1, batch_groups=4
        )


def test_a_host_challenger_smaller_than_the_frontier_is_named():
    """capacity 2 for a frontier of 32 failed inside propose as numpy's "could not broadcast
    input array from shape (3,) into shape (2,)"."""
    tasks = level_tasks(levels=4, per_level=8)
    held = jax.tree.map(lambda x: x[:4] + 100, level_tasks(levels=1, per_level=4))
    pure = pure_level_bandit(max_level=4)
    with pytest.raises(ValueError, match=r"^host_challenger\(capacity=2\) got \d+ judged tasks"):
        curriculum_evolve(
            capped_solver(),
            tasks,
            challenger=host_challenger(pure, tasks, 2),
            spec=pure_bandit_spec(4),
            held_out_tasks=held,
            key=0,
            rounds=2,
            steps_per_round=4,
            generated_per_round=8,
            frontier_share=0.5,
            batch_groups=8,
            group_size=4,
            max_attempts=2,
        )
