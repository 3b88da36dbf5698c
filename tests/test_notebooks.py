"""Every notebook under notebooks/ executes from top to bottom."""

import importlib.util
import os

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(
    os.path.join(ROOT, "notebooks", n)
    for n in os.listdir(os.path.join(ROOT, "notebooks"))
    if n.endswith(".ipynb")
)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_executes(path, monkeypatch):
    # The kernel's inline backend shows the plots; MPLBACKEND (Agg on a headless machine, say)
    # would override it and show none.
    monkeypatch.delenv("MPLBACKEND", raising=False)
    nb = nbformat.read(path, as_version=4)
    # From the notebook's own folder, as Jupyter runs it (not the repository root).
    here = os.path.dirname(path)
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": here}}
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    plots = "plt." in "".join(c.source for c in nb.cells if c.cell_type == "code")
    if plots and importlib.util.find_spec("matplotlib"):
        # The plots are shown in the notebook (a non-interactive backend showed none).
        assert any("image/png" in o.get("data", {}) for o in outputs)
