"""Plotext charts of a run: train/validation loss (linear or log), accuracy and the learning rate;
in the loss's place, when a key cycles to them, the optimizer's groups (group_chart.py).

``PlotextPlot.render`` rebuilds the whole plot on every repaint (about 10 ms
each); these charts keep the last build and reuse it until their data or
size change, so switching panes or moving focus does not pay for it again.

plotext's build transforms the figure's stored data in place (``yscale("log")``
takes log10 of it), so building the same figure twice -- after a resize, say --
would take the log of a log. Each chart therefore keeps its data and replays
the whole figure from it right before every build.
"""

from __future__ import annotations

import time
from typing import cast

from textual.app import ComposeResult
from textual.containers import Vertical
from typing_extensions import Unpack

from tui_lab.ui.panes.train.run_history import HistorySnapshot, RunHistory
from tui_lab.ui.widgets.cached_plot import CachedPlot, integer_ticks
from tui_lab.ui.widgets.chart_points import thin
from tui_lab.ui.widgets.widget_options import WidgetOptions

CHART_SECONDS = 0.5  # while training, the loss chart is rebuilt at most twice a second
LR_REDRAW_SECONDS = 1.0  # and the small learning-rate chart at most once


class LossChart(CachedPlot[tuple[HistorySnapshot, bool]]):
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
            plt.xticks(cast("list[float]", integer_ticks(last)))  # ints: plotext labels them as such
        if not data.steps and not data.eval_steps:
            plt.xlim(0, 1)
            plt.ylim(0, 1)


class LrChart(CachedPlot[HistorySnapshot]):
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


class RunCharts(Vertical):
    """The loss chart over the learning-rate chart, drawn from a run's history.

    A plotext build costs about 13 ms: while a run trains, ``draw`` rebuilds
    the loss chart at most twice a second and the learning-rate chart once,
    and not at all while the history has not changed.
    """

    def __init__(self, history: RunHistory, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.history = history
        self.accuracy = False  # the accuracy chart on show (a, or a full-batch run)
        self.log_scale: bool | None = None  # None: log once the loss spans two decades
        self.drawn = -1  # the history version on show
        self._loss_at = 0.0
        self._lr_at = 0.0
        self.view = "loss"  # or a figure of the optimizer's groups (optimizer_view.VIEWS)

    def compose(self) -> ComposeResult:
        """The loss chart above the learning-rate chart."""
        from tui_lab.ui.panes.train.accuracy_chart import AccuracyChart
        from tui_lab.ui.panes.train.group_chart import GroupChart

        yield LossChart(id="loss-chart")
        groups = GroupChart(id="group-chart")
        groups.display = False
        yield groups
        chart = AccuracyChart(id="accuracy-chart")
        chart.display = self.accuracy
        yield chart
        yield LrChart(id="lr-chart")

    def show_accuracy(self, on: bool) -> None:
        """Show or hide the accuracy chart (train and held-out accuracy, weight norm)."""
        from tui_lab.ui.panes.train.accuracy_chart import AccuracyChart

        self.accuracy = on
        if self.is_mounted:
            self.query_one(AccuracyChart).display = on
            self.draw(force=True)

    def cycle_view(self) -> str:
        """Show the next of loss, learning rate, gradient norm and update ratio; returns it."""
        from tui_lab.ui.panes.train.group_chart import GroupChart
        from tui_lab.ui.panes.train.optimizer_view import next_view

        self.view = next_view(self.view)
        self.query_one(LossChart).display = self.view == "loss"
        self.query_one(GroupChart).display = self.view != "loss"
        self.draw(force=True)
        return self.view

    def use_log(self, data: HistorySnapshot) -> bool:
        """Log scale: as the user set it with ``l``, else once the loss spans two decades."""
        if self.log_scale is not None:
            return self.log_scale
        values = [v for v in (*data.loss, *data.val_loss) if v > 0]
        return bool(values) and max(values) / min(values) > 100

    def toggle_log(self) -> None:
        """Switch the loss chart between linear and log scale, and show it at once."""
        self.log_scale = not self.use_log(self.history.snapshot())
        self.draw(force=True)

    def draw(self, training: bool = False, force: bool = False) -> bool:
        """Rebuild the charts if the history changed (throttled while ``training``); True if drawn."""
        now = time.monotonic()
        if not force and (
            self.history.version == self.drawn
            or (training and now - self._loss_at < CHART_SECONDS)
        ):
            return False
        self.drawn = self.history.version
        self._loss_at = now
        data = self.history.snapshot()
        if self.view == "loss":
            self.query_one(LossChart).draw(data, self.use_log(data))
        else:
            from tui_lab.ui.panes.train.group_chart import GroupChart

            self.query_one(GroupChart).draw(self.view, self.history.groups.snapshot())
        if self.accuracy:
            from tui_lab.ui.panes.train.accuracy_chart import AccuracyChart

            self.query_one(AccuracyChart).draw(data)
        if force or not training or now - self._lr_at >= LR_REDRAW_SECONDS:
            self._lr_at = now
            self.query_one(LrChart).draw(data)
        return True
