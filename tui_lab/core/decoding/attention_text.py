"""Attention weights as plain-text heatmaps: the shade table the lab and `--attention` share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the lab imports shade() before torch has loaded
    from torch import Tensor

SHADES = " ░▒▓█"


def shade(value: float) -> str:
    """One character for a weight in [0, 1]: blank for ~0, full block for ~1."""
    v = min(max(value, 0.0), 1.0)
    return SHADES[min(len(SHADES) - 1, int(v * (len(SHADES) - 1) + 0.5))]


def render_text(weights: Tensor, queries: Sequence[str], keys: Sequence[str]) -> str:
    """Rows are queries, columns keys; two characters per cell so cells look square."""
    width = max((len(q) for q in queries), default=1)
    header = " " * (width + 1) + "".join(k[:2].ljust(2) for k in keys)
    lines = [header]
    for i, q in enumerate(queries):
        row = "".join(shade(float(weights[i, j])) * 2 for j in range(len(keys)))
        lines.append(f"{q.rjust(width)} {row}")
    return "\n".join(lines)
