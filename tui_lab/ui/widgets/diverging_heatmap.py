"""A heatmap of signed values on a diverging scale: 0 in the middle, blue above, red below.

The attention ``Heatmap`` with another colour and legend: a cell's shade is its
size against the largest size on show (the scale is symmetric, so 0 is always
the middle), its colour its sign. Patching's grids are drawn with it.
"""

from __future__ import annotations

from rich.color import Color
from rich.style import Style
from rich.text import Text
from typing_extensions import Unpack

from tui_lab.core.decoding.attention_text import shade
from tui_lab.ui.widgets.heatmap import Heatmap
from tui_lab.ui.widgets.widget_options import WidgetOptions

ZERO = (70, 70, 80)  # a grey for values near 0
POSITIVE = (90, 150, 255)  # blue: towards the clean run
NEGATIVE = (240, 90, 70)  # red: away from it


def diverging_colour(value: float, limit: float) -> Color:
    """A colour from ZERO towards POSITIVE or NEGATIVE by ``|value| / limit`` (square root)."""
    t = min(abs(value) / limit, 1.0) ** 0.5 if limit > 0 else 0.0
    end = POSITIVE if value >= 0 else NEGATIVE
    return Color.from_rgb(*(lo + (hi - lo) * t for lo, hi in zip(ZERO, end, strict=True)))


def scale_limit(values: list[list[float]]) -> float:
    """The symmetric scale's end: the largest size among ``values`` (1 when all are 0)."""
    return max((abs(v) for row in values for v in row), default=0.0) or 1.0


class DivergingHeatmap(Heatmap):
    """Rows and columns as the caller names them (``axes``); arrows move the cursor."""

    def __init__(self, axes: tuple[str, str] = ("rows", "columns"), **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.AXES = axes
        self.limit = 1.0
        self.empty_text = "nothing patched yet"

    def set_matrix(self, weights: list[list[float]], rows: list[str], cols: list[str]) -> None:
        """Show signed ``weights`` (rows x cols) on a scale from -max|w| to +max|w|."""
        self.limit = scale_limit(weights)
        super().set_matrix(weights, rows, cols)

    def colour(self, value: float) -> Color:
        """Blue for a positive value, red for a negative one, brighter the larger."""
        return diverging_colour(value, self.limit)

    def cell_text(self, value: float, width: int) -> str:
        """The shade of the value's size on the symmetric scale."""
        if value == 0.0:
            return "·".center(width)
        return shade(abs(value) / self.limit) * width

    def cursor_text(self, value: float, width: int) -> str:
        """The value with its sign, as many digits as fit."""
        text = f"{value:+.2f}" if width >= 5 else f"{value:.1f}"
        return text[:width].center(width)

    def draw_legend(self, out: Text, margin: str) -> None:
        """-limit (red) ... 0 ... +limit (blue), after ``margin``."""
        out.append(f"{margin}{-self.limit:.2f} ", style="dim")
        for v in (-1.0, -0.6, -0.3, -0.1):
            out.append(shade(-v), style=Style(color=self.colour(v * self.limit)))
        out.append(" 0 ", style="dim")
        for v in (0.1, 0.3, 0.6, 1.0):
            out.append(shade(v), style=Style(color=self.colour(v * self.limit)))
        out.append(f" {self.limit:+.2f}  · = exactly 0", style="dim")
