"""The Probes screen: where the task's variable is readable (a probe per layer and
position) and, over the run's history, when it becomes readable and when causal.

Opened with ``v`` on the Attention pane. On opening it probes the model in hand
(``core/verbs/probe.py``); ``t`` runs probes (and, with ``d`` on, DAS) at every
layer of every history snapshot (``core/analysis/probes/probe_history.py``) and
draws both as layer x step heatmaps; ``c`` picks the position class the history
follows; ``s`` switches an encoder-decoder between its encoder and its decoder (the
addition task's carry is computed in the encoder, where the decoder re-reads it at every
layer). Work runs in a thread with its progress on show; escape cancels it, and
closes the screen when nothing runs. The arrows move the focused heatmap's cursor
(tab moves between heatmaps) and the line under them reads the cell.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual.worker import get_current_worker

from tui_lab.core.errors import one_line
from tui_lab.ui import key_bindings
from tui_lab.ui.screens import probes_view as view
from tui_lab.ui.widgets.heatmap import Heatmap

if TYPE_CHECKING:
    from tui_lab.core.analysis.probes.linear_probe import ProbeTable
    from tui_lab.core.analysis.probes.probe_history import ProbeHistory
    from tui_lab.core.opening.model_handle import ModelHandle

POST_EVERY_S = 0.2  # progress messages at most this often
EXAMPLES = 500  # task examples probed (the command line's default is 1000)


class ProbesScreen(Screen[None]):
    """Probe accuracy by layer and position; probe accuracy and DAS IIA by layer x step."""

    BINDINGS = key_bindings.PROBES
    DEFAULT_CSS = """
    ProbesScreen Heatmap { height: auto; margin-bottom: 1; }
    ProbesScreen Static { height: auto; }
    ProbesScreen #probes { height: 1fr; }
    ProbesScreen .probes-title { text-style: bold; }
    """

    @dataclass
    class Progressed(Message):
        """The worker's progress (``done`` of ``total``, ``what``)."""

        job: int
        done: int
        total: int
        what: str

    @dataclass
    class Probed(Message):
        """The model in hand's probe table (None: ``error`` says why)."""

        job: int
        table: ProbeTable | None
        error: str | None = None

    @dataclass
    class HistoryDone(Message):
        """The history's grids (None: ``error`` says why, or it was cancelled)."""

        job: int
        history: ProbeHistory | None
        error: str | None = None

    def __init__(self, run: ModelHandle, run_dir: Path | None) -> None:
        super().__init__()
        self.lab_run, self.run_dir = run, run_dir
        self.variable = ""
        self.description = ""
        self.positions: list[str] = ["all"]
        self.position_index = 0
        self.das = True
        self.stack: str | None = None  # None: where the variable is read (the core's default)
        self.busy = False
        self.job = 0  # the work under way; a cancelled job's late messages are dropped
        self.table: ProbeTable | None = None
        self.history: ProbeHistory | None = None

    def compose(self) -> ComposeResult:
        """The header, the table and the two history heatmaps, the cursor and progress lines."""
        with VerticalScroll(id="probes"):
            yield Static(id="probes-header")
            for heatmap, title in zip(("probes-table", "probes-history", "das-history"), view.TITLES, strict=True):
                yield Static(title, classes="probes-title")
                yield Heatmap(id=heatmap)
        # under the scroll, always in sight: the cell under the cursor and when it became readable
        yield Static(id="probes-cell")
        yield Static(id="probes-status")
        yield Footer()

    def on_mount(self) -> None:
        """Find the task's variable and probe the model in hand."""
        from tui_lab.core.tasks.variables import variables_of

        found = variables_of(self.lab_run.task)
        self.query_one("#probes-history", Heatmap).clear("over training: t (probes, and DAS while d is on)")
        self.query_one("#das-history", Heatmap).clear("")
        for heatmap, axes in (("#probes-table", ("layers", "positions")), ("#probes-history", ("layers", "steps")),
                              ("#das-history", ("layers", "steps"))):
            self.query_one(heatmap, Heatmap).AXES = axes
        if not found:
            self.query_one("#probes-table", Heatmap).clear(
                f"the {self.lab_run.task.name} task declares no variable: probe a label file with tfx-lab probe --labels")
            return
        self.variable, self.description = found[0].name, found[0].description
        self._header()
        self.busy = True
        self._status("working: probing every layer (escape cancels)")
        self.job += 1
        self._probe_worker(self.job)

    def _header(self) -> None:
        self.query_one("#probes-header", Static).update(
            view.header_line(self.variable, self.description, self.positions[self.position_index], self.das,
                             self.stack))

    def _status(self, text: str) -> None:
        self.query_one("#probes-status", Static).update(text)

    def _reporter(self, job: int) -> tuple[Callable[[int, int, str], None], Callable[[], bool]]:
        last = [0.0]

        def progress(done: int, total: int, what: str) -> None:
            if done >= total or time.monotonic() - last[0] >= POST_EVERY_S:
                last[0] = time.monotonic()
                self.post_message(self.Progressed(job, done, total, what))

        def cancelled() -> bool:
            return get_current_worker().is_cancelled

        return progress, cancelled

    @work(thread=True, exclusive=True, exit_on_error=False, group="probes")
    def _probe_worker(self, job: int) -> None:
        """Probe every layer and position of a private copy of the model in hand (thread)."""
        from tui_lab.core.verbs.probe import Request, run
        from tui_lab.ui.state.model_copies import private_in_hand

        progress, cancelled = self._reporter(job)
        try:
            request = Request(self.variable, examples=EXAMPLES, stack=self.stack)
            result = run(request, private_in_hand(self.lab_run), progress, cancelled)
        except Exception as exc:  # noqa: BLE001 - said on the screen, the lab goes on
            self.post_message(self.Probed(job, None, one_line(exc)))
            return
        self.post_message(self.Probed(job, result.table))

    @work(thread=True, exclusive=True, exit_on_error=False, group="probes")
    def _history_worker(self, job: int, position: str, das: bool) -> None:
        """Probes (and DAS) at every layer of every history snapshot (thread)."""
        from tui_lab.core.analysis.probes import slot_activations as slots
        from tui_lab.core.analysis.probes.probe_history import probe_history
        from tui_lab.core.tasks.variables import find_variable
        from tui_lab.ui.state.model_copies import private_in_hand

        progress, cancelled = self._reporter(job)
        stack = self.stack
        try:
            assert self.run_dir is not None
            handle = private_in_hand(self.lab_run)
            variable = find_variable(handle.task, self.variable)
            found = probe_history(handle, self.run_dir,
                                  lambda m: slots.capture(m, slots.variable_slots(m, variable, EXAMPLES, 0, stack)),
                                  position, variable=variable if das else None,
                                  progress=progress, cancelled=cancelled)
        except Exception as exc:  # noqa: BLE001 - said on the screen, the lab goes on
            self.post_message(self.HistoryDone(job, None, one_line(exc)))
            return
        self.post_message(self.HistoryDone(job, found))

    def on_probes_screen_progressed(self, message: ProbesScreen.Progressed) -> None:
        """Show the worker's progress."""
        if self.busy and message.job == self.job:
            self._status(view.progress_line(message.done, message.total, message.what))

    def on_probes_screen_probed(self, message: ProbesScreen.Probed) -> None:
        """Draw the probe table (layers x positions) and the best probe."""
        if message.job != self.job:
            return  # cancelled
        self.busy = False
        if message.table is None:
            self._status(f"no probes: {message.error}")
            return
        self.table = message.table
        self.positions = ["all", *[c for c in message.table.classes if c != "all"]]
        heatmap = self.query_one("#probes-table", Heatmap)
        heatmap.set_matrix(*view.table_matrix(message.table))
        heatmap.focus()
        self._header()
        self._status(view.best_line(message.table))

    def on_probes_screen_history_done(self, message: ProbesScreen.HistoryDone) -> None:
        """Draw probe accuracy and DAS IIA by layer x step, and when each first crosses its threshold."""
        if message.job != self.job:
            return  # cancelled
        self.busy = False
        if message.history is None:
            self._status(f"no history: {message.error}")
            return
        self.history = message.history
        self.query_one("#probes-history", Heatmap).set_matrix(*view.grid_matrix(message.history.readable))
        das = self.query_one("#das-history", Heatmap)
        if message.history.causal is not None:
            das.set_matrix(*view.grid_matrix(message.history.causal))
        else:
            das.clear("DAS was off (d)")
        self._status(view.history_line(message.history))

    def on_heatmap_cursor_moved(self, event: Heatmap.CursorMoved) -> None:
        """Read the cell under the cursor of whichever heatmap moved it."""
        line = ""
        if event.heatmap.id == "probes-table" and self.table is not None:
            line = view.table_cell_line(self.table, event.row, event.col)
        elif event.heatmap.id == "probes-history" and self.history is not None:
            line = view.grid_cell_line(self.history.readable, event.row, event.col)
        elif event.heatmap.id == "das-history" and self.history is not None and self.history.causal is not None:
            line = view.grid_cell_line(self.history.causal, event.row, event.col)
        self.query_one("#probes-cell", Static).update(line)

    def action_history(self) -> None:
        """Probe (and DAS) every history snapshot at the position on show."""
        if self.busy or not self.variable:
            return
        if self.run_dir is None:
            self._status("this model has no run folder, so no history snapshots")
            return
        self.busy = True
        self._status("working: loading the history (escape cancels)")
        self.job += 1
        self._history_worker(self.job, self.positions[self.position_index], self.das)

    def action_toggle_das(self) -> None:
        """Switch DAS over the history on or off (probes alone are quicker)."""
        self.das = not self.das
        self._header()

    def action_toggle_stack(self) -> None:
        """An encoder-decoder: probe (and swap) in the encoder, or back in the decoder."""
        if self.busy or not self.variable:
            return
        if self.lab_run.config.model.shape.one_stack:
            self._status("this model is one stack of blocks: there is no encoder to switch to")
            return
        self.stack = "decoder" if self.stack == "encoder" else "encoder"
        self.positions, self.position_index, self.table, self.history = ["all"], 0, None, None
        self.query_one("#probes-history", Heatmap).clear("over training: t (probes, and DAS while d is on)")
        self.query_one("#das-history", Heatmap).clear("")
        self._header()
        self.busy = True
        self._status(f"working: probing every layer of the {self.stack} (escape cancels)")
        self.job += 1
        self._probe_worker(self.job)

    def action_cycle_position(self, step: int) -> None:
        """The position class the history follows (all, or one class)."""
        self.position_index = (self.position_index + step) % len(self.positions)
        self._header()

    def action_close(self) -> None:
        """Cancel the work under way, or (with none) go back to Attention."""
        if self.busy:
            self.workers.cancel_group(self, "probes")
            self.job += 1
            self.busy = False
            self._status("cancelled")
            return
        self.dismiss(None)
