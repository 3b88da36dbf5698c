"""An arm kept in ``RUN_DIR/arms`` is reused only by the code that ran it: a change to a
sampler keys anew the arms that draw with it, a change to shared code every arm; comments,
docstrings and layout do not count."""

import os

import pytest

from experiments import compare
from experiments.compare import code
from tests.experiments.test_compare import STUDY
from tests.experiments.test_compare_guards import _study, fake_runs  # noqa: F401 (fixture)

ARMS = {
    "uniform": ({"sampler": {"type": "uniform"}}, False),
    "learnability": ({"sampler": {"type": "learnability"}}, False),
    "robust": ({"preset": "robust"}, False),  # hierarchical learnability ranks as learnability
    "bandit": ({"sampler": {"type": "category_bandit"}}, False),
    "oracle": ({"gates": {}}, True),  # draws with learnability's ranked_draw
}


def _digests():
    return {n: code.arm_code_digest(c, oracle=o) for n, (c, o) in ARMS.items()}


def _edit(monkeypatch, suffix):
    """As if the file whose path ends in ``suffix`` had changed (in a new process)."""
    real = code._file_digest
    monkeypatch.setattr(
        code, "_file_digest", lambda path: "edited" if path.endswith(suffix) else real(path)
    )
    code._shared_digest.cache_clear()
    monkeypatch.setattr(code, "_shared_digest", code._shared_digest.__wrapped__)


def test_a_change_to_one_sampler_keys_only_the_arms_that_run_it(monkeypatch):
    before = _digests()
    assert len(set(before.values())) == len(ARMS)
    _edit(monkeypatch, os.path.join("samplers", "learnability.py"))
    after = _digests()
    assert {n for n in ARMS if after[n] != before[n]} == {"learnability", "robust", "oracle"}


def test_a_change_to_shared_code_keys_every_arm(monkeypatch):
    before = _digests()
    _edit(monkeypatch, os.path.join("engine", "_engine.py"))
    after = _digests()
    assert all(after[n] != before[n] for n in ARMS)


SAMPLER = '''"""A user's sampler."""


def factory(num_tasks):
    """Uniform, as a user's module."""
    import curriculax as cx

    return cx.samplers.uniform(num_tasks)
'''


def test_an_arm_kept_by_other_code_runs_again(tmp_path, fake_runs, monkeypatch):  # noqa: F811
    """An arm kept before its sampler changed was reused in the same run directory."""
    module = tmp_path / "user_sampler_for_code_test.py"
    module.write_text(SAMPLER)
    monkeypatch.syspath_prepend(str(tmp_path))
    text = STUDY.replace(
        '{ type = "curriculax.samplers:sequential", shuffle = false }',
        '{ type = "user_sampler_for_code_test:factory" }',
    )
    assert text != STUDY
    study = _study(tmp_path, text)
    compare.main(study)
    assert fake_runs == ["sequential, unshuffled", "oracle"]

    # An edit while the process runs: its digest stands for the code it imported.
    module.write_text(SAMPLER.replace("uniform(num_tasks)", "uniform(num_tasks + 0)"))
    compare.main(study)
    assert fake_runs == ["sequential, unshuffled", "oracle"]

    def edit(text):  # and run the study again, in a new process as it were
        module.write_text(text)
        code._file_digest.cache_clear()
        code._shared_digest.cache_clear()

    # A docstring, a comment and the layout: the kept arm is reused.
    edit(
        SAMPLER.replace("Uniform, as a user's module.", "Uniform.").replace(
            "    return", "    # the pool's size\n    return  "
        )
    )
    compare.main(study)
    assert fake_runs == ["sequential, unshuffled", "oracle"]
    # The code: it runs again (the kept file stays, under its own key).
    edit(SAMPLER.replace("uniform(num_tasks)", "uniform(num_tasks + 0)"))
    compare.main(study)
    assert fake_runs == ["sequential, unshuffled", "oracle", "sequential, unshuffled"]
    assert len(os.listdir(tmp_path / "out" / "arms")) == 3


def test_an_unknown_type_is_refused_as_building_it_would_be():
    with pytest.raises(ValueError, match="unknown sampler type 'nope'"):
        code.arm_code_digest({"sampler": {"type": "nope"}})


def test_files_python_would_not_import_do_not_stop_the_digest(tmp_path, monkeypatch):
    """An editor's lock file (a link to nowhere, '.#x.py') or a half-written module in the
    tree stopped every study run at its first digest."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("x = 1\n")
    os.symlink(tmp_path / "nowhere", package / ".#a.py")
    (package / "wip.py").write_text("def f(:\n")
    fake = type("M", (), {"__file__": str(package / "__init__.py")})
    monkeypatch.setattr(code, "PACKAGES", (fake,))
    code._shared_digest.cache_clear()
    try:
        first = code._shared_digest.__wrapped__()
        (package / "wip.py").write_text("def f(:\n    pass\n")
        code._file_digest.cache_clear()
        assert code._shared_digest.__wrapped__() != first  # the unparsed text still counts
    finally:
        code._shared_digest.cache_clear()
        code._file_digest.cache_clear()


@pytest.mark.parametrize("package", ["samplers", "gates"])
def test_a_change_to_a_per_arm_package_init_keys_every_arm(monkeypatch, package):
    """``curriculax/samplers/__init__.py`` (and gates') counted for no arm, yet the study reads
    what it binds (``cx.samplers.noisy_tasks``) for every arm: an edit reused stale arms."""
    before = _digests()
    _edit(monkeypatch, os.path.join(package, "__init__.py"))
    after = _digests()
    assert all(after[n] != before[n] for n in ARMS)
