"""The Train pane's views beyond the loss: the accuracy chart (a) and the Fourier screen (f).

A mixin of ``TrainPane``. The accuracy chart (training and held-out accuracy,
the weight norm) is on by itself for a full-batch run, the grokking setting;
``a`` shows or hides it for any run. ``f`` opens the embedding's spectrum
for a modular-addition run, with time travel through its history.
"""

from __future__ import annotations

from typing import Any

from tui_lab.ui.panes.train.loss_chart import RunCharts
from tui_lab.ui.panes.train.train_parts import TrainParts


class TrainViews(TrainParts):
    """``a`` and ``f`` on the Train pane."""

    _accuracy_for: Any = None  # the config the chart's default was last set from

    def sync_views(self) -> None:
        """A new config: the accuracy chart shows by itself for full-batch training."""
        config = self.run.config if self.run is not None else self.config
        if config is self._accuracy_for:
            return
        self._accuracy_for = config
        self.query_one(RunCharts).show_accuracy(bool(config.train.full_batch))
        self.refresh_bindings()  # f is offered for modular-addition only

    def offers_fourier(self) -> bool:
        """f is on the footer (and acts) for a modular-addition run or config."""
        config = self.run.config if self.run is not None else self.config
        return bool(config.task.name == "modular-addition")

    def action_toggle_accuracy(self) -> None:
        """Show or hide the accuracy chart (train and held-out accuracy, weight norm)."""
        charts = self.query_one(RunCharts)
        charts.show_accuracy(not charts.accuracy)

    def action_fourier(self) -> None:
        """The embedding's power per frequency for a modular-addition run, through its history."""
        run = self.run
        if run is None or self.host.state.core is None:
            self.notify("train this preset first (space), or open a run (o)", severity="warning", timeout=3)
            return
        from tui_lab.ui.screens.fourier import FourierScreen

        self.app.push_screen(FourierScreen(run, self.run_dir, self.host.state.travel, self.host.training_active))
