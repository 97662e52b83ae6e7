"""Plotext charts of a run: train/validation loss (linear or log) and the learning rate.

``PlotextPlot.render`` rebuilds the whole plot on every repaint (about 10 ms
each); these charts keep the last build and reuse it until their data or
size change, so switching panes or moving focus does not pay for it again.

plotext's build transforms the figure's stored data in place (``yscale("log")``
takes log10 of it), so building the same figure twice -- after a resize, say --
would take the log of a log. Each chart therefore keeps its data and replays
the whole figure from it right before every build.
"""

from __future__ import annotations

from typing import Any

from textual_plotext import PlotextPlot

from tui_lab.ui.history import HistorySnapshot, thin


def integer_ticks(last: int, count: int = 5) -> list[int]:
    """Up to ``count`` whole-number step ticks from 0 to ``last``."""
    if last <= 0:
        return [0]
    step = max(1, round(last / (count - 1)))
    ticks = list(range(0, last + 1, step))
    if ticks[-1] != last and last - ticks[-1] > step // 2:
        ticks.append(last)
    return ticks


class CachedPlot(PlotextPlot):
    """A plot whose built text is reused until ``draw`` changes the data.

    Subclasses set up the figure in ``_figure`` from ``self._data``; it runs
    afresh before every build, never on a figure that was built already.
    """

    _version = 0
    _cached: tuple[Any, Any] | None = None
    _data: Any = None

    def render(self) -> Any:
        """The plot, rebuilt only when the data, size or theme changed."""
        key = (self._version, self.size, self.app.theme)
        if self._cached is None or self._cached[0] != key:
            self.plt.clear_figure()
            self._figure()
            self._cached = (key, super().render())
        return self._cached[1]

    def _figure(self) -> None:
        raise NotImplementedError

    def _set(self, data: Any) -> None:
        """Keep the data to plot and rebuild at the next repaint."""
        self._data = data
        self._version += 1
        self.refresh()


class LossChart(CachedPlot):
    """Train loss per step and validation loss per evaluation."""

    def draw(self, data: HistorySnapshot, log_scale: bool) -> None:
        """Set the plot's data from a snapshot; it is built at the next repaint."""
        self._set((data, log_scale))

    def _figure(self) -> None:
        data, log_scale = self._data or (HistorySnapshot(), False)
        plt = self.plt
        plt.title("loss" + (" (log scale)" if log_scale else ""))
        plt.xlabel("step")
        width = max(20, self.size.width * 2)
        if data.steps:
            xs, ys = thin(data.steps, data.loss, width)
            plt.plot(xs, ys, label="train", marker="braille", color="cyan")
        if data.eval_steps:
            plt.plot(
                [float(s) for s in data.eval_steps],
                data.val_loss,
                label="val",
                marker="dot",
                color="orange",
            )
        if log_scale and (data.steps or data.eval_steps):
            plt.yscale("log")
        last = max(
            data.steps[-1] if data.steps else 0, data.eval_steps[-1] if data.eval_steps else 0
        )
        if last:
            plt.xticks(integer_ticks(last))
        if not data.steps and not data.eval_steps:
            plt.xlim(0, 1)
            plt.ylim(0, 1)


class LrChart(CachedPlot):
    """The learning-rate schedule as it was applied, step by step."""

    def draw(self, data: HistorySnapshot) -> None:
        """Set the small learning-rate plot's data."""
        self._set(data)

    def _figure(self) -> None:
        data = self._data or HistorySnapshot()
        plt = self.plt
        plt.title("learning rate")
        if data.steps:
            xs, ys = thin(data.steps, data.lr, max(20, self.size.width * 2))
            plt.plot(xs, ys, marker="braille", color="green")
        else:
            plt.xlim(0, 1)
            plt.ylim(0, 1)
        plt.xticks([])
