"""The Fourier screen: a modular-addition run's embedding spectrum, stepped through its history.

Opened with ``f`` on the Train pane. ``[`` ``]`` ``{`` ``}`` and ``p`` move
through the run's history snapshots as time travel does in Attention and
Decode (the same ``TimeTravel`` state class, snapshot strip and snapshot
cache; a state of its own, so the decode on show elsewhere stays where it
is): the spectrum sharpens onto a few frequencies before held-out accuracy
jumps. ``]`` past the last snapshot is the run's model now.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer

from tui_lab.core.errors import one_line
from tui_lab.ui import key_bindings
from tui_lab.ui.state.travel import TimeTravel, Travel
from tui_lab.ui.widgets.fourier_view import FourierView
from tui_lab.ui.widgets.snapshot_strip import SnapshotStrip

if TYPE_CHECKING:  # torch-backed: the run's model is in by the time f is pressed
    from tui_lab.core.analysis.lenses.embedding_fourier import Spectrum
    from tui_lab.core.tasks.base import TaskBase
    from tui_lab.core.training.remote import RemoteRun

PLAY_SECONDS = 0.35


class FourierScreen(Screen[None]):
    """The spectrum of the run's model now or of one history snapshot."""

    BINDINGS = key_bindings.FOURIER

    class Shown(Message):
        """A spectrum was worked out (``spec`` None: ``error`` says why)."""

        def __init__(self, index: int | None, spec: Spectrum | None, error: str | None = None) -> None:
            super().__init__()
            self.index, self.spec, self.error = index, spec, error

    def __init__(self, run: RemoteRun, run_dir: Path | None, travel: Travel, training: bool = False) -> None:
        super().__init__()
        self.lab_run, self.run_dir, self.travel, self.training = run, run_dir, travel, training
        self.travel_state = TimeTravel()
        self._modular_task: TaskBase | None = None

    def compose(self) -> ComposeResult:
        """The snapshot strip over the spectrum, and the footer."""
        with Vertical(id="fourier"):
            yield SnapshotStrip()
            with VerticalScroll():
                yield FourierView("working out the spectrum…", id="fourier-view")
        yield Footer()

    def on_mount(self) -> None:
        """Show the spectrum of the run's model now."""
        self._refresh_steps()
        self._go(None)

    def _refresh_steps(self) -> None:
        from tui_lab.core.runs.snapshots import list_snapshots

        self.travel_state.set_run(self.run_dir, list_snapshots(self.run_dir) if self.run_dir else [])

    def action_snapshot(self, move: str) -> None:
        """Show the spectrum of an earlier/later/first/last history snapshot."""
        self.travel_state.playing = False
        self._refresh_steps()
        if not self.travel_state.steps:
            self.notify("this run has no history snapshots", severity="warning", timeout=3)
            return
        self._go(self.travel_state.target(move))

    def action_play(self) -> None:
        """Play the spectrum through every snapshot (p again stops)."""
        if self.travel_state.playing:
            self.travel_state.playing = False
            return
        self._refresh_steps()
        if self.travel_state.steps:
            self.travel_state.playing = True
            self._go(self.travel_state.play_start())

    def action_close(self) -> None:
        """Back to the Train pane."""
        self.travel_state.playing = False
        self.dismiss(None)

    def _go(self, index: int | None) -> None:
        step = None if index is None else self.travel_state.steps[index]
        self._spectrum_worker(index, step)

    @work(thread=True, exclusive=True, exit_on_error=False, group="fourier")
    def _spectrum_worker(self, index: int | None, step: int | None) -> None:
        """Load the snapshot's weights (or take the live model) and take its spectrum (thread)."""
        from tui_lab.core.tasks import make_task
        from tui_lab.core.verbs.fourier import spectrum_of
        from tui_lab.ui.state.model_copies import model_to_read

        try:
            if self._modular_task is None:
                self._modular_task = make_task(self.lab_run.config.task)
            if step is None or self.run_dir is None:
                model, _ = model_to_read(self.lab_run, self.training)
            else:
                model = self.travel.snapshot_model(self.run_dir, step, self.lab_run.model)
            spec = spectrum_of(model, self._modular_task)
        except Exception as exc:  # noqa: BLE001 - say it on the screen, never crash the lab
            self.post_message(self.Shown(index, None, one_line(exc)))
            return
        self.post_message(self.Shown(index, spec))

    def on_fourier_screen_shown(self, message: FourierScreen.Shown) -> None:
        """Draw the spectrum and the strip; while playing, go on to the next snapshot."""
        self.travel_state.index = message.index
        view = self.query_one(FourierView)
        total = self.lab_run.config.train.steps
        curves = self.travel.read_curves(self.run_dir) if self.run_dir else None
        self.query_one(SnapshotStrip).show(self.travel_state, curves, total)
        if message.spec is None:
            view.show_message(f"no spectrum: {message.error}")
            return
        view.show(message.spec, self.travel_state.describe(total))
        if self.travel_state.playing:
            nxt = self.travel_state.play_next()
            if nxt is not None:
                self.set_timer(PLAY_SECONDS, lambda: self._go(nxt) if self.travel_state.playing else None)
