"""The reversal study on the compiled round loop: the pure challengers draw the host's tasks,
a compiled arm gives the host arm's record on one seed, and the frozen-solver null holds."""

import io
import json
import pathlib
from contextlib import redirect_stdout

import jax
import numpy as np
import pytest

from curriculax import tasks as T
from curriculax.selfplay import RoundReport, compiled_evolve, judged_direction, level_direction
from curriculax.selfplay._compiled import Judged
from experiments import _cli
from experiments._builders import family_spec, make_solver
from experiments.selfplay import selfplay_demo, study
from experiments.selfplay._challengers import (
    pure_arm_challenger,
    pure_sequence_challenger,
    sequence_challenger,
)

ROOT = pathlib.Path(__file__).parents[2]
PATH_FIELDS = {"path", "seconds", "challenger_seconds", "program_seconds", "program_seeds"}
# Reversal over 4 symbols, lengths 1-3, a pool of 4 tasks per length (every length-1 task),
# held out: 4 tasks of lengths 2-3 (so generated length-2 tasks collide with them often).
TINY = [
    "experiment.task.num_levels=3",
    "experiment.task.held_out_per_level=4",
    "experiment.model.width=16",
    "experiment.model.depth=1",
    "experiment.model.heads=2",
    "experiment.batch_groups=4",
    "experiment.groups_per_generation=4",
    "rounds=3",
    "steps_per_round=6",
    "generated_per_round=4",
    "max_attempts=2",
]


def _config(extra=()):
    parser = _cli.base_parser("t", steps=0, run_dir="runs/x")
    args = [x for t in [*TINY, *extra] for x in ("--set", t)]
    return _cli.load_config(study.StudyConfig, parser.parse_args(args))


def test_the_pure_reversal_challengers_draw_the_host_challengers_tasks():
    spec = T.ReversalSpec(num_symbols=4, num_levels=6)
    key = jax.random.key(7)
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(np.arange(12))
    values = np.array([0.0, 0.3, -0.1, 0.2, 0.0, 0.05], np.float32)
    for bandit, host_spec, pure_spec in [
        (None, {"level": 3}, {"level": np.int32(3)}),
        ({}, {"level": 0, "values": tuple(values.tolist())}, {"level": 0, "values": values}),
    ]:
        host = sequence_challenger(spec, bandit=bandit)
        pure = pure_sequence_challenger(spec, bandit=bandit)
        assert pure.retry  # it draws like the host's one-task challenger
        tasks, ok = jax.jit(lambda s, k, p=pure: p.validate(p.generate(s, k)))(pure_spec, keys)
        assert np.asarray(ok).all()
        for i in range(12):
            want = host.validate(host.generate(host_spec, keys[i]))
            got = jax.tree.map(lambda x, i=i: np.asarray(x)[i], tasks)
            for a, b in zip(want, got):
                np.testing.assert_array_equal(np.asarray(a), b)
        levels = set(np.asarray(tasks.level).tolist())
        assert levels == {3} if bandit is None else len(levels) > 2


def test_judged_direction_is_level_direction():
    rng = np.random.default_rng(0)
    for _ in range(200):
        generated = int(rng.integers(0, 9))
        count = int(rng.integers(0, 6))
        learned = int(rng.integers(0, count + 1))
        easy = int(rng.integers(0, 9))
        r0 = float(rng.choice([-0.2, 0.0, 0.1]))
        report = RoundReport(0, None, generated, 0, 0, learned, count - learned, easy, r0, 0, 0, 0)
        mask = np.arange(8) < count
        judged = Judged(
            None, np.zeros(8, np.float32), np.arange(8) < learned, mask, count, easy, generated, r0
        )
        assert int(judged_direction(judged)) == level_direction(report)


def test_a_compiled_study_arm_gives_the_host_arms_records_on_one_seed():
    config = _config()
    host = study.run_one(config, "bandit", 3)
    compiled = study.run_compiled(config, "bandit", [3])[0]
    assert (host["path"], compiled["path"]) == ("host", "compiled")
    assert compiled["challenger_seconds"] is None and compiled["program_seeds"] == 1
    assert set(compiled) - PATH_FIELDS == set(host) - PATH_FIELDS
    for field in sorted(set(host) - PATH_FIELDS):
        assert compiled[field] == host[field], field
    # The judge, the bandit's values and the held-out filter had work to agree on.
    assert host["stuck"] + host["learned"] > 0 and host["collisions"] > 0
    assert any(v != 0 for v in host["level_values"])
    assert len(host["held_out"]) == 3 and host["rollouts"][-1] == 3 * 6 * 4 * 8


def test_the_frozen_solver_null_holds_on_the_compiled_reversal_path():
    config = _config()
    exp = config.experiment
    spec = family_spec(exp.task)
    train, held = study._scenario_tasks(config)
    base = make_solver(exp, spec)
    frozen = base._replace(update=lambda s, b, k: (s, base.update(s, b, k)[1]))  # never learns
    out = compiled_evolve(
        frozen,
        train,
        **dict(zip(("challenger", "spec"), pure_arm_challenger("random generator", spec, 0))),
        held_out_tasks=held,
        keys=jax.random.split(jax.random.key(1), 4),
        rounds=4,
        steps_per_round=12,
        generated_per_round=24,
        frontier_share=0.5,
        max_attempts=2,
        batch_groups=8,
        sampler={"type": "sequential"},
    )
    judged = np.asarray(out.learned) + np.asarray(out.stuck)
    total = int(judged.sum())
    assert total >= 300, total
    assert int(np.asarray(out.learned).sum()) / total <= 0.05
    assert abs(float((np.asarray(out.r0) * judged).sum()) / total) <= 0.05
    assert np.asarray(out.collisions).sum() > 0  # held-out tasks generated were rejected


def test_the_dry_run_demo_output_is_unchanged(tmp_path):
    buf = io.StringIO()
    with redirect_stdout(buf):
        selfplay_demo.main(["--dry-run", "--run-dir", str(tmp_path)])
    recorded = (ROOT / "docs" / "selfplay" / "dry_run.txt").read_text()
    body = "".join(recorded.splitlines(keepends=True)[3:])  # after its 3 header lines
    assert buf.getvalue() == body


def test_the_study_runs_compiled_and_refuses_the_learned_arm(tmp_path, capsys):
    args = ["--run-dir", str(tmp_path), "--seeds", "2", "--compiled"]
    args += [x for t in [*TINY, "rounds=2"] for x in ("--set", t)]
    study.main([*args, "--arms", "self-play"])
    # The progress line moved inside the program: 2 seeds x 2 rounds.
    assert "self-play [########################] 4/4 rounds (seeds x rounds) | " in (
        capsys.readouterr().err
    )
    runs = json.loads((tmp_path / "summary.json").read_text())["runs"]
    assert sorted((r["arm"], r["seed"]) for r in runs) == [("self-play", 0), ("self-play", 1)]
    assert {r["path"] for r in runs} == {"compiled"}
    # The old level rule (judged_direction in the program) gives the host rule's record too.
    host = study.run_one(_config(["rounds=2"]), "self-play", 1)
    compiled = next(r for r in runs if r["seed"] == 1)
    for field in sorted(set(host) - PATH_FIELDS):
        assert compiled[field] == host[field], field
    assert "not separable" in (tmp_path / "study.md").read_text()
    try:
        study.main([*args, "--arms", "learned", "--overwrite"])
    except SystemExit as e:
        assert "host path only" in str(e)
    else:
        raise AssertionError("the learned arm ran on the compiled path")


def test_a_compiled_arm_keys_its_seeds_as_the_host_path_does(monkeypatch):
    """Seeds cast to uint32 failed past 2**32 (and below 0), which the host path runs with
    seed_key; in range, the keys are jax.random.key(seed), the host's."""
    import curriculax.selfplay as sp
    from curriculax._random import seed_key

    seen = {}

    def capture(*args, keys, **kwargs):
        seen["keys"] = keys
        raise StopIteration

    monkeypatch.setattr(sp, "compiled_evolve", capture)
    for seeds in ([2**32 - 1, 2**32], [-1, 0], [3, 4]):
        with pytest.raises(StopIteration):  # it reached the program with its keys
            study.run_compiled(_config(), "self-play", seeds)
        want = np.stack([jax.random.key_data(seed_key(s)) for s in seeds])
        assert np.array_equal(jax.random.key_data(seen["keys"]), want), seeds
    plain = np.stack([jax.random.key_data(jax.random.key(s)) for s in (3, 4)])
    assert np.array_equal(jax.random.key_data(seen["keys"]), plain)  # the stored runs' keys
