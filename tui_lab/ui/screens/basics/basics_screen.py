"""The basics screen (``b``): positions, masks, scaling and the schedule of the lab's model.

A modal screen over the panes with four views, one key each (``p`` ``m``
``s`` ``r``). It draws the model the lab holds (the run Decode uses, at its
step) or, with none, the lab's config freshly built, untrained; the numbers
come from the core's ``analysis/basics_*`` in a thread, once per opening.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import ContentSwitcher, Static

from tui_lab.core.errors import one_line
from tui_lab.ui import key_bindings
from tui_lab.ui.screens.basics.basics_data import BasicsData, BasicsSource, compute
from tui_lab.ui.screens.basics.basics_views import (
    MasksView,
    PositionsView,
    ScalingView,
    ScheduleView,
)
from tui_lab.ui.state.lab_state import LabState
from tui_lab.ui.widgets.heatmap import Heatmap

VIEWS = {
    "positions": "Positions",
    "masks": "Masks",
    "scaling": "Scaling",
    "schedule": "Schedule",
}


def lab_source(state: LabState) -> BasicsSource:
    """What the lab holds: its config, the run Decode uses, the last decoded input."""
    decoded = state.last_decode
    text = decoded.result.input if decoded is not None else None
    run = state.current_run if state.current_run is not None else state.opened
    return BasicsSource(state.config, run, text)


class BasicsScreen(ModalScreen[None]):
    """The tutorials' pictures drawn from the lab's own model; escape, b or q closes it."""

    CSS_PATH = "basics.tcss"
    BINDINGS = key_bindings.BASICS

    @dataclass
    class Computed(Message):
        """The pictures are ready (``data`` None: ``error`` says why not)."""

        data: BasicsData | None
        error: str | None = None

    def __init__(self, source: BasicsSource, view: str = "positions") -> None:
        super().__init__()
        self.source = source
        self.start_view = view if view in VIEWS else "positions"
        self.data: BasicsData | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="basics-body"):
            yield Static("", id="basics-title")
            yield Static(Text("computing…", style="dim italic"), id="basics-status")
            with ContentSwitcher(initial=self.start_view, id="basics-views"):
                yield PositionsView(id="positions")
                yield MasksView(id="masks")
                yield ScalingView(id="scaling")
                yield ScheduleView(id="schedule")

    def on_mount(self) -> None:
        """Title the screen and compute the pictures in a thread."""
        self._title()
        self._compute()

    def _title(self) -> None:
        active = self.query_one(ContentSwitcher).current or self.start_view
        tabs = Text()
        for key, (view, title) in zip("pmsr", VIEWS.items(), strict=True):
            style = "bold reverse" if view == active else "dim"
            tabs.append(f" {key} {title} ", style=style)
            tabs.append(" ")
        tabs.append("  escape closes", style="dim")
        self.query_one("#basics-title", Static).update(tabs)

    @work(thread=True, exclusive=True, exit_on_error=False)
    def _compute(self) -> None:
        """Ask the core for the four pictures (thread)."""
        try:
            data = compute(self.source)
        except Exception as exc:  # noqa: BLE001 - shown on the screen, never a traceback
            self.post_message(self.Computed(None, one_line(exc)))
            return
        self.post_message(self.Computed(data))

    def on_basics_screen_computed(self, message: BasicsScreen.Computed) -> None:
        """Draw every view once; the switcher only shows them."""
        status = self.query_one("#basics-status", Static)
        if message.data is None:
            status.update(Text(f"cannot draw: {message.error}", style="red"))
            return
        self.data = message.data
        status.update(Text(message.data.label, style="dim"))
        self.query_one(PositionsView).show(message.data)
        self.query_one(MasksView).show(message.data)
        self.query_one(ScalingView).show(message.data)
        self.query_one(ScheduleView).show(message.data)
        self._focus_view()

    def action_view(self, view: str) -> None:
        """Show one view: positions, masks, scaling or schedule."""
        self.query_one(ContentSwitcher).current = view
        self._title()
        self._focus_view()

    def _focus_view(self) -> None:
        """Focus the view's first heatmap (its arrows move the cursor), else the view (it scrolls)."""
        switcher = self.query_one(ContentSwitcher)
        view = switcher.get_child_by_id(switcher.current) if switcher.current else None
        if view is None:
            return
        heatmaps = [h for h in view.query(Heatmap) if h.weights]
        (heatmaps[0] if heatmaps else view).focus()

    def action_close(self) -> None:
        """Close the basics screen."""
        self.dismiss(None)
