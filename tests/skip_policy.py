"""A pytest plugin: a run fails on a skip nobody allowed, so a green CI means the tests ran.

``--skips=allowed`` (``make test``) fails the run when a test or module is skipped for a
reason not listed in :data:`ALLOWED`; ``--skips=none`` (``make test-tunix``, ``make
test-trl``, whose venvs install the trainers) fails it on any skip, so a missing dependency
of tunix or TRL fails the step instead of skipping it. ``--skips=any`` (the default, for a
plain ``pytest`` on a developer's machine) only reports. Either way, run with ``-rs`` to see
every skip's reason. Expected failures (``xfail``) are not skips.
"""

from __future__ import annotations

import pytest

_CLI = "tests/reliability/test_cli_errors.py::"

ALLOWED = {
    # The trainer adapters' tests need their clients, which the main venv does not install;
    # `make test-tunix` and `make test-trl` run them with --skips=none.
    "tests/integrations/test_grain.py": "could not import 'grain'",
    "tests/integrations/test_trl.py": "could not import 'trl'",
    "tests/integrations/test_tunix.py": "could not import 'tunix'",
    # Capability skips of two tests, each allowed for that test and its own reason only:
    # mounting a tmpfs needs root, and `chattr +i` needs root and a file system with the flag
    # (not tmpfs or overlayfs). A non-root run (a developer's machine, most hosted CI runners)
    # skips both although nothing failed; a root run on ext4 runs both.
    _CLI + "test_a_full_tmpfs_stops_the_run_in_a_few_lines_naming_what_was_saved": (
        "cannot mount a tmpfs here ("  # then mount's own message
    ),
    _CLI + "test_an_immutable_run_directory_is_refused_in_a_sentence": (
        "chattr +i is not available here (the PermissionError case covers it)"
    ),
}
"""``{test file or test id: a substring of the skip reason}``: the skips ``--skips=allowed``
accepts. A file allows that skip for any of its tests (and for the file itself); a test id
(``file::test``, without parameters) for that test only."""

CHOICES = ("any", "allowed", "none")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("curriculax").addoption(
        "--skips",
        choices=CHOICES,
        default="any",
        help="fail the run on any skip (none), on a skip not in tests/skip_policy.py's "
        "ALLOWED (allowed), or never (any, the default)",
    )


def pytest_configure(config: pytest.Config) -> None:
    # xdist workers forward their reports to the controller, which applies the policy once.
    if config.getoption("skips") != "any" and not hasattr(config, "workerinput"):
        config.pluginmanager.register(SkipPolicy(config.getoption("skips")), "cx-skip-policy")


def reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The skip reason of a skipped report (``Skipped: `` removed)."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ")


def allowed(nodeid: str, why: str) -> bool:
    """Whether :data:`ALLOWED` lists this skip: its file or its test (parameters dropped),
    with a reason that contains the listed one."""
    file, test = nodeid.split("::")[0], nodeid.split("[")[0]
    return any(key in ALLOWED and ALLOWED[key] in why for key in (file, test))


def unexpected(skips: list[tuple[str, str]], policy: str) -> list[tuple[str, str]]:
    """The ``(nodeid, reason)`` skips that ``policy`` does not allow."""
    if policy == "any":
        return []
    if policy == "none":
        return list(skips)
    return [(nodeid, why) for nodeid, why in skips if not allowed(nodeid, why)]


class SkipPolicy:
    """Records every skip and fails the session on one the policy does not allow."""

    def __init__(self, policy: str):
        self.policy = policy
        self.skips: list[tuple[str, str]] = []

    def _record(self, report) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):
            self.skips.append((report.nodeid, reason(report)))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._record(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self._record(report)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if unexpected(self.skips, self.policy) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        bad = unexpected(self.skips, self.policy)
        if not bad:
            return
        terminalreporter.section(f"unexpected skips (--skips={self.policy})", red=True)
        for nodeid, why in bad:
            terminalreporter.line(f"{nodeid}: {why}")
        terminalreporter.line(
            "A skip fails this run: install what the test needs, or (if the skip is meant) "
            "list it in tests/skip_policy.py's ALLOWED."
        )
