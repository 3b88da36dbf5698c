"""Plotting is optional: ``matplotlib`` comes with the ``plot`` extra (and ``dev``)."""

from __future__ import annotations

import sys
from typing import Any


def figure(what: str, **kwargs: Any) -> Any:
    """A ``matplotlib.figure.Figure``, made without pyplot, or ``None`` without matplotlib.

    Without pyplot no backend is chosen or switched (a notebook's inline display and an
    ``MPLBACKEND`` stay as they are) and nothing keeps the figure alive: draw on
    ``fig.subplots(...)`` and write it with ``fig.savefig``.

    Args:
      what: the figure a caller is about to draw (``"curves.png"``), named in the note.
      **kwargs: passed to ``Figure`` (``figsize``, ``layout``).

    Returns:
      The figure, or ``None`` after printing one line to stderr saying the figure is skipped
      and how to get it; the caller then draws nothing and carries on.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError:
        print(
            f"skipping {what}: matplotlib is not installed (pip install 'curriculax[plot]')",
            file=sys.stderr,
        )
        return None
    return Figure(**kwargs)
