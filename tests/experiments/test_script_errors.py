"""The scripts with their own flags end a bad value or an unknown flag in a sentence naming it,
without a traceback and before anything is built (docs/reliability.md, "Errors end in a
sentence"); the self-play demo's dry run refuses a flag it would ignore; the main job's
``--help`` gives the ``--steps`` default the run uses."""

import os
import re
import subprocess
import sys

import pytest

from experiments import _cli, grpo, pretrain, simulated_pool
from experiments._builders import MAIN_JOB
from experiments.selfplay import compiled_speed, grpo_selfplay, selfplay_demo

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _never(*_, **__):
    raise AssertionError("the script started its work despite a bad flag")


@pytest.fixture(autouse=True)
def _nothing_runs(monkeypatch):
    """A refused flag must stop the script before its work starts: the work is replaced by a
    failure, so a flag checked too late (or not at all) fails the test in a moment."""
    monkeypatch.setattr(selfplay_demo, "dry_run", _never)
    monkeypatch.setattr(compiled_speed, "curriculum_evolve", _never)
    monkeypatch.setattr(compiled_speed, "compiled_evolve", _never)
    monkeypatch.setattr(simulated_pool, "noisy", _never)
    monkeypatch.setattr(simulated_pool, "arms", _never)
    monkeypatch.setattr(grpo_selfplay, "evolve_arm", _never)
    monkeypatch.setattr(pretrain, "load_base", _never)


BAD = [
    (selfplay_demo, ["--dry-run", "--rounds", "-1"], r"^--rounds must be >= 1, got -1 \(self"),
    (selfplay_demo, ["--dry-run", "--rounds", "0"], r"^--rounds must be >= 1, got 0"),
    (selfplay_demo, ["--dry-run", "--steps", "0"], r"^--steps must be >= 1, got 0"),
    (selfplay_demo, ["--dry-run", "--seed", "-3"], r"^--seed must be an int in \[0, 2\*\*32\)"),
    (selfplay_demo, ["--dry-run", "--devices", "0"], r"^--devices must be >= 1, got 0"),
    (grpo_selfplay, ["--rounds", "0"], r"^--rounds must be >= 1, got 0 \(self-play rounds\)"),
    (grpo_selfplay, ["--steps", "-2"], r"^--steps must be >= 1, got -2 \(updates per round\)"),
    (compiled_speed, ["--seeds", "0"], r"^--seeds must be >= 1, got 0 \(seeds of the compiled"),
    (compiled_speed, ["--host-seeds", "0"], r"^--host-seeds must be >= 1, got 0"),
    (
        simulated_pool,
        ["--quick", "--noisy", "2"],
        r"^--noisy must be a share in \[0, 0\.7\], got 2\.0 \(the coin-flip share",
    ),
    (simulated_pool, ["--noisy", "-0.1"], r"^--noisy must be a share in \[0, 0\.7\]"),
    (simulated_pool, ["--noisy", "nan"], r"^--noisy must be a share in \[0, 0\.7\], got nan"),
    (simulated_pool, ["--seeds", "0"], r"^--seeds must be >= 1, got 0"),
    (simulated_pool, ["--tasks", "0"], r"^--tasks must be >= 1, got 0"),
    (simulated_pool, ["--steps", "100", "--switch", "100"], r"^--switch must lie in \[0, --steps"),
]


@pytest.mark.parametrize(
    ("script", "argv", "message"),
    BAD,
    ids=[f"{s.__name__.split('.')[-1]} {' '.join(a)}" for s, a, _ in BAD],
)
def test_a_bad_flag_value_is_refused_by_name_before_anything_runs(tmp_path, script, argv, message):
    takes_run_dir = script in (selfplay_demo, grpo_selfplay)
    run_dir = ["--run-dir", str(tmp_path / "r")] if takes_run_dir else []
    with pytest.raises(ValueError) as e:
        script.main([*argv, *run_dir])
    assert re.search(message, str(e.value)), str(e.value)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--per-category", "-1"], r"^--per-category must be >= 0, got -1 \(tasks probed per"),
        (["--samples", "0"], r"^--samples must be >= 1, got 0 \(rollouts per task"),
    ],
)
def test_pretrain_refuses_a_bad_count_by_its_flag_before_it_builds_the_base(argv, message):
    """``--per-category -1`` and ``--samples 0`` were refused only after the base was built (21
    s), and ``--per-category`` was named ``per_category``."""
    with pytest.raises(ValueError, match=message):
        pretrain.main(argv)


COMMANDS = [
    (
        "experiments.selfplay.selfplay_demo",
        ["--dry-run", "--rounds", "-1"],
        r"^error: --rounds must be >= 1, got -1",
    ),
    ("experiments.selfplay.compiled_speed", ["--seeds", "0"], r"^error: --seeds must be >= 1"),
    (
        "experiments.simulated_pool",
        ["--quick", "--noisy", "2"],
        r"^error: --noisy must be a share in \[0, 0\.7\], got 2\.0",
    ),
    (
        "experiments.quickstart",
        ["--coordinator", "10.0.0.1:1234", "--no-progress"],
        r"^error: --coordinator only means something with --num-processes > 1",
    ),
]


@pytest.mark.parametrize(
    ("module", "argv", "first"), COMMANDS, ids=[m.rsplit(".", 1)[-1] for m, _, _ in COMMANDS]
)
def test_the_command_ends_in_an_error_line_without_a_traceback(tmp_path, module, argv, first):
    run_dir = ["--run-dir", str(tmp_path / "r")] if module.endswith("quickstart") else []
    out = subprocess.run(
        [sys.executable, "-m", module, *argv, *run_dir],
        cwd=tmp_path,  # a script that wrote its default run directory would write it here
        env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": ROOT},
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = out.stderr.splitlines()
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr and 1 <= len(lines) <= 2, out.stderr
    assert re.match(first, lines[0]), lines[0]
    if len(lines) == 2:
        assert lines[1] == f"(--debug or {_cli.DEBUG_ENV}=1 shows the traceback)", lines[1]
    assert os.listdir(tmp_path) == [], os.listdir(tmp_path)


@pytest.mark.parametrize(
    "extra, named",
    [
        (["--resume"], "--resume"),
        (["--set", "rounds=2"], "--set rounds=2"),
        (["--config", "x.toml", "--wandb"], "--config x.toml --wandb"),
    ],
)
def test_the_dry_run_refuses_a_flag_it_does_not_take(tmp_path, capsys, extra, named):
    # Ignored, --resume would rerun the demo from scratch over the run directory.
    with pytest.raises(SystemExit) as e:
        selfplay_demo.main(["--dry-run", "--run-dir", str(tmp_path / "r"), *extra])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"error: unrecognized arguments: {named} (--dry-run takes" in err, err
    assert not (tmp_path / "r").exists()


def test_the_grpo_mode_of_the_demo_refuses_a_flag_it_does_not_take(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        selfplay_demo.main(["--resume", "--run-dir", str(tmp_path / "r")])
    assert e.value.code == 2
    assert "error: unrecognized arguments: --resume" in capsys.readouterr().err


def test_the_main_job_help_gives_the_steps_default_a_run_uses(capsys):
    with pytest.raises(SystemExit) as e:
        grpo.main(["--help"])
    assert e.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps the help
    assert f"--steps STEPS updates to train (default {MAIN_JOB.steps})" in text, text
    parser = _cli.base_parser("x", steps=MAIN_JOB.steps, run_dir="unused")
    config = _cli.load_config(type(MAIN_JOB), parser.parse_args([]), defaults=MAIN_JOB)
    assert config.steps == MAIN_JOB.steps  # what a run without --steps trains


def test_a_flag_given_beside_quick_wins_over_its_smaller_default():
    """--quick set tasks, num, steps, switch and seeds whatever the command line said
    (``--quick --seeds 4`` ran 2 seeds)."""
    args = simulated_pool._parse(["--quick", "--seeds", "4", "--steps", "60"])
    assert (args.seeds, args.steps, args.tasks, args.switch) == (4, 60, 512, 40)
    full = simulated_pool._parse([])
    assert (full.tasks, full.num, full.steps, full.switch, full.seeds) == (4096, 64, 400, 150, 8)


def test_a_trainer_script_checks_its_flags_and_keeps_its_seed_and_earlier_runs(tmp_path):
    parser = _cli.core_parser("a trainer", steps=6, run_dir=str(tmp_path / "run"))

    def read(*flags, resuming=False):
        return _cli.trainer_steps_and_seed(parser.parse_args(list(flags)), resuming=resuming)

    for flags, key in ((["--steps", "0"], "--steps"), (["--seed", "-1"], "--seed")):
        with pytest.raises(ValueError, match=key):
            read(*flags)
    assert not (tmp_path / "run").exists()  # refused before anything is written
    assert read("--seed", "3") == (6, 3)
    assert read(resuming=True) == (6, 3)  # the stored seed
    with pytest.raises(SystemExit, match="started with seed 3"):
        read("--seed", "4", resuming=True)
    # a fresh start into a directory of an earlier run's outputs deletes nothing
    (tmp_path / "run" / "metrics.jsonl").write_text('{"step": 1}\n')
    with pytest.raises(SystemExit, match=r"earlier run's metrics\.jsonl"):
        read()
    assert (tmp_path / "run" / "metrics.jsonl").read_text() == '{"step": 1}\n'


@pytest.mark.parametrize(
    "module",
    ["experiments.compare.cli", "experiments.selfplay.study", "experiments.selfplay.study_speed"],
)
def test_a_study_scripts_help_leaves_out_the_flags_it_refuses(module, capsys):
    """--help listed --steps ("updates to train (default 0)"), --wandb, ... which each of
    these scripts refuses when given."""
    import importlib

    main = importlib.import_module(module).main
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    shown = capsys.readouterr().out
    for flag in ("--steps", "--allow-partial", "--checkpoint-every", "--tensorboard", "--wandb"):
        assert flag not in shown, flag
    assert "--run-dir" in shown and "--config" in shown
    with pytest.raises(SystemExit, match="--steps not used by this script"):
        main(["--steps", "5"])


@pytest.mark.parametrize(
    ("module", "missing", "install"),
    [
        ("experiments.trl_curriculum", "trl", "make .venv-trl/.installed"),
        ("experiments.tunix_curriculum", "tunix", "make .venv-tunix/.installed"),
    ],
)
def test_a_trainer_script_says_what_to_install(module, missing, install, tmp_path, monkeypatch):
    """It said "ModuleNotFoundError: No module named 'transformers'" (the tunix one after
    writing RUN_DIR/seed.json)."""
    import importlib
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == missing else real(name, *a)
    )
    main = importlib.import_module(module).main
    with pytest.raises(SystemExit, match=rf"error: this script needs .*{missing}.*: `{install}`"):
        main(["--run-dir", str(tmp_path / "run")])
    assert not (tmp_path / "run").exists()
