"""A host that is not the lab: a bare Textual app with the ``LabHost`` members, for mounting
one pane on its own (no ``LabApp``, no routing, no other pane, no torch)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.app import App, ComposeResult
from textual.widget import Widget

from tui_lab.core.config.presets import load_preset
from tui_lab.ui.state.host import LabHost, Pane
from tui_lab.ui.state.lab_state import LabState

STYLES = Path(__file__).resolve().parents[2] / "tui_lab" / "ui" / "styles"


class FakeHost(App[None]):
    """Mounts the pane ``make()`` builds; records what it registers; trains nothing."""

    def __init__(self, make: Callable[[], Pane], pane_id: str, runs_root: Path) -> None:
        super().__init__(css_path=[STYLES / "app.tcss", STYLES / f"{pane_id}.tcss"])
        self.make, self.pane_id = make, pane_id
        self.state = LabState(load_preset(None), runs_root)
        self.registered: dict[str, Widget] = {}

    def compose(self) -> ComposeResult:
        yield self.make()

    @property
    def quitting(self) -> bool:
        return not self.is_running

    @property
    def training_active(self) -> bool:
        return False

    @property
    def active_pane(self) -> str:
        return self.pane_id

    def register_pane(self, pane_id: str, widget: Widget) -> None:
        self.registered[pane_id] = widget


def _is_a_host(host: FakeHost) -> LabHost:
    return host  # mypy checks FakeHost against the protocol here
