"""Plotext charts of a run: train/validation loss (linear or log) and the learning rate."""

from __future__ import annotations

from textual_plotext import PlotextPlot

from tui_lab.ui.history import HistorySnapshot, thin


class LossChart(PlotextPlot):
    """Train loss per step and validation loss per evaluation."""

    def draw(self, data: HistorySnapshot, log_scale: bool) -> None:
        """Rebuild the plot from a snapshot (about 10 ms: call it a few times a second)."""
        plt = self.plt
        plt.clear_figure()
        plt.title("loss" + (" (log scale)" if log_scale else ""))
        plt.xlabel("step")
        width = max(20, self.size.width * 2)
        if data.steps:
            xs, ys = thin(data.steps, data.loss, width)
            plt.plot(xs, ys, label="train", marker="braille", color="cyan")
        if data.eval_steps:
            plt.plot(
                [float(s) for s in data.eval_steps], data.val_loss,
                label="val", marker="dot", color="orange",
            )
        if log_scale and (data.steps or data.eval_steps):
            plt.yscale("log")
        if not data.steps and not data.eval_steps:
            plt.xlim(0, 1)
            plt.ylim(0, 1)
        self.refresh()


class LrChart(PlotextPlot):
    """The learning-rate schedule as it was applied, step by step."""

    def draw(self, data: HistorySnapshot) -> None:
        """Rebuild the small learning-rate plot."""
        plt = self.plt
        plt.clear_figure()
        plt.title("learning rate")
        if data.steps:
            xs, ys = thin(data.steps, data.lr, max(20, self.size.width * 2))
            plt.plot(xs, ys, marker="braille", color="green")
        else:
            plt.xlim(0, 1)
            plt.ylim(0, 1)
        plt.xticks([])
        self.refresh()
