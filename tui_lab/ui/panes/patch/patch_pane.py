"""Patch pane: which activations carry the answer, by activation patching (denoising: the
clean run's activation put into the corrupted run, one cell at a time) or by attribution.

- ``e`` edits the pair: a ready-made one (the run's task, ``ioi`` for an opened model) or
  the clean and corrupted texts and the two answers typed; enter runs it, ``r`` reruns.
- ``s``/``S`` cycle the site, ``m`` exact / attribution; the grid is rerun at once.
- The heatmap: layers (or heads) by positions (or heads), 0 in the middle of a diverging
  scale (1: the clean run's logit difference, 0: the corrupted run's); the line under it
  reads the cell under the cursor, the metric before and after, the head's atlas label.
- ``d`` direct logit attribution as bars; ``t`` each head's effect over the run's
  history beside the atlas's curves; ``[`` ``]`` (``{`` ``}``) step the grid through the
  history snapshots. Every job runs in one worker (progress bar); ``escape`` cancels it.
- ``g`` the edges view (``edges_widget.py``): every edge scored by EAP-IG, the top ones,
  the faithfulness curve and the final circuit over the history; ``k`` checks the known
  induction circuit.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Input, ProgressBar, Static
from typing_extensions import Unpack

from tui_lab.ui import key_bindings
from tui_lab.ui.pane_registry import pane_id
from tui_lab.ui.panes.patch import patch_jobs as jobs
from tui_lab.ui.panes.patch import patch_workers as workers
from tui_lab.ui.panes.patch.dla_bars import dla_text
from tui_lab.ui.panes.patch.edges_widget import EdgesPanel
from tui_lab.ui.panes.patch.history_table import history_text
from tui_lab.ui.panes.patch.pair_form import PairForm
from tui_lab.ui.panes.patch.patch_jobs import PairSource
from tui_lab.ui.panes.patch.patch_view import AXES, Atlas, PatchView, atlas_at
from tui_lab.ui.panes.patch.readout import cell_readout
from tui_lab.ui.state.host import Pane
from tui_lab.ui.time_travel.control import travel_run_dir
from tui_lab.ui.widgets.diverging_heatmap import DivergingHeatmap
from tui_lab.ui.widgets.widget_options import WidgetOptions

if TYPE_CHECKING:
    from tui_lab.core.analysis.heads.head_curves import ScoreCurves
    from tui_lab.core.analysis.patching.activation_patching import PatchResult
    from tui_lab.core.analysis.patching.patch_pair import PatchPair
    from tui_lab.core.opening.model_handle import ModelHandle
    from tui_lab.core.opening.model_in_hand import ModelInHand


class PatchPane(Pane, Vertical, can_focus=False):
    """A site's patching grid of the model in hand, its logit attribution, its history."""

    PANE_ID = pane_id(__name__)
    BINDINGS = key_bindings.PATCH
    KEY_SECTIONS = (("Heatmap cursor", key_bindings.HEATMAP), ("Pair list", key_bindings.PICK_LIST))
    HELP_EXTRA = (("enter", "in the pair: run it"),)

    # the workers' messages (``patch_workers.py``), reachable as PatchPane.<name>
    Progress = workers.Progress
    Patched = workers.Patched
    HistoryReady = workers.HistoryReady
    Failed = workers.Failed

    def __init__(self, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.view = PatchView()
        self.source = PairSource()  # the model's first ready-made pair
        self.handle: ModelInHand | None = None
        self.pair: PatchPair | None = None
        # this pair's last result at each (site, method): attribution's agreement with exact
        self._results: dict[tuple[str, str], PatchResult] = {}
        self._results_pair: PatchPair | None = None
        self.atlas_for: int | None = None  # id() of the run the atlas was scored on
        self.dla_error: str | None = None
        self.running = False
        self._atlas_now: Atlas | None = None  # the model in hand's

    def compose(self) -> ComposeResult:
        yield Static(id="patch-title")
        yield PairForm(id="patch-form")
        with Vertical(id="patch-map"):
            yield DivergingHeatmap(id="patch-heatmap")
            yield Static(id="patch-readout")
        with VerticalScroll(id="patch-dla-scroll"):
            yield Static(id="patch-dla")
        with VerticalScroll(id="patch-history-scroll"):
            yield Static(id="patch-history")
        yield EdgesPanel(id="patch-edges")
        yield ProgressBar(total=1, show_eta=False, id="patch-progress")
        yield Static(id="patch-status")

    def on_mount(self) -> None:
        """Register with the host; say how to start."""
        if self.host.quitting:
            return
        self.host.register_pane(self.PANE_ID, self)
        self.query_one(PairForm).display = False
        self.query_one("#patch-progress", ProgressBar).display = False
        self._show_view()
        self._redraw()
        self._status(self._hint())

    def focus_default(self) -> None:
        """The view on show takes the keys: the heatmap, the DLA bars or the history."""
        where = {"map": "#patch-heatmap", "dla": "#patch-dla-scroll", "history": "#patch-history-scroll",
                 "edges": "#edges-list-scroll"}
        self.query_one(where[self.view.view]).focus()

    # ---- what is on show -------------------------------------------------------------

    def _hint(self) -> Text:
        return Text(
            "r patches the model's ready-made pair · e edits the pair · s site · m exact/attribution"
            " · d logit attribution · t over training · [ ] snapshots", style="dim",
        )

    def _title(self) -> None:
        v = self.view
        rows, cols = AXES[v.site]
        title = Text(no_wrap=True, overflow="ellipsis")
        title.append("Patch", style="bold")
        title.append(f"  ·  {v.site} ({rows} × {cols})  ·  {v.method}  ·  denoising", style="dim")
        if self.pair is not None:
            title.append(f"  ·  pair {self.pair.name}", style="dim")
        step = v.step
        if v.history is not None:
            at = f"step {step}" if step is not None else "the model in hand"
            title.append(f"  ·  {at} ({len(v.history.steps)} snapshots)", style="bold")
        self.query_one("#patch-title", Static).update(title)

    def _status(self, text: Text | str) -> None:
        self.query_one("#patch-status", Static).update(text)

    def _show_view(self) -> None:
        view = self.view.view
        self.query_one("#patch-map").display = view == "map"
        self.query_one("#patch-dla-scroll").display = view == "dla"
        self.query_one("#patch-history-scroll").display = view == "history"
        self.query_one(EdgesPanel).display = view == "edges"

    def show_grid(self) -> None:
        """Draw the grid on show (the model in hand's, or a snapshot's) and the readout."""
        heatmap = self.query_one(DivergingHeatmap)
        result = self.view.shown
        if result is None:
            heatmap.clear(f"nothing patched at {self.view.site} yet: r patches")
            self.query_one("#patch-readout", Static).update("")
            return
        heatmap.AXES = AXES[self.view.site]
        heatmap.set_matrix(result.values, result.rows, result.cols)
        self._readout()

    def _readout(self) -> None:
        result = self.view.shown
        if result is None:
            return
        row, col = self.query_one(DivergingHeatmap).cursor
        if row < len(result.rows) and col < len(result.cols):
            text = cell_readout(result, row, col, self.view.atlas)
            self.query_one("#patch-readout", Static).update(text)

    def _show_dla(self) -> None:
        dla = self.query_one("#patch-dla", Static)
        if self.view.dla is not None:
            dla.update(dla_text(self.view.dla))
        else:
            dla.update(Text(self.dla_error or "nothing yet: r patches, and works this out too",
                            style="yellow" if self.dla_error else "dim"))

    def _show_history(self) -> None:
        v = self.view
        text = (history_text(v.history, v.curves, v.step_index) if v.history is not None
                else Text("t works the grid out at every history snapshot", style="dim"))
        self.query_one("#patch-history", Static).update(text)

    def _redraw(self) -> None:
        self._title()
        self.show_grid()
        if self.view.view == "dla":
            self._show_dla()
        elif self.view.view == "history":
            self._show_history()

    # ---- keys ------------------------------------------------------------------------

    def action_run(self) -> None:
        """r: patch the pair at the site on show (the model in hand)."""
        run = self._run()
        if run is None:
            return
        self.view.forget()
        self._start_progress("patching")
        score_atlas = self.atlas_for != id(run) or self.host.training_active
        self._patch_worker(run, self.source, self.view.site, self.view.method, score_atlas)

    def action_edit_pair(self) -> None:
        """e: show the pair (ready-made ones to pick, the fields to type)."""
        form = self.query_one(PairForm)
        form.display = True
        if self.handle is not None:
            form.offer(jobs.ready_names(self.handle), self.source)
        else:
            run = self._run(quiet=True)
            form.offer(jobs.ready_names(run) if run is not None else [], self.source)
        form.focus_list()

    def action_cycle_site(self, step: int) -> None:
        """s / S: the next (previous) site; rerun if something was patched."""
        had = self.pair is not None
        self.view.cycle_site(step)
        self._redraw()
        if had:
            self.action_run()

    def action_toggle_method(self) -> None:
        """m: exact patching or attribution patching; rerun if something was patched."""
        had = self.pair is not None
        self.view.toggle_method()
        self._redraw()
        if had:
            self.action_run()

    def action_toggle_view(self, view: str) -> None:
        """d / t / g: the DLA bars, the history view or the edges view (again: back to the heatmap)."""
        self.view.view = "map" if self.view.view == view else view
        self._show_view()
        self._redraw()
        self.focus_default()
        if self.view.view == "history" and self.view.history is None:
            self._need_history(None)
        edges = self.query_one(EdgesPanel)
        if self.view.view == "edges" and edges.view.result is None and not edges.running:
            run = self._run()
            if run is not None:
                edges.start(run, self.source, travel_run_dir(self.host.state))

    def action_known_circuit(self) -> None:
        """k: the known-circuit check on the edges (the edges view is shown, scored first if need be)."""
        if self.view.view != "edges":
            self.action_toggle_view("edges")
        self.query_one(EdgesPanel).check()

    def action_snapshot(self, move: str) -> None:
        """[ ] { }: the grid at an earlier, later, first or last history snapshot."""
        if self.view.history is None:
            self._need_history(move)
            return
        self.view.move(move)
        self._at_step()

    def action_cancel(self) -> None:
        """escape: cancel the patching under way, or close the pair's fields."""
        if self.query_one(EdgesPanel).cancel():
            return
        if self.running:
            self.workers.cancel_group(self, "patch")
            self._end_progress()
            self._status(Text("cancelled", style="yellow"))
            return
        form = self.query_one(PairForm)
        if form.display:
            form.display = False
            self.focus_default()

    # ---- helpers -------------------------------------------------------------------

    def _run(self, quiet: bool = False) -> ModelHandle | None:
        state = self.host.state
        run = state.current_run if state.current_run is not None else state.opened
        if run is None and not quiet:
            self._status(Text("no model yet: train one (2, then space) or open a run", style="yellow"))
        return run

    def _need_history(self, move: str | None) -> None:
        run_dir = travel_run_dir(self.host.state)
        if not jobs.history_steps(run_dir) or run_dir is None:
            self._status(Text("this run has no history snapshots (train with train.history on)",
                              style="yellow"))
            return
        if self.pair is None or self.handle is None:
            self._status(Text("r patches first; then the history", style="yellow"))
            return
        curves = self.host.state.travel.score_curves.get(run_dir)
        self._start_progress("patching every snapshot")
        self._history_worker(self.handle, run_dir, self.pair, self.view.site, self.view.method,
                             curves, move)

    def _at_step(self) -> None:
        v = self.view
        if v.step_index is not None and v.curves is not None:
            v.atlas = atlas_at(v.curves, v.step_index)
        elif v.step_index is None and self._atlas_now is not None:
            v.atlas = self._atlas_now
        self._redraw()

    def _start_progress(self, what: str) -> None:
        self.running = True
        bar = self.query_one("#patch-progress", ProgressBar)
        bar.update(total=1, progress=0)
        bar.display = True
        self._status(Text(f"{what}… (escape cancels)", style="dim"))

    def _end_progress(self) -> None:
        self.running = False
        self.query_one("#patch-progress", ProgressBar).display = False

    # ---- messages --------------------------------------------------------------------

    def on_heatmap_cursor_moved(self, message: DivergingHeatmap.CursorMoved) -> None:
        """The cursor moved: read its cell."""
        message.stop()
        self._readout()

    def on_pair_form_submitted(self, message: PairForm.Submitted) -> None:
        """A pair was picked or typed: patch it."""
        message.stop()
        self.source = message.source
        self.query_one(PairForm).display = False
        self.focus_default()
        self.pair = None
        self.action_run()

    def on_patch_pane_progress(self, message: workers.Progress) -> None:
        """Move the bar."""
        message.stop()
        if self.running:
            self.query_one("#patch-progress", ProgressBar).update(total=message.total, progress=message.done)
            self._status(Text(f"{message.what} {message.done}/{message.total}… (escape cancels)",
                              style="dim"))

    def on_patch_pane_patched(self, message: workers.Patched) -> None:
        """Show the grid, the readout, the DLA; fill the pair's fields."""
        message.stop()
        self._end_progress()
        self.handle, self.pair = message.handle, message.pair
        if message.atlas is not None:
            self._atlas_now = message.atlas
            self.atlas_for = id(self._run(quiet=True))
        self.view.atlas = self._atlas_now or {}
        self.view.result = message.result
        self.view.dla, self.dla_error = message.dla, message.dla_error
        form = self.query_one(PairForm)
        form.offer(jobs.ready_names(message.handle), message.texts)
        form.fill(message.texts)
        r = message.result
        self._status(Text(f"logit difference: clean {r.clean:.3f}, corrupted {r.corrupt:.3f}"
                          + self._agreement(message.pair, r), style="dim"))
        self._redraw()

    def _agreement(self, pair: PatchPair, result: PatchResult) -> str:
        """How attribution agrees with exact patching at this site, once both were run on
        this pair (m toggles between them): their correlation over the cells."""
        from tui_lab.core.analysis.patching.attribution_patching import correlation

        if pair != self._results_pair:
            self._results, self._results_pair = {}, pair
        self._results[(result.site, result.method)] = result
        other = self._results.get((result.site, "exact" if result.method == "attribution" else "attribution"))
        if other is None or other.rows != result.rows or other.cols != result.cols:
            return ""
        return f"  ·  attribution vs exact: correlation {correlation(result, other):.3f}"

    def on_patch_pane_history_ready(self, message: workers.HistoryReady) -> None:
        """The grid at every snapshot: step to where the key asked."""
        message.stop()
        self._end_progress()
        self.host.state.travel.score_curves[message.run_dir] = message.curves
        self.view.history, self.view.curves = message.history, message.curves
        self.view.step_index = len(message.history.steps) - 1
        if message.move is not None:
            self.view.step_index = None
            self.view.move(message.move)
        self._status(Text(f"{len(message.history.steps)} snapshots patched", style="dim"))
        self._at_step()

    def on_patch_pane_failed(self, message: workers.Failed) -> None:
        """One line in the status line."""
        message.stop()
        self._end_progress()
        self._status(Text(message.text, style="red"))

    def on_input_changed(self, message: Input.Changed) -> None:
        """Typing in a field makes the pair the typed one."""
        if self.query_one(PairForm).display and message.input.has_focus:
            self.source = self.query_one(PairForm).typed()

    # ---- workers (threads: ``patch_workers.py``) ----------------------------------------

    def _start(self, job: Callable[[], None]) -> None:
        """Run ``job`` in a thread; a job under way is cancelled (one group: "patch")."""
        self.run_worker(job, name="patch", group="patch", thread=True, exclusive=True, exit_on_error=False)

    def _patch_worker(self, run: ModelHandle, source: PairSource, site: str, method: str,
                      score_atlas: bool) -> None:
        self._start(partial(workers.patch, self.post_message, run, source, site, method, score_atlas))

    def _history_worker(self, handle: ModelInHand, run_dir: Path, pair: PatchPair, site: str, method: str,
                        curves: ScoreCurves | None, move: str | None) -> None:
        self._start(partial(workers.history, self.post_message, handle, run_dir, pair, site, method, curves,
                            move))
