"""The Patch pane's edges view: the top edges as bars, the faithfulness curve (plotext), the
final circuit's faithfulness over the run's history, and the known-circuit check.

The pane shows it with ``g`` and asks for the check with ``k``; the widget runs its jobs
(``edges_workers.py``) in its own worker group, with a progress bar, and ``escape`` (the
pane's) cancels them. The charts are ``CachedPlot``s: rebuilt only when their data change,
never on a repaint, so a run of progress messages costs no plotext build.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import ProgressBar, Static

from tui_lab.ui.panes.patch import edges_workers as workers
from tui_lab.ui.panes.patch.edges_view import (
    EdgesView,
    curve_points,
    edges_text,
    history_points,
    summary_text,
)
from tui_lab.ui.widgets.cached_plot import CachedPlot

if TYPE_CHECKING:
    from tui_lab.core.opening.model_handle import ModelHandle
    from tui_lab.core.opening.model_in_hand import ModelInHand
    from tui_lab.ui.panes.patch.patch_jobs import PairSource

Points = tuple[str, str, list[float], list[float]]  # title, x label, xs, ys


class CurveChart(CachedPlot[Points]):
    """One recovered-fraction curve (0: the corrupted run, 1: the clean run)."""

    def draw(self, title: str, xlabel: str, xs: list[float], ys: list[float]) -> None:
        """Set the curve; it is built at the next repaint."""
        self._set((title, xlabel, xs, ys))

    def _figure(self) -> None:
        title, xlabel, xs, ys = self._data or ("", "", [], [])
        plt = self.plt
        plt.title(title)
        plt.xlabel(xlabel)
        if xs:
            plt.plot(xs, ys, marker="braille", color="cyan")
            plt.hline(1.0, "gray")
            plt.ylim(min(0.0, *ys) - 0.05, max(1.0, *ys) + 0.05)
        else:
            plt.xlim(0, 1)
            plt.ylim(0, 1)


class EdgesPanel(Vertical):
    """The edges view; the pane calls ``start``, ``check`` and ``cancel``."""

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self.view = EdgesView()
        self.handle: ModelInHand | None = None
        self.running = False
        self._check_next = False  # k pressed before the edges were scored: check once they are
        self._history_next: Path | None = None  # the run whose history follows the check

    def compose(self) -> ComposeResult:
        with Horizontal(id="edges-body"):
            with VerticalScroll(id="edges-list-scroll"):
                yield Static(id="edges-list")
            with Vertical(id="edges-charts"):
                yield CurveChart(id="edges-curve")
                yield CurveChart(id="edges-history")
        yield Static(id="edges-summary")
        yield ProgressBar(total=1, show_eta=False, id="edges-progress")
        yield Static(id="edges-status")

    def on_mount(self) -> None:
        """Nothing scored yet: say so."""
        self.query_one("#edges-progress", ProgressBar).display = False
        self.redraw()

    # ---- what the pane asks --------------------------------------------------------

    def start(self, run: ModelHandle, source: PairSource, run_dir: Path | None) -> None:
        """Score every edge of the pair on the model in hand, then its history if it has one."""
        self.view.forget()
        self.redraw()
        self._begin("scoring edges")
        self._run(partial(workers.score, self.post_message, run, source, run_dir))

    def check(self) -> None:
        """The known-circuit check on the model on show, over its own pairs (once the edges are
        scored, when scoring is under way: the model in hand comes with them)."""
        if self.view.result is None or self.handle is None:
            if self.running:
                self._check_next = True
            else:
                self._status(Text("g scores the edges first; then k checks the known circuit", style="yellow"))
            return
        self._begin("checking the known circuit")
        self._run(partial(workers.check, self.post_message, self.handle))

    def cancel(self) -> bool:
        """Cancel the job under way; False when none was."""
        if not self.running:
            return False
        self.workers.cancel_group(self, "edges")
        self._end()
        self._status(Text("cancelled", style="yellow"))
        return True

    # ---- drawing -------------------------------------------------------------------

    def redraw(self) -> None:
        """The list, the summary and both charts from the view's state."""
        v = self.view
        self.query_one("#edges-list", Static).update(edges_text(v.result))
        self.query_one("#edges-summary", Static).update(summary_text(v))
        xs, ys = curve_points(v.result)
        self.query_one("#edges-curve", CurveChart).draw("faithfulness: top k% of edges kept",
                                                        "log10 k (%)", xs, ys)
        hx, hy = history_points(v.history)
        title = (f"the final circuit (its top {v.history.percent:g}%) over training" if v.history is not None
                 else "over training: a run with history snapshots")
        self.query_one("#edges-history", CurveChart).draw(title, "step", hx, hy)

    def _status(self, text: Text | str) -> None:
        self.query_one("#edges-status", Static).update(text)

    def _begin(self, what: str) -> None:
        self.running = True
        bar = self.query_one("#edges-progress", ProgressBar)
        bar.update(total=1, progress=0)
        bar.display = True
        self._status(Text(f"{what}… (escape cancels)", style="dim"))

    def _end(self) -> None:
        self.running = False
        self.query_one("#edges-progress", ProgressBar).display = False

    def _run(self, job: Callable[[], None]) -> None:
        self.run_worker(job, name="edges", group="edges", thread=True, exclusive=True, exit_on_error=False)

    # ---- messages ------------------------------------------------------------------

    def on_edges_panel_edges_progress(self, message: workers.EdgesProgress) -> None:
        """Move the bar."""
        message.stop()
        if self.running:
            self.query_one("#edges-progress", ProgressBar).update(total=message.total, progress=message.done)
            self._status(Text(f"{message.what} {message.done}/{message.total}… (escape cancels)", style="dim"))

    def on_edges_panel_edges_scored(self, message: workers.EdgesScored) -> None:
        """Show the edges and the curve; go on to the history when the run keeps one."""
        message.stop()
        self.handle, self.view.result = message.handle, message.result
        self.redraw()
        if self._check_next:
            self._check_next, self._history_next = False, message.run_dir
            self.check()
            return
        self._history(message.run_dir)

    def _history(self, run_dir: Path | None) -> None:
        """The final circuit over ``run_dir``'s snapshots (None: the run keeps none)."""
        if run_dir is None or self.handle is None or self.view.result is None:
            self._end()
            self._status(Text("edges scored (this run keeps no history snapshots)", style="dim"))
            return
        self._begin("the final circuit over the history")
        self._run(partial(workers.over_history, self.post_message, self.handle, run_dir, self.view.result))

    def on_edges_panel_edges_history_ready(self, message: workers.EdgesHistoryReady) -> None:
        """Draw the final circuit's faithfulness over the snapshots."""
        message.stop()
        self._end()
        self.view.history = message.history
        self._status(Text(f"{len(message.history.steps)} snapshots measured", style="dim"))
        self.redraw()

    def on_edges_panel_check_done(self, message: workers.CheckDone) -> None:
        """The check's verdict under the list."""
        message.stop()
        self._end()
        self.view.check, self.view.check_error = message.check, message.error
        self._status("")
        self.redraw()
        if self._history_next is not None:
            run_dir, self._history_next = self._history_next, None
            self._history(run_dir)

    def on_edges_panel_edges_failed(self, message: workers.EdgesFailed) -> None:
        """One line in the status line."""
        message.stop()
        self._end()
        self._status(Text(message.text, style="red"))
