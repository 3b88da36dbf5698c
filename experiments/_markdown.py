"""One Markdown table helper for the studies and the benchmarks.

Example:
  >>> print(table(["arm", "ms"], [["uniform", "1.20"]], align="lr"))
  | arm | ms |
  |---|---:|
  | uniform | 1.20 |
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def cell(text: object) -> str:
    """``text`` safe inside a Markdown table cell (an arm named ``(|advantage|)`` splits none)."""
    return str(text).replace("|", "\\|")


def row(cells: Iterable[object]) -> str:
    """One table line, ``| a | b |``, each cell made safe by :func:`cell`."""
    return "| " + " | ".join(cell(c) for c in cells) + " |"


def rule(align: str) -> str:
    """The line under the header: ``l`` a left-aligned column (``---``), ``r`` a right-aligned
    one (``---:``)."""
    bad = sorted(set(align) - {"l", "r"})
    if bad:
        raise ValueError(f"align takes 'l' and 'r' per column, got {align!r}")
    return "|" + "".join("---|" if a == "l" else "---:|" for a in align)


def table(header: Sequence[object], rows: Iterable[Sequence[object]], align: str = "") -> str:
    """A Markdown table: ``header``, then ``rows`` (each as long as the header).

    Args:
      header: the column titles.
      rows: the cells of each line, as text or anything ``str`` formats.
      align: one letter per column, ``l`` or ``r`` (default: the first column left, the others
        right, as numbers are).

    Returns:
      The lines joined by newlines, with no trailing newline.
    """
    align = align or "l" + "r" * (len(header) - 1)
    if len(align) != len(header):
        raise ValueError(f"align gives {len(align)} columns, the header {len(header)}")
    lines = [row(header), rule(align)]
    for i, cells in enumerate(rows):
        cells = list(cells)
        if len(cells) != len(header):
            raise ValueError(f"row {i} has {len(cells)} cells, the header {len(header)}")
        lines.append(row(cells))
    return "\n".join(lines)
