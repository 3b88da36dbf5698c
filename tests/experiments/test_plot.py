"""Plots are optional: without matplotlib a figure is skipped with a one-line note."""

import json
import sys

from experiments import _plot
from experiments.grpo import plot_curves


def _metrics(tmp_path):
    path = tmp_path / "metrics.jsonl"
    rows = [
        {"step": 1, "rollouts": 64, "batch/admission_rate": 0.5, "eval/held_out_success": 0.25},
        {"step": 2, "rollouts": 128, "batch/admission_rate": 0.75, "eval/held_out_success": 0.5},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_a_plot_without_matplotlib_is_skipped_with_a_note(tmp_path, monkeypatch, capsys):
    # A None entry in sys.modules makes `import matplotlib` raise ImportError, as if absent.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    out = tmp_path / "curves.png"
    plot_curves(_metrics(tmp_path), str(out), "title")
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "skipping curves.png: matplotlib is not installed (pip install 'curriculax[plot]')"
    ]
    assert not out.exists()
    assert _plot.pyplot("x") is None


def test_a_plot_with_matplotlib_writes_the_figure(tmp_path, capsys):
    out = tmp_path / "curves.png"
    plot_curves(_metrics(tmp_path), str(out), "title")
    assert out.stat().st_size > 0
    assert capsys.readouterr().err == ""
