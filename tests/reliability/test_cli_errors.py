"""Every error of an experiment script ends in a few lines that name the problem and what to
do, without a traceback (``--debug`` or ``CURRICULAX_DEBUG=1`` shows it): a config value of
the wrong type or out of range (named by its key, before anything is built), a run directory
that cannot be written, and a full disk (which file, and what was saved)."""

import errno
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest
import reliability_helpers as helpers

from curriculax.engine import _logging
from experiments import _cli, compare, grpo, quickstart

GIB = 2**30

BAD = [
    (quickstart, ["--set", "tasks_per_env=-5"], r"^tasks_per_env must be >= 1, got -5 \(tasks in"),
    (quickstart, ["--set", "group_size=0"], r"^group_size must be >= 1, got 0 \(rollouts per"),
    (
        quickstart,
        ["--set", "batch_groups=1000000000"],
        r"^this run needs about \d+\.\d GiB of memory for its engine state and task pools "
        r"\(batch_groups=1,000,000,000, groups_per_generation=8, group_size=8 size the state\), "
        r"more than the 16\.0 GiB available; use a smaller batch_groups",
    ),
    (
        quickstart,
        ["--set", "curriculum=abc"],
        r"^curriculum: expected a table \(in TOML, \{key = value, \.\.\.\}; with --set, set its "
        r"keys one by one, e\.g\. --set curriculum\.KEY=VALUE\), got 'abc'$",
    ),
    (quickstart, ["--set", "pools_weight=heavy"], r"^pools_weight: expected a number, got 'heavy'"),
    (quickstart, ["--set", "steady_weight=-1"], r"^steady_weight must be >= 0\.0, got -1\.0"),
    (quickstart, ["--set", "seed=1.5"], r"^seed: expected an int, got 1\.5"),
    (grpo, ["--set", "grpo.learning_rate=fast"], r"^grpo\.learning_rate: expected a number, got"),
    (grpo, ["--set", "grpo.learning_rate=-1e-3"], r"^grpo\.learning_rate must be > 0\.0, got"),
    (grpo, ["--set", "grpo.temperature=0"], r"^grpo\.temperature must be > 0\.0, got 0\.0"),
    (grpo, ["--set", "target=nan"], r"^target must be a finite number, got nan"),
    (grpo, ["--set", "task.held_out_frac=1.5"], r"^task\.held_out_frac must be in \(0\.0, 1\.0\)"),
    (grpo, ["--set", 'task.level_mass=[1, "a"]'], r"^task\.level_mass\[1\]: expected a number"),
    (grpo, ["--set", "model.width=2.5"], r"^model\.width: expected an int, got 2\.5"),
    (grpo, ["--set", "grpo.scale_by_std=3"], r"^grpo\.scale_by_std: expected bool, got 3"),
    (grpo, ["--set", "eval_rollouts=0"], r"^eval_rollouts must be >= 1, got 0"),
    # The nested library configs (model = rl.TransformerConfig, grpo = rl.GRPOConfig) are
    # checked by key before their own checks, which name no path; init and its base table too.
    (grpo, ["--set", "grpo.b1=1.5"], r"^grpo\.b1 must be in \[0\.0, 1\.0\), got 1\.5"),
    (grpo, ["--set", "model.width=0"], r"^model\.width must be >= 1, got 0 \(model width\)"),
    (grpo, ["--set", "init=abc"], r'^init must be "scratch", \{base = "NAME"\}'),
    (
        grpo,
        ["--set", 'init={base={learning_rate="fast"}}'],
        r"^init\.base\.learning_rate: expected a number, got 'fast'",
    ),
    (grpo, ["--set", "init={base={examples=0}}"], r"^init\.base\.examples must be >= 1, got 0"),
    (grpo, ["--set", 'init={base="nope"}'], r"^init: no base named 'nope'"),
    (compare, ["--set", "seeds=many"], r"^seeds: expected an int, got 'many'"),
    (
        compare,
        ["--set", "experiment.grpo.learning_rate=fast"],
        r"^experiment\.grpo\.learning_rate: expected a number, got 'fast'",
    ),
    (
        compare,
        ["--set", "experiment.grpo.temperature=0"],
        r"^experiment\.grpo\.temperature must be > 0\.0, got 0\.0",
    ),
    (compare, ["--set", "step0_samples=-1"], r"^step0_samples must be >= 0, got -1"),
]


@pytest.mark.parametrize(
    ("script", "args", "message"),
    BAD,
    ids=[f"{s.__name__.split('.')[-1]} {' '.join(a)}" for s, a, _ in BAD],
)
def test_a_bad_config_value_is_refused_by_key_before_anything_is_built(
    tmp_path, monkeypatch, script, args, message
):
    monkeypatch.setattr(_cli, "available_memory", lambda: 16 * GIB)
    with pytest.raises(ValueError) as e:
        flags = [] if script is compare else ["--steps", "1", "--no-progress"]  # a study's own
        script.main(["--run-dir", str(tmp_path / "run"), *flags, *args])
    assert re.search(message, str(e.value)), str(e.value)
    assert not (tmp_path / "run").exists()  # refused before the run directory was made


def _never(*_, **__):
    raise AssertionError("the script started building its run")


@pytest.mark.parametrize(
    ("script", "args", "message"),
    [
        (grpo, ["--steps", "-1"], r"^--steps must be >= 0, got -1 \(updates to train\)$"),
        (quickstart, ["--steps", "-3"], r"^--steps must be >= 0, got -3 \(updates to train\)$"),
    ],
)
def test_a_bad_steps_flag_is_refused_naming_the_flag(tmp_path, monkeypatch, script, args, message):
    """``--steps -1`` was refused as ``steps must be >= 0``: the config key, not the flag the
    value came from."""
    monkeypatch.setattr(grpo, "build", _never)
    with pytest.raises(ValueError, match=message):
        script.main(["--run-dir", str(tmp_path / "run"), "--no-progress", *args])
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("script", [quickstart, grpo])
@pytest.mark.parametrize("order", [["--resume", "--overwrite"], ["--overwrite", "--resume"]])
def test_resume_with_overwrite_is_refused_naming_both_flags(tmp_path, monkeypatch, script, order):
    """``--resume --overwrite`` resumed and dropped ``--overwrite`` without a word (``make run``
    passes ``--resume``, so ``make run ARGS=--overwrite`` did that), then advised starting over
    with ``--overwrite``. The two ask for opposite things: refused before anything is built."""
    monkeypatch.setattr(grpo, "build", _never)
    with pytest.raises(ValueError) as e:
        script.main(["--run-dir", str(tmp_path / "run"), "--steps", "1", "--no-progress", *order])
    assert re.match(r"--resume and --overwrite ask for opposite things", str(e.value)), e.value
    assert "make run RUN_ARGS=--overwrite" in str(e.value)
    assert not (tmp_path / "run").exists()


def _cli_run(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "experiments.quickstart", "--no-progress", *map(str, args)],
        cwd=helpers.REPO,
        env={**helpers.subprocess_env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _short_error(out: subprocess.CompletedProcess, first: str) -> None:
    lines = out.stderr.splitlines()
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr and len(lines) <= 3, out.stderr
    assert re.match(first, lines[0]), lines[0]


def test_the_cli_prints_a_config_error_in_two_lines_and_debug_shows_the_traceback(tmp_path):
    bad = ["--run-dir", tmp_path / "r", "--set", "grpo.learning_rate=fast"]
    _short_error(_cli_run(*bad), r"^error: --set grpo\.learning_rate: unknown key 'grpo'")
    out = _cli_run(*bad, "--set", "tasks_per_env=x")
    assert out.stderr.splitlines()[1] == "(--debug or CURRICULAX_DEBUG=1 shows the traceback)"
    for debug in (_cli_run(*bad, "--debug"), _cli_run(*bad, env={"CURRICULAX_DEBUG": "1"})):
        assert debug.returncode == 1 and "Traceback (most recent call last)" in debug.stderr


def test_a_run_directory_that_is_a_file_is_refused_in_a_sentence(tmp_path):
    path = tmp_path / "a-file"
    path.write_text("not a directory")
    _short_error(
        _cli_run("--run-dir", path, "--steps", 1),
        rf"^error: cannot use {re.escape(str(path))} as a run directory: \S+: a file stands "
        r"where a directory is needed; make it writable or choose another run directory",
    )


def test_an_immutable_run_directory_is_refused_in_a_sentence(tmp_path):
    """``chattr +i`` (refuses even root); skipped where the file system has no such flag."""
    run_dir = tmp_path / "immutable"
    run_dir.mkdir()
    if (
        shutil.which("chattr") is None
        or subprocess.run(["chattr", "+i", str(run_dir)], capture_output=True).returncode
    ):
        pytest.skip("chattr +i is not available here (the PermissionError case covers it)")
    try:
        out = _cli_run("--run-dir", run_dir, "--steps", 1)
    finally:
        subprocess.run(["chattr", "-i", str(run_dir)], check=True)
    _short_error(
        out,
        rf"^error: cannot use {re.escape(str(run_dir))} as a run directory: \S+/run\.lock: the "
        r"operation is not permitted",
    )


def test_a_permission_error_on_the_run_directory_is_refused_in_a_sentence(tmp_path, monkeypatch):
    from curriculax.engine import _rundir

    def denied(self):
        raise PermissionError(errno.EACCES, "Permission denied", self.path)

    monkeypatch.setattr(_rundir.RunLock, "acquire", denied)
    with pytest.raises(SystemExit) as e:
        _cli.entry(quickstart.main, ["--run-dir", str(tmp_path), "--steps", "1", "--no-progress"])
    assert e.value.code == (
        f"error: cannot use {tmp_path} as a run directory: {tmp_path}/run.lock: permission "
        "denied; make it writable or choose another run directory (--run-dir)"
    )


def test_a_full_disk_names_the_file_and_the_saved_checkpoint_and_the_run_resumes(
    tmp_path, monkeypatch
):
    """ENOSPC injected on the metrics line of update 7 (checkpoints every 4 updates): the run
    stops naming metrics.jsonl and checkpoint 4; once there is space, a resume ends where an
    uninterrupted run does."""
    run_dir, whole = tmp_path / "run", tmp_path / "whole"
    common = ["--steps", "12", "--checkpoint-every", "4", "--no-progress"]
    init = _logging.JsonlWriter.__init__

    class FullAt7:
        """A file whose disk fills up at the metrics line of update 7."""

        def __init__(self, file):
            self.file = file

        def write(self, text):
            if '"step":7,' in text:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # no file name
            return self.file.write(text)

        def __getattr__(self, name):
            return getattr(self.file, name)

    def opened(self, path):
        init(self, path)
        if path.endswith("metrics.jsonl"):
            self._file = FullAt7(self._file)

    monkeypatch.setattr(_logging.JsonlWriter, "__init__", opened)
    with pytest.raises(SystemExit) as e:
        _cli.entry(quickstart.main, ["--run-dir", str(run_dir), *common])
    assert e.value.code == (
        f"error: writing {run_dir}/metrics.jsonl: the disk is full. The run stopped at update 7; "
        "checkpoint 4 holds the newest saved state, and the logs are kept up to it (a resume "
        "continues from there). To continue, free space on the disk, then resume (--resume)."
    )
    monkeypatch.setattr(_logging.JsonlWriter, "__init__", init)
    quickstart.main(["--run-dir", str(run_dir), *common, "--resume"])
    quickstart.main(["--run-dir", str(whole), *common])
    got = helpers.without_time(helpers.read_jsonl(run_dir / "metrics.jsonl"))
    assert got == helpers.without_time(helpers.read_jsonl(whole / "metrics.jsonl"))


def test_a_full_tmpfs_stops_the_run_in_a_few_lines_naming_what_was_saved():
    """The quick start on a 1 MiB tmpfs (mounted here when allowed; skipped otherwise)."""
    if shutil.which("mount") is None:
        pytest.skip("cannot mount a tmpfs here (no mount command)")
    mount = tempfile.mkdtemp(prefix="cx-full-")
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mount], capture_output=True
    )
    if made.returncode:
        shutil.rmtree(mount)
        pytest.skip(f"cannot mount a tmpfs here ({made.stderr.decode().strip()})")
    try:
        run_dir = os.path.join(mount, "run")
        out = _cli_run("--run-dir", run_dir, "--steps", 400, "--checkpoint-every", 5)
        saved = sorted(
            int(n) for n in os.listdir(os.path.join(run_dir, "checkpoints")) if n.isdigit()
        )
    finally:
        subprocess.run(["umount", mount], check=True)
        shutil.rmtree(mount)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    errors = out.stderr.splitlines()
    assert len(errors) <= 2, out.stderr
    # Which write meets the full disk first varies: a log line or a checkpoint.
    assert re.match(
        rf"^error: (writing {re.escape(run_dir)}/\w+\.jsonl: the disk is full\. The run stopped "
        rf"|could not save checkpoint step \d+ in {re.escape(run_dir)}/checkpoints: .*No space)",
        errors[0],
    ), out.stderr
    assert f"checkpoint {saved[-1]} holds the newest saved state" in out.stderr, out.stderr
