"""Every docstring example (``>>>``) of the public API runs as written.

Each module's examples run as ``python -m doctest`` would run them: each docstring in a fresh
copy of its own module's globals, so an example imports every name its module does not define
(``from curriculax.testing import group_results``).

:data:`MODULES` lists the modules of the public API (what ``curriculax/__init__.py``,
``cx.samplers``, ``cx.gates`` and ``cx.credit`` export, docs/layout.md; the subpackages
behind the experiments, ``curriculax.engine``, ``.rl``, ``.tasks`` and ``.selfplay``; and the
conformance checks, ``curriculax.testing``) that hold examples: an example is run in the module
that defines its object, so ``cx.robust_curriculum``'s runs in ``curriculax._config`` and
``cx.tasks.mix32``'s in ``curriculax._hash``.
:func:`test_every_public_module_with_examples_is_listed` fails when a public name's module
gains examples without being listed. ``curriculax.testing``'s example (a whole conformance run,
most of this file's time) is marked slow; ``curriculax.simulated_pool``'s module example runs
in tests/test_simulated_pool.py. The subpackages' examples use tiny inputs (a one-block
transformer of width 16, a few tasks, groups of 2) and share their shapes, so their compiled
programs are reused across examples; ``curriculax.engine._sinks``' writes TensorBoard events and
an offline W&B run (nothing leaves the machine) to a temporary directory.

Not run here: ``curriculax.integrations`` (set-ups for a trainer: a model and a dataset the
reader supplies; the modules import clients the main venv does not install).
"""

from __future__ import annotations

import doctest
import importlib
import inspect

import pytest

import curriculax as cx
from curriculax import engine, rl, selfplay, tasks

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

MODULES = (
    "curriculax._config",
    "curriculax._curriculum",
    "curriculax._hash",
    "curriculax.credit",
    "curriculax.engine",
    "curriculax.engine._sinks",
    "curriculax.gates.advantage_range",
    "curriculax.gates.reward_consistency",
    "curriculax.host",
    "curriculax.rl",
    "curriculax.rl._grpo",
    "curriculax.rl._model",
    "curriculax.rl._sampling",
    "curriculax.rl._solver",
    "curriculax.rl._supervised",
    "curriculax.samplers.category_bandit",
    "curriculax.samplers.category_learnability",
    "curriculax.samplers.difficulty_pools",
    "curriculax.samplers.floor",
    "curriculax.samplers.hierarchical_learnability",
    "curriculax.samplers.learnability",
    "curriculax.samplers.learning_progress",
    "curriculax.samplers.reward_consistency",
    "curriculax.samplers.sequential",
    "curriculax.samplers.skip_zero_variance",
    "curriculax.samplers.uniform",
    "curriculax.selfplay._challenger",
    "curriculax.tasks",
    "curriculax.tasks._addition",
    "curriculax.tasks._generate",
    "curriculax.tasks._keys",
    "curriculax.tasks._pools",
    "curriculax.tasks._sequences",
    "curriculax.tasks._taskset",
    "curriculax.tasks._verify",
    "curriculax.tasks._vocab",
    "curriculax.testing",
)
SLOW = ("curriculax.testing",)


def _tests(name: str) -> list[doctest.DocTest]:
    module = importlib.import_module(name)
    # globs=None: each docstring gets a fresh copy of its own module's globals
    return [t for t in doctest.DocTestFinder().find(module, name) if t.examples]


def _public_modules() -> set[str]:
    """The modules that define the names the public namespaces export."""
    out = set()
    for namespace in (cx, cx.samplers, cx.gates, cx.credit, engine, rl, tasks, selfplay):
        out.add(namespace.__name__)
        names = getattr(namespace, "__all__", None) or [
            n for n in dir(namespace) if not n.startswith("_")
        ]
        for name in names:
            obj = getattr(namespace, name)
            module = obj.__name__ if inspect.ismodule(obj) else getattr(obj, "__module__", None)
            if isinstance(module, str) and module.split(".")[0] == "curriculax":
                out.add(module)
    return out


def test_every_public_module_with_examples_is_listed():
    missing = sorted(name for name in _public_modules() - set(MODULES) if _tests(name))
    assert not missing, f"modules of the public API with examples not in MODULES: {missing}"


@pytest.mark.parametrize(
    "name", [pytest.param(m, marks=pytest.mark.slow) if m in SLOW else m for m in MODULES]
)
def test_examples_run_as_written(name):
    tests = _tests(name)
    assert tests, f"{name} holds no examples; remove it from MODULES"
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report: list[str] = []
    try:
        for test in tests:
            runner.run(test, out=report.append)
    finally:
        if name == "curriculax.engine._sinks":
            # Its example starts an offline W&B run: end W&B's service, which otherwise lives
            # on with WANDB_SERVICE set for every later test's subprocesses.
            import wandb

            wandb.teardown()
    results = runner.summarize(verbose=False)
    assert results.failed == 0, (
        f"{results.failed} of {results.attempted} examples of {name} failed:\n" + "".join(report)
    )
