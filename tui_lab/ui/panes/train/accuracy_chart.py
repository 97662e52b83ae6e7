"""The accuracy chart: training and held-out accuracy on one chart, the weight norm beside them.

What a grokking run is watched on: training accuracy (every step, from the
update's own batch) climbs to 100% while held-out accuracy (every
evaluation) stays low, then held-out accuracy jumps; the weight norm (right
axis) falls as weight decay pushes the memorised solution out.
"""

from __future__ import annotations

from typing import cast

from tui_lab.ui.panes.train.run_history import HistorySnapshot
from tui_lab.ui.widgets.cached_plot import CachedPlot, integer_ticks
from tui_lab.ui.widgets.chart_points import thin


def known(steps: list[int], values: list[float | None]) -> tuple[list[float], list[float]]:
    """The (step, value) points whose value is known."""
    pairs = [(float(s), v) for s, v in zip(steps, values, strict=False) if v is not None]
    return [s for s, _ in pairs], [v for _, v in pairs]


class AccuracyChart(CachedPlot[HistorySnapshot]):
    """Train accuracy per step and held-out accuracy per evaluation (left, 0-1); weight norm (right)."""

    def draw(self, data: HistorySnapshot) -> None:
        """Set the plot's data from a snapshot; it is built at the next repaint."""
        self._set(data)

    def _figure(self) -> None:
        data = self._data or HistorySnapshot()
        plt = self.plt
        plt.title("accuracy: train and held-out · weight norm (right)")
        plt.xlabel("step")
        width = max(20, self.size.width * 2)
        train_x, train_y = known(data.steps, data.train_accuracy)
        held_x, held_y = known(data.eval_steps, data.accuracy)
        norm_x, norm_y = known(data.steps, data.weight_norm)
        if train_x:
            xs, ys = thin(train_x, train_y, width)
            plt.plot(xs, ys, label="train acc", marker="braille", color="cyan")
        if held_x:
            plt.plot(held_x, held_y, label="held-out acc", marker="dot", color="orange")
        if train_x or held_x:
            plt.ylim(0, 1)
            plt.yticks([0, 0.25, 0.5, 0.75, 1.0], ["0", ".25", ".5", ".75", "1"])
        if norm_x:
            xs, ys = thin(norm_x, norm_y, width)
            plt.plot(xs, ys, label="weight norm", marker="braille", color="magenta", yside="right")
        last = int(max([*train_x, *held_x, 0.0]))
        if last:
            plt.xticks(cast("list[float]", integer_ticks(last)))  # ints: plotext labels them as such
        else:
            plt.xlim(0, 1)
            plt.ylim(0, 1)
