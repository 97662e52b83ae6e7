"""The Runs pane's overlay: one metric of several runs (or sweep arms) in one plotext chart.

Built on the Train pane's ``CachedPlot`` (loss_chart.py): the figure is replayed
from the kept data before each build and reused until the data or size change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import cast

from tui_lab.ui.widgets.cached_plot import CachedPlot, integer_ticks
from tui_lab.ui.widgets.chart_points import thin

# One fixed colour per run, in the order runs are first marked.
COLOURS = ("cyan", "orange", "green", "magenta", "red", "blue", "yellow", "white")
_RICH = {"orange": "orange1"}  # plotext's colour names that Rich spells otherwise


def rich_colour(colour: str) -> str:
    """A plotext colour name as Rich spells it (for table marks and the legend line)."""
    return _RICH.get(colour, colour)


METRIC_TITLES = {
    "train_loss": "train loss",
    "val_loss": "validation loss",
    "exact_match": "exact match",
    "train_accuracy": "training accuracy",
    "weight_norm": "weight norm",
}


@dataclass
class Series:
    """One line of the overlay: its legend, colour and points."""

    label: str
    colour: str
    xs: list[float] = field(default_factory=list)
    ys: list[float] = field(default_factory=list)


@dataclass
class Overlay:
    """What the chart shows: the series, the metric, the x axis and the scale."""

    series: list[Series] = field(default_factory=list)
    metric: str = "train_loss"
    by: str = "step"  # or "seconds"
    log_scale: bool = False


class OverlayChart(CachedPlot[Overlay]):
    """The marked runs' curves of one metric, a legend entry per run."""

    def draw(self, overlay: Overlay) -> None:
        """Set the chart's data; it is built at the next repaint."""
        self._set(overlay)

    @property
    def labels(self) -> list[str]:
        """The legends on show (the series that have points)."""
        overlay = self._data or Overlay()
        return [s.label for s in overlay.series if s.xs]

    def _figure(self) -> None:
        overlay: Overlay = self._data or Overlay()
        plt = self.plt
        scale = " (log scale)" if overlay.log_scale else ""
        plt.title(f"{METRIC_TITLES[overlay.metric]} by {overlay.by}{scale}")
        plt.xlabel(overlay.by)
        width = max(20, self.size.width * 2)
        drawn = False
        for s in overlay.series:
            points = [
                (x, y)
                for x, y in zip(s.xs, s.ys, strict=False)
                if math.isfinite(x) and math.isfinite(y) and (y > 0 or not overlay.log_scale)
            ]
            if not points:
                continue
            xs, ys = thin([p[0] for p in points], [p[1] for p in points], width)
            marker = "braille" if len(xs) > 30 else "dot"
            plt.plot(xs, ys, label=s.label, marker=marker, color=s.colour)
            drawn = True
        steps = [x for s in overlay.series for x in s.xs if overlay.by == "step"]
        if steps and max(steps) >= 1:
            plt.xticks(cast("list[float]", integer_ticks(int(max(steps)))))  # ints: plotext labels them as such
        if drawn and overlay.log_scale:
            plt.yscale("log")
        if not drawn:
            plt.xlim(0, 1)
            plt.ylim(0, 1)
