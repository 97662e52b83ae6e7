"""The chart beside the loss when the key cycles away from it: one line per parameter
group of its learning rate, gradient norm or update-to-weight ratio (optimizer_view.py)."""

from __future__ import annotations

from typing import cast

from tui_lab.ui.panes.train.optimizer_view import TITLES, GroupSnapshot, lines
from tui_lab.ui.widgets.cached_plot import CachedPlot, integer_ticks
from tui_lab.ui.widgets.chart_points import thin


class GroupChart(CachedPlot[tuple[str, GroupSnapshot]]):
    """Per-group lines of one figure; log scale where they span two decades."""

    def draw(self, view: str, data: GroupSnapshot) -> None:
        """Set the view and its data; built at the next repaint."""
        self._set((view, data))

    def _figure(self) -> None:
        view, data = self._data or ("lr", GroupSnapshot())
        plt = self.plt
        plt.title(TITLES.get(view, view))
        plt.xlabel("step")
        drawn = lines(view, data)
        values = [v for _, _, _, ys in drawn for v in ys if v > 0]
        for name, colour, xs, ys in drawn:
            xs, ys = thin(xs, ys, max(20, self.size.width * 2))
            plt.plot(xs, ys, label=name, marker="braille", color=colour)
        if values and max(values) / min(values) > 100 and all(v > 0 for _, _, _, ys in drawn for v in ys):
            plt.yscale("log")
        if data.steps:
            plt.xticks(cast("list[float]", integer_ticks(data.steps[-1])))
        else:
            plt.xlim(0, 1)
            plt.ylim(0, 1)
