"""Plotting is optional: ``matplotlib`` comes with the ``plot`` extra (and ``dev``)."""

from __future__ import annotations

import sys
from types import ModuleType


def pyplot(what: str) -> ModuleType | None:
    """``matplotlib.pyplot`` on the file-only Agg backend, or ``None`` without matplotlib.

    Args:
      what: the figure a caller is about to draw (``"curves.png"``), named in the note.

    Returns:
      The ``pyplot`` module, or ``None`` after printing one line to stderr saying the figure
      is skipped and how to get it; the caller then draws nothing and carries on.
    """
    try:
        import matplotlib
    except ImportError:
        print(
            f"skipping {what}: matplotlib is not installed (pip install 'curriculax[plot]')",
            file=sys.stderr,
        )
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
