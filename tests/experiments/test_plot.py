"""Plots are optional: without matplotlib a figure is skipped with a one-line note."""

import importlib
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
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    out = tmp_path / "curves.png"
    plot_curves(_metrics(tmp_path), str(out), "title")
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "skipping curves.png: matplotlib is not installed (pip install 'curriculax[plot]')"
    ]
    assert not out.exists()
    assert _plot.figure("x") is None


def test_a_plot_with_matplotlib_writes_the_figure(tmp_path, capsys):
    out = tmp_path / "curves.png"
    plot_curves(_metrics(tmp_path), str(out), "title")
    assert out.stat().st_size > 0
    assert capsys.readouterr().err == ""


def test_a_figure_leaves_the_backend_alone(tmp_path, monkeypatch):
    # a notebook's inline backend (or MPLBACKEND) was switched to Agg by the first study plot
    import matplotlib

    monkeypatch.setattr(matplotlib, "use", _no_switch)
    before = matplotlib.rcParams._get_backend_or_none()
    out = tmp_path / "curves.png"
    plot_curves(_metrics(tmp_path), str(out), "title")
    assert out.stat().st_size > 0
    assert matplotlib.rcParams._get_backend_or_none() == before


def _no_switch(*args, **kwargs):
    raise AssertionError("a figure switched matplotlib's backend")


def test_the_study_legend_is_under_the_panels_whatever_the_arm_names(tmp_path, monkeypatch):
    # inside the left panel, long arm names covered the curves and ran off the figure
    import dataclasses

    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from experiments.compare.config import CompareConfig

    compare_plot = importlib.import_module("experiments.compare.plot")

    names = [f"consistency(learnability, 25% unsolved floor, replay {i}) + gate" for i in range(5)]
    arms = tuple({"name": n, "curriculum": {"sampler": {"type": "uniform"}}} for n in names)
    config = dataclasses.replace(CompareConfig(), arms=arms, baseline=names[0])
    steps = config.generations // config.eval_every
    x = np.linspace(0, 1, steps + 1)[None].repeat(config.seeds, 0)
    curves = {n: {"rollouts": x, "held_out": np.full_like(x, 0.5)} for n in names}
    out = tmp_path / "compare.png"
    seen = {}
    real = compare_plot.figure

    def spy(*args, **kwargs):
        seen["fig"] = real(*args, **kwargs)
        return seen["fig"]

    monkeypatch.setattr(compare_plot, "figure", spy)
    compare_plot.plot(config, curves, str(out))
    fig = seen["fig"]
    (legend,) = fig.legends
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    box = legend.get_window_extent(renderer)
    assert box.y0 >= 0 and box.x0 >= 0 and box.x1 <= fig.bbox.width  # on the figure
    for ax in fig.axes:  # under every panel, its tick labels included
        assert box.y1 <= ax.get_tightbbox(renderer).y0 + 1
    assert out.stat().st_size > 0
