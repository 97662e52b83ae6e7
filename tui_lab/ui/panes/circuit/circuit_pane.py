"""Circuit pane: an attribution graph over transcoders (circuit-tracer's method), in a terminal.

- Type a prompt (``/``) and press enter: the ``graph`` verb traces its next token through
  the transcoder set named in the second field (``t``; default: the run's
  ``transcoders/`` folder) on the model in hand, with a progress bar; ``escape`` cancels.
- The pruned graph: rows are layers (logits on top, tokens at the bottom), columns the
  prompt's positions; features are labelled by the tokens their decoder rows raise.
  Arrows move along the nodes; the side panel shows the node and its strongest kept
  incoming and outgoing edges with their weights.
- ``enter`` on a feature opens it in Features; ``space`` marks features, ``x`` switches
  them (else the one under the cursor) off in the real model and ``v`` halves them, and
  the logit change is shown beside what the graph predicted.
- ``[`` ``]`` step through the history: the same prompt's graph at each snapshot whose
  transcoders the folder holds (``step_<N>/``), then back to the model in hand.
- ``a``: the heads that carry the cursor's strongest edge between positions (a feature or
  logit's from an earlier position, else the node's to a later one), each with its share,
  and the top head's QK tracing at the key it read: why it attended there, in graph nodes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Input, ProgressBar, Static
from typing_extensions import Unpack

from tui_lab.ui import key_bindings
from tui_lab.ui.messages import OpenFeatureRequested
from tui_lab.ui.pane_registry import pane_id
from tui_lab.ui.panes.circuit import circuit_workers as workers
from tui_lab.ui.panes.circuit.circuit_view import CircuitView, Line, describe, draw_graph, title
from tui_lab.ui.state.host import Pane
from tui_lab.ui.time_travel.control import travel_run_dir
from tui_lab.ui.widgets.widget_options import WidgetOptions

if TYPE_CHECKING:
    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.opening.model_handle import ModelHandle
    from tui_lab.core.sae.transcoder import TranscoderSet


def _text(lines: list[Line]) -> Text:
    out = Text()
    for k, line in enumerate(lines):
        if k:
            out.append("\n")
        for chunk, style in line:
            out.append(chunk, style=style or None)
    return out


class GraphBox(Static, can_focus=True):
    """The graph's grid: focusable, so the arrows reach the pane's bindings."""


class CircuitPane(Pane, Vertical, can_focus=False):
    """The model in hand's attribution graph for a prompt, its nodes, edges and checks."""

    PANE_ID = pane_id(__name__)
    BINDINGS = key_bindings.CIRCUIT
    HELP_EXTRA = (("enter", "in the prompt: trace it"),)

    Progress = workers.Progress
    GraphReady = workers.GraphReady
    Checked = workers.Checked
    Carried = workers.Carried
    Failed = workers.Failed

    def __init__(self, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.view = CircuitView()
        self.model: ModelInHand | None = None
        self.transcoders: TranscoderSet | None = None
        self.running = False

    def compose(self) -> ComposeResult:
        yield Static(id="circuit-title")
        with Horizontal(id="circuit-inputs"):
            yield Input(placeholder="a prompt: its next token is traced", id="circuit-prompt")
            yield Input(placeholder="transcoder folder (default: the run's transcoders/)", id="circuit-folder")
        with Horizontal(id="circuit-body"):
            with VerticalScroll(id="circuit-graph-scroll"):
                yield GraphBox(id="circuit-graph")
            with VerticalScroll(id="circuit-side-scroll"):
                yield Static(id="circuit-side")
        yield ProgressBar(total=1, show_eta=False, id="circuit-progress")
        yield Static(id="circuit-status")

    def on_mount(self) -> None:
        """Register with the host; say how to start."""
        if self.host.quitting:
            return
        self.host.register_pane(self.PANE_ID, self)
        self.query_one("#circuit-progress", ProgressBar).display = False
        self._redraw()
        self._status(Text("/ types a prompt, enter traces it · t names the transcoder folder", style="dim"))

    def focus_default(self) -> None:
        """The graph takes the keys once there is one; else the prompt."""
        self.query_one("#circuit-graph" if self.view.graph is not None else "#circuit-prompt").focus()

    # ---- drawing ---------------------------------------------------------------------

    def _status(self, text: Text | str) -> None:
        self.query_one("#circuit-status", Static).update(text)

    def _redraw(self) -> None:
        self.query_one("#circuit-title", Static).update(Text(title(self.view), style="bold"))
        width = max(40, self.query_one("#circuit-graph-scroll").size.width or 80)
        self.query_one("#circuit-graph", GraphBox).update(_text(draw_graph(self.view, width)))
        self.query_one("#circuit-side", Static).update(_text(describe(self.view)))

    # ---- keys ------------------------------------------------------------------------

    def action_focus_prompt(self) -> None:
        """Type the prompt."""
        self.query_one("#circuit-prompt", Input).focus()

    def action_focus_transcoders(self) -> None:
        """Name the transcoder folder."""
        self.query_one("#circuit-folder", Input).focus()

    def action_trace(self) -> None:
        """Trace the prompt on the model in hand."""
        self.view.step_index = None
        self._trace(None)

    def action_move(self, d_row: int, d_col: int) -> None:
        """Move the cursor along the nodes."""
        self.view.move(d_row, d_col)
        self._redraw()

    def action_mark(self) -> None:
        """Mark or unmark the feature under the cursor."""
        if not self.view.toggle_mark():
            self._status(Text("only features can be switched off: move to a feature", style="yellow"))
        self._redraw()

    def action_open_feature(self) -> None:
        """Open the feature under the cursor in the Features pane."""
        node = self.view.node()
        if node is None or node.kind.value != "feature" or self.transcoders is None:
            self._status(Text("enter opens a feature: move the cursor to one", style="yellow"))
            return
        self.post_message(OpenFeatureRequested(self.transcoders.folder, node.layer, node.id))

    def action_intervene(self, scale: float) -> None:
        """Scale the chosen features in the real model; the logit change beside the graph's."""
        nodes = self.view.chosen()
        if not nodes or self.model is None or self.view.graph is None or self.transcoders is None:
            self._status(Text("mark features (space) or move to one, then x", style="yellow"))
            return
        self._status(Text("running the real model with the features changed…", style="dim"))
        self.run_worker(lambda: workers.check(self.post_message, self.model, self.view.graph, self.transcoders,
                                              nodes, scale), thread=True, group="circuit-check",
                        exclusive=True, exit_on_error=False)

    def action_carriers(self) -> None:
        """The heads carrying the cursor's strongest edge between positions, and the top
        head's QK tracing (in a worker, with progress; escape cancels)."""
        edge = self.view.edge_between_positions()
        if edge is None or self.model is None or self.view.graph is None or self.transcoders is None:
            self._status(Text("a needs an edge between positions: move to a feature or logit with an "
                              "earlier source (or a node feeding a later one)", style="yellow"))
            return
        self.running = True
        bar = self.query_one("#circuit-progress", ProgressBar)
        bar.update(total=1, progress=0)
        bar.display = True
        self._status(Text("finding the heads that carry the edge, then QK tracing the top one… (escape cancels)",
                          style="dim"))
        model, graph, tset = self.model, self.view.graph, self.transcoders
        self.run_worker(lambda: workers.carry(self.post_message, model, graph, tset, *edge), thread=True,
                        group="circuit-trace", exclusive=True, exit_on_error=False)

    def action_snapshot(self, step: int) -> None:
        """Step the graph through the history snapshots that have transcoders."""
        folder = self._folder()
        from tui_lab.core.analysis.circuits.graph_history import history_steps

        steps = history_steps(folder) if folder is not None else []
        run_dir = travel_run_dir(self.host.state)
        if not steps or run_dir is None:
            self._status(Text("no history here: a run's folder of step_<N> transcoder sets "
                              "(tfx-lab transcoder train --history)", style="yellow"))
            return
        self.view.steps = steps
        at = self.view.step_index
        at = (len(steps) - 1 if step < 0 else 0) if at is None else at + step
        self._trace(None if at < 0 or at >= len(steps) else at)

    def action_cancel(self) -> None:
        """Stop the tracing under way."""
        if self.running:
            self.workers.cancel_group(self, "circuit-trace")
            self._end_progress()
            self._status(Text("cancelled", style="yellow"))

    # ---- work ------------------------------------------------------------------------

    def _run(self) -> ModelHandle | None:
        state = self.host.state
        return state.current_run if state.current_run is not None else state.opened

    def _folder(self) -> Path | None:
        typed = self.query_one("#circuit-folder", Input).value.strip()
        if typed:
            return Path(typed).expanduser()
        run_dir = travel_run_dir(self.host.state)
        return run_dir / "transcoders" if run_dir is not None else None

    def _trace(self, step_index: int | None) -> None:
        run, folder = self._run(), self._folder()
        text = self.query_one("#circuit-prompt", Input).value
        if run is None:
            self._status(Text("no model yet: train one (2, then space) or open a run", style="yellow"))
            return
        if folder is None or not text:
            self._status(Text("type a prompt (/) and name the transcoder folder (t)", style="yellow"))
            return
        step = None if step_index is None else self.view.steps[step_index]
        self.running = True
        bar = self.query_one("#circuit-progress", ProgressBar)
        bar.update(total=1, progress=0)
        bar.display = True
        where = "the model in hand" if step is None else f"step {step}"
        self._status(Text(f"tracing at {where}… (escape cancels)", style="dim"))
        run_dir = travel_run_dir(self.host.state)
        self.run_worker(lambda: workers.trace(self.post_message, run, run_dir, text, str(folder), step, step_index),
                        thread=True, group="circuit-trace", exclusive=True, exit_on_error=False)

    def _end_progress(self) -> None:
        self.running = False
        self.query_one("#circuit-progress", ProgressBar).display = False

    # ---- messages --------------------------------------------------------------------

    def on_input_submitted(self, message: Input.Submitted) -> None:
        """Enter in either field: trace."""
        message.stop()
        self.action_trace()

    def on_circuit_pane_progress(self, message: workers.Progress) -> None:
        """Move the bar."""
        message.stop()
        self.query_one("#circuit-progress", ProgressBar).update(total=max(1, message.total), progress=message.done)

    def on_circuit_pane_graph_ready(self, message: workers.GraphReady) -> None:
        """Show the new graph, the cursor on the top logit."""
        message.stop()
        self._end_progress()
        self.model, self.transcoders = message.model, message.transcoders
        steps = self.view.steps
        self.view.show(message.graph, message.pruned, message.scores)
        self.view.steps, self.view.step_index = steps, message.step_index
        self._redraw()
        self.query_one("#circuit-graph", GraphBox).focus()
        self._status(Text("arrows move · enter opens a feature · space marks · x switches off · "
                          "a heads & QK · [ ] history", style="dim"))

    def on_circuit_pane_checked(self, message: workers.Checked) -> None:
        """Show the intervention's logit changes beside the graph's."""
        message.stop()
        self.view.checks, self.view.checked, self.view.scale = message.checks, message.nodes, message.scale
        self._redraw()
        self._status(Text("the side panel compares the real model's logit change with the graph's", style="dim"))

    def on_circuit_pane_carried(self, message: workers.Carried) -> None:
        """Show the carrying heads and the top head's QK tracing in the side panel."""
        message.stop()
        self._end_progress()
        self.view.carriers, self.view.qk = message.carriers, message.qk
        self._redraw()
        top = message.carriers.carriers[0] if message.carriers.carriers else None
        self._status(Text("no head carries it: source and target share a position" if top is None else
                          f"carried most by {top.name}, attending {top.query}->{top.key}: its QK tracing "
                          "is in the side panel", style="dim"))

    def on_circuit_pane_failed(self, message: workers.Failed) -> None:
        """One line: what went wrong."""
        message.stop()
        self._end_progress()
        self._status(Text(message.text, style="red"))
