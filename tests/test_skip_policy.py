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
