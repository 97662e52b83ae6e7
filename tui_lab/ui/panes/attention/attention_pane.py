"""Attention pane: heatmaps of the last decode per kind, layer and head; overview; walkthrough.

Its interventions: ``x`` switches the head on show off (or back on), ``m`` cycles
zero/mean ablation, ``X`` restores every head; each asks Decode, through the
app, to decode the input on show again. The heads switched off live in the
lab's ``AblationState`` (``host.state.ablation``: Decode's decodes apply them, to
a private model copy). ``i`` is the importance table (``importance_panel.py``).
What it draws is worked out in ``attention_view.py``; the walkthrough's q, k and v are
read in ``attention_workers.py``.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static
from typing_extensions import Unpack

from tui_lab.core.config.lab_config import LabConfig
from tui_lab.ui import key_bindings
from tui_lab.ui.messages import ClearDecode, DecodeRequested, ShowDecode, UseConfig
from tui_lab.ui.pane_registry import pane_id
from tui_lab.ui.panes.attention import attention_view as view
from tui_lab.ui.panes.attention import attention_workers as jobs
from tui_lab.ui.panes.attention.importance_panel import ImportancePanel, ask_for
from tui_lab.ui.state.host import Pane
from tui_lab.ui.time_travel.control import TimeTravelControl, travel_run_dir
from tui_lab.ui.widgets.head_atlas import HeadAtlas
from tui_lab.ui.widgets.head_grid import HeadGrid
from tui_lab.ui.widgets.heatmap import Heatmap
from tui_lab.ui.widgets.model_summary import stacks
from tui_lab.ui.widgets.snapshot_strip import SnapshotStrip
from tui_lab.ui.widgets.walkthrough_view import WalkthroughView
from tui_lab.ui.widgets.widget_options import WidgetOptions

if TYPE_CHECKING:
    from torch import nn

    from tui_lab.core.analysis.basics.walkthrough import Projections
    from tui_lab.core.decoding.decode import DecodeResult
    from tui_lab.core.decoding.fill_mask import FillMaskResult
    from tui_lab.core.tasks.protocol import Task


class AttentionPane(Pane, Vertical):
    """Cycle kind (k), layer (l) and head (h); a overview; w walkthrough; arrows move the cursor."""

    ProjectionsReady = jobs.ProjectionsReady  # the worker's message (``attention_workers.py``)

    PANE_ID = pane_id(__name__)
    KEY_SECTIONS = (("", key_bindings.HEATMAP),)
    BINDINGS = key_bindings.ATTENTION

    def __init__(self, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.result: DecodeResult | FillMaskResult | None = None
        self.model: nn.Module | None = None
        self.lab_task: Task | None = None
        self.options: dict[str, object] | None = None
        self.kinds: list[tuple[str, list[str]]] = []  # (kind, names by layer)
        self.kind_index = 0
        self.layer_index = 0
        self.head_index = 0
        self.overview = False
        self.walkthrough = False
        self.projections: dict[str, Projections] | None = None
        self._projections_for: DecodeResult | FillMaskResult | None = None
        self.config: LabConfig | None = None  # the lab's, for the header before any decode
        self._cursor_plain = ""  # the cursor line's text on show (unchanged: not drawn again)

    def compose(self) -> ComposeResult:
        yield Static(id="attn-header")
        yield SnapshotStrip()
        with Horizontal(id="attn-body"):
            with VerticalScroll(id="attn-scroll"):
                yield Heatmap(id="heatmap")
                yield HeadAtlas(id="head-atlas")
                yield HeadGrid(id="head-grid")
            with VerticalScroll(id="walkthrough-scroll"):
                yield WalkthroughView(id="walkthrough")
            yield ImportancePanel(self.host.state.travel, id="importance")
        yield Static(id="attn-cursor")
        yield TimeTravelControl()

    def on_mount(self) -> None:
        """Start empty, explaining how to get a heatmap."""
        if self.host.quitting:
            return  # mounted while the app quits
        self.query_one("#walkthrough-scroll").display = False
        opened = self.host.state.opened  # a real model opened from files: its own settings
        self.config = opened.config if opened is not None else self.host.state.config
        self.clear()
        self.host.register_pane(self.PANE_ID, self)
        last = self.host.state.last_decode
        if last is not None:
            self.set_result(last.result, last.model, last.task, last.options)

    def focus_default(self) -> None:
        """The heatmap takes focus so the arrows move its cursor."""
        self.query_one(Heatmap).focus()

    # ---- data ------------------------------------------------------------------

    def on_clear_decode(self, message: ClearDecode) -> None:
        """The decode on show was another model's."""
        self.clear()

    def on_use_config(self, message: UseConfig) -> None:
        """The lab's config changed: its layers and heads."""
        self.show_config(message.config)

    def on_show_decode(self, message: ShowDecode) -> None:
        """The newest decode (or a time-travel step's)."""
        decoded = message.decoded
        self.set_result(decoded.result, decoded.model, decoded.task, decoded.options)

    def clear(self) -> None:
        """Forget the decode on show (it came from another model): back to the empty state."""
        self.result = self.model = self.lab_task = self.options = None
        self.kinds = []
        self.projections = self._projections_for = None
        self.query_one(Heatmap).clear("No decode yet: decode an input in the Decode pane (3), then come back.")
        self.query_one(Heatmap).display = True
        self.query_one("#head-grid").display = False
        self.show_atlas()
        cursor_line = self.query_one("#attn-cursor", Static)
        cursor_line.update("")
        self._cursor_plain = ""
        self._update_header()
        self._show_walkthrough()

    def show_config(self, config: LabConfig) -> None:
        """The lab's config changed: until a decode, the header says what its model has."""
        self.config = config
        if not self.kinds:
            self._update_header()

    def set_result(self, result: DecodeResult | FillMaskResult | None, model: nn.Module | None = None,
                   task: Task | None = None, options: dict[str, object] | None = None) -> None:
        """Show the attention of a new decode (keeps kind/layer/head where they still exist)."""
        same = result is self.result and model is self.model and task is self.lab_task
        if same and result is not None and options == self.options:
            return  # on show already (time travel shows it before the app passes it on)
        self.result, self.model, self.lab_task, self.options = result, model, task, options
        self.projections = None
        self._projections_for = None
        self.kinds = view.kinds_of(list(result.attention) if result is not None else [])
        self.kind_index = min(self.kind_index, max(0, len(self.kinds) - 1))
        self.layer_index = min(self.layer_index, max(0, len(self._names()) - 1))
        self.head_index = min(self.head_index, max(0, self._n_heads() - 1))
        self._redraw_map()
        if self.walkthrough:
            self._request_projections()

    def _names(self) -> list[str]:
        return self.kinds[self.kind_index][1] if self.kinds else []

    @property
    def capture_name(self) -> str | None:
        """The capture name on show (``decoder.0.cross``...)."""
        names = self._names()
        return names[self.layer_index] if names else None

    def _n_heads(self) -> int:
        name = self.capture_name
        if name is None or self.result is None:
            return 0
        return int(self.result.attention[name].shape[0])

    def _update_header(self) -> None:
        header = self.query_one("#attn-header", Static)
        if not self.kinds or self.result is None:
            if self.config is None:  # before the lab's config is shown
                return
            header.update(view.empty_header(self.config, stacks(self.config.model)))
            return
        ablation = self.host.state.ablation
        text = view.header(
            self.kinds, self.kind_index, f"{self.layer_index + 1}/{len(self._names())}",
            "all" if self.overview else f"{self.head_index + 1}/{self._n_heads()}", self.capture_name,
            ablation.label() if ablation.active else None, self.result,
        )
        header.update(text, layout=False)  # one line high (attention.tcss): no layout pass

    def _redraw_map(self) -> None:
        self._update_header()
        heatmap = self.query_one(Heatmap)
        grid = self.query_one(HeadGrid)
        name = self.capture_name
        if name is None or self.result is None:
            heatmap.clear("No attention captured in the last decode.")
            return
        weights = self.result.attention[name]  # (H, Tq, Tk)
        rows, cols = view.labels(self.result, name, weights)
        if self.overview:
            heatmap.display = False
            grid.display = True
            weights, rows, cols, title = view.overview_cut(weights, rows, cols, name)
            width = self.query_one("#attn-scroll").size.width or 100
            grid.show(weights.tolist(), rows, cols, self.head_index, title, width)
        else:
            grid.display = False
            heatmap.display = True
            heatmap.set_matrix(weights[self.head_index].tolist(), rows, cols)
            self._show_cursor(heatmap, *heatmap.cursor, heatmap.value)  # now, not a frame later
        self.show_atlas()
        self._show_walkthrough()

    # ---- cursor and walkthrough -------------------------------------------------

    def on_heatmap_cursor_moved(self, event: Heatmap.CursorMoved) -> None:
        """Say which query/key pair is under the cursor, and its weight."""
        event.stop()
        self._show_cursor(event.heatmap, event.row, event.col, event.value)
        if self.walkthrough:
            self._show_walkthrough()

    def _show_cursor(self, heatmap: Heatmap, row: int, col: int, value: float | None) -> None:
        """The cursor line (unchanged text: no repaint, so a new matrix paints in one frame)."""
        if value is None:
            return
        q = heatmap.rows[row] if row < len(heatmap.rows) else "?"
        k = heatmap.cols[col] if col < len(heatmap.cols) else "?"
        text = view.cursor_line(q, k, row, col, value)
        line = self.query_one("#attn-cursor", Static)
        if self._cursor_plain != text.plain:
            self._cursor_plain = text.plain
            line.update(text, layout=False)  # height 1 (attention.tcss): no layout pass

    def _show_walkthrough(self) -> None:
        if not self.walkthrough:
            return
        view = self.query_one(WalkthroughView)
        if self.result is None or self.capture_name is None:
            view.show_message("Decode an input first.")
            return
        if self.projections is None:
            view.show_message("computing q, k and v from the model…")
            self._request_projections()
            return
        proj = self.projections.get(self.capture_name)
        if proj is None:
            view.show_message(f"no projections recorded for {self.capture_name}")
            return
        from tui_lab.core.analysis.basics.walkthrough import walk

        row = self.query_one(Heatmap).cursor[0]
        view.show_row(walk(proj, self.result, self.capture_name, self.head_index, row))

    def _request_projections(self) -> None:
        if self.model is None or self.lab_task is None or self.result is None \
                or self._projections_for is self.result:
            return
        self._projections_for = self.result
        job = partial(jobs.replay_projections, self.post_message, self.model, self.lab_task, self.result,
                      self.options)
        self.run_worker(job, thread=True, exclusive=True, exit_on_error=False, group="walkthrough")

    def on_attention_pane_projections_ready(self, message: jobs.ProjectionsReady) -> None:
        """Keep the q/k/v of the decode on show, then draw the walkthrough."""
        message.stop()
        if message.result is not self.result:
            return
        if message.error:
            self.query_one(WalkthroughView).show_message(f"walkthrough unavailable: {message.error}")
            return
        self.projections = message.projections
        self._show_walkthrough()

    # ---- actions -------------------------------------------------------------------

    def _need_data(self) -> bool:
        if not self.kinds:
            self.notify("decode an input first (3, type, Enter)", severity="warning", timeout=3)
            return False
        return True

    def action_cycle_kind(self, step: int) -> None:
        """Next attention kind: encoder self, decoder self, cross."""
        if self._need_data():
            self.kind_index = (self.kind_index + step) % len(self.kinds)
            self.layer_index = min(self.layer_index, len(self._names()) - 1)
            self.head_index = min(self.head_index, self._n_heads() - 1)
            self._redraw_map()

    def action_cycle_layer(self, step: int) -> None:
        """Next layer of the current kind."""
        if self._need_data():
            self.layer_index = (self.layer_index + step) % len(self._names())
            self._redraw_map()

    def action_cycle_head(self, step: int) -> None:
        """Next head."""
        if self._need_data():
            self.head_index = (self.head_index + step) % max(1, self._n_heads())
            self._redraw_map()

    def action_toggle_overview(self) -> None:
        """Switch between one head and all heads of the layer."""
        if self._need_data():
            self.overview = not self.overview
            self._redraw_map()
            # The heatmap hides in the overview: keep focus inside the pane so its keys work.
            (self.query_one("#attn-scroll") if self.overview else self.query_one(Heatmap)).focus()

    def action_toggle_walkthrough(self) -> None:
        """Show or hide the step-by-step numbers of the cursor's query row."""
        self.walkthrough = not self.walkthrough
        self.query_one("#walkthrough-scroll").display = self.walkthrough
        self._show_walkthrough()

    def show_atlas(self) -> None:
        """In the overview, show the atlas of the model on show (its scores are worked out once)."""
        atlas = self.query_one(HeadAtlas)
        atlas.display = bool(self.overview and self.result is not None)
        if not atlas.display or self.result is None or self.lab_task is None:
            return  # (a decode on show always comes with its task)
        arch = view.model_arch(self.model, list(self.result.attention))
        travel = self.host.state.travel
        run_dir = travel_run_dir(self.host.state)
        from tui_lab.core.runs.snapshots import list_snapshots

        history = run_dir if run_dir is not None and list_snapshots(run_dir) else None
        step = travel.state.step if self.result is travel.shown_result else None
        atlas.follow(self.model, self.lab_task, arch, history, step, travel.score_curves)

    # ---- time travel ----------------------------------------------------------------

    def action_snapshot(self, move: str) -> None:
        """Show the last decode on an earlier/later/first/last history snapshot."""
        self.query_one(TimeTravelControl).step(move)

    def action_play_snapshots(self) -> None:
        """Play the decode through every history snapshot (p again, or any key, stops)."""
        self.query_one(TimeTravelControl).play()

    def on_key(self, event: events.Key) -> None:
        """Any key but p stops time travel's playing (and then does what it does)."""
        self.query_one(TimeTravelControl).key_pressed(event.key)

    # ---- ablation and importance -------------------------------------------------------

    @property
    def selected_head(self) -> str | None:
        """The core name of the head on show (``decoder.0.cross:2``), None before a decode."""
        name = self.capture_name
        return None if name is None else f"{name}:{self.head_index}"

    def _rerun(self) -> None:
        """Decode the input on show again, with the heads as they are switched now."""
        self._update_header()
        if self.result is not None:
            self.post_message(DecodeRequested(self.result.input))

    def action_toggle_ablation(self) -> None:
        """Switch the head on show off (or back on) and decode the input again."""
        head = self.selected_head
        if not self._need_data() or head is None:
            return
        off = self.host.state.ablation.toggle(head)
        self.notify(f"{head} switched {'off' if off else 'back on'}", timeout=2)
        self._rerun()

    def action_cycle_ablation_mode(self) -> None:
        """Ablate by zeroing the head's output or by its mean output (and decode again)."""
        ablation = self.host.state.ablation
        mode = ablation.cycle_mode()
        self.notify(f"ablation mode: {mode}", timeout=2)
        if ablation.active:
            self._rerun()
        elif self.query_one(ImportancePanel).shown:
            self._start_importance()

    def action_restore_heads(self) -> None:
        """Switch every ablated head back on and decode again."""
        ablation = self.host.state.ablation
        if ablation.active:
            ablation.clear()
            self._rerun()

    def action_toggle_importance(self) -> None:
        """Show or hide the exact-match drop of each head ablated alone (computed in the background)."""
        if self.query_one(ImportancePanel).toggle():
            self._start_importance()

    def action_probes(self) -> None:
        """Open the Probes screen on the model in hand: its task's variable by layer, and over training."""
        state = self.host.state
        run = state.current_run if state.current_run is not None else state.opened
        if run is None:
            self.notify("no model yet: train one or open a run", severity="warning", timeout=3)
            return
        from tui_lab.ui.screens.probes_screen import ProbesScreen

        self.app.push_screen(ProbesScreen(run, travel_run_dir(state)))

    def _start_importance(self) -> None:
        """Ask the importance panel for the table of the model on show (or say why there is none)."""
        state = self.host.state
        text = None if self.result is None else self.result.input
        ask, why_not = ask_for(state.current_run, state.ablation.mode, text, self.host.training_active,
                               state.travel.state.step)
        self.query_one(ImportancePanel).start(ask, why_not)
