"""The skip policy fails a run on a skip nobody allowed (a pytest run in a subprocess)."""

import os
import subprocess
import sys
import textwrap

import pytest

from tests.skip_policy import ALLOWED, unexpected

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(tmp_path, *args):
    """pytest over one file that skips (a missing module) and one that passes."""
    (tmp_path / "test_skips.py").write_text(
        textwrap.dedent(
            """
            import pytest

            def test_passes():
                assert True

            def test_needs_a_module():
                pytest.importorskip("a_module_that_is_not_installed")

            @pytest.mark.xfail(reason="expected")
            def test_expected_failure():
                assert False
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.skip_policy", "-p", "no:cacheprovider",
         "-p", "no:xdist", "-rs", str(tmp_path / "test_skips.py"), *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("policy", ["none", "allowed"])
def test_an_unexpected_skip_fails_the_run_and_is_named(tmp_path, policy):
    out = _run(tmp_path, f"--skips={policy}")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "unexpected skips" in out.stdout
    assert "test_needs_a_module: could not import 'a_module_that_is_not_installed'" in out.stdout
    assert "1 passed, 1 skipped, 1 xfailed" in out.stdout  # the xfail is not a skip


def test_without_a_policy_a_skip_passes(tmp_path):
    out = _run(tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "unexpected skips" not in out.stdout


def test_allowed_skips_are_matched_by_file_and_reason():
    file, why = next(iter(ALLOWED.items()))
    skips = [(file, f"{why}: No module named x"), (f"{file}::test_a", "another reason")]
    assert unexpected(skips, "allowed") == [(f"{file}::test_a", "another reason")]
    assert unexpected(skips, "none") == skips
    assert unexpected(skips, "any") == []
    assert unexpected([("tests/test_other.py", why)], "allowed") == [("tests/test_other.py", why)]


def test_a_test_id_allows_its_reason_for_that_test_only():
    test = next(key for key in ALLOWED if "::" in key)
    file, why = test.split("::")[0], ALLOWED[test]
    other = f"{file}::test_another_one"
    skips = [(test, f"{why} and more"), (f"{test}[param]", why), (test, "another reason")]
    skips += [(other, why), (file, why)]
    assert unexpected(skips, "allowed") == [(test, "another reason"), (other, why), (file, why)]
    assert unexpected(skips, "none") == skips


def test_every_allowed_skip_is_one_its_file_can_give():
    """A reason that drifted from the test's ``pytest.skip`` would silently stop matching."""
    for key, why in ALLOWED.items():
        file, _, test = key.partition("::")
        if file.startswith("tests/integrations/"):  # importorskip's reason, not in the source
            continue
        with open(os.path.join(ROOT, file)) as f:
            source = f.read()
        assert f"def {test}(" in source, key
        body = source[source.index(f"def {test}(") :].split("\ndef ")[0]
        assert why in body, (key, why)


def test_a_run_without_root_skips_the_capability_tests_and_passes(tmp_path):
    """`make test`'s flags where `mount` and `chattr +i` fail (as for a non-root user): the
    tmpfs and immutable-directory tests skip, with reasons the policy allows."""
    for tool, message in [
        ("mount", "mount: /tmp/x: must be superuser to use mount."),
        ("chattr", "chattr: Operation not supported while setting flags"),
    ]:
        (tmp_path / tool).write_text(f"#!/bin/sh\necho '{message}' >&2\nexit 1\n")
        (tmp_path / tool).chmod(0o755)
    tests = [key for key in ALLOWED if key.startswith("tests/reliability/test_cli_errors.py::")]
    env = {**os.environ, "PYTHONPATH": ROOT, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-rs",
         "--skips=allowed", *tests],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 skipped" in out.stdout and "unexpected skips" not in out.stdout, out.stdout
