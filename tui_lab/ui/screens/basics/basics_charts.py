"""The basics screen's plotext charts: the schedule beside Noam, and entropy as d_k grows.

Both are the Train pane's ``CachedPlot``: built once per data or size change
(a plotext build costs ~13 ms), never on a mere repaint.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from tui_lab.ui.widgets.cached_plot import CachedPlot

if TYPE_CHECKING:
    from tui_lab.core.analysis.basics.basics_scaling import ScalingRow


class RateChart(CachedPlot):
    """One learning-rate curve over the run's steps."""

    def draw(self, title: str, steps: list[int], rates: list[float], colour: str) -> None:
        """Set the curve; it is built at the next repaint."""
        self._set((title, steps, rates, colour))

    def _figure(self) -> None:
        title, steps, rates, colour = self._data or ("", [], [], "green")
        plt = self.plt
        plt.title(title)
        plt.xlabel("step")
        if steps:
            plt.plot([float(s) for s in steps], rates, marker="braille", color=colour)
        else:
            plt.xlim(0, 1)
            plt.ylim(0, 1)


class EntropyChart(CachedPlot):
    """Mean softmax-row entropy against log2(d_k), unscaled and scaled (random q, k)."""

    def draw(self, rows: list[ScalingRow]) -> None:
        """Set the rows (``ScalingRow``s); built at the next repaint."""
        self._set(rows)

    def _figure(self) -> None:
        rows = self._data or []
        plt = self.plt
        plt.title("softmax entropy (nats), random q, k")
        plt.xlabel("log2 d_k")
        if rows:
            xs = [math.log2(r.d_k) for r in rows]
            plt.plot(xs, [r.entropy_scaled for r in rows], label="/sqrt(d_k)", marker="dot", color="cyan")
            plt.plot(xs, [r.entropy_raw for r in rows], label="unscaled", marker="dot", color="orange")
            plt.plot(xs, [r.entropy_max for r in rows], label="uniform", marker="dot", color="gray")
            plt.xticks(xs, [str(r.d_k) for r in rows])
            plt.ylim(0, max(r.entropy_max for r in rows) * 1.4)  # the legend above the lines
