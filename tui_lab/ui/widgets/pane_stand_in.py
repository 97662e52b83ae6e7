"""A stand-in for a pane that is built (and its module imported) after the first frame."""

from __future__ import annotations

from collections.abc import Callable

from textual.widget import Widget

from tui_lab.ui.widgets.pane_tabs import PaneSwitcher


class PaneStandIn(Widget):
    """Swaps itself for ``factory()`` once the first frame is on screen.

    Only the Build pane is visible at start; the others (and plotext, which the
    Train pane needs) are imported and mounted right after, so the first frame
    does not wait for them. It takes the pane's id, so the pane switcher can
    show it (as "loading") before the pane exists.

    ``held``: a hidden stand-in waits for ``release()`` (the lab calls it once
    torch, and a model given with ``--model``, are loaded: building the hidden
    panes meanwhile took the interpreter lock from torch's import for a third
    of a second). Shown meanwhile, it builds at once.
    """

    DEFAULT_CSS = "PaneStandIn { color: $text-muted; }"

    def __init__(self, factory: Callable[[], Widget], id: str, held: bool = False) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self._factory = factory
        self._held = held
        self._started = False

    def render(self) -> str:
        return "loading…"

    def on_mount(self) -> None:
        """Build the real pane after the next refresh (unless held and hidden)."""
        if not self._held or self.display:
            self.release()

    def on_show(self) -> None:
        """Shown while held: the user is waiting for this pane, so build it now."""
        self.release()

    def release(self) -> None:
        """Build the real pane after the next refresh (once)."""
        if not self._started:
            self._started = True
            self.call_after_refresh(self._build)

    async def _build(self) -> None:
        switcher = self.parent
        if not isinstance(switcher, PaneSwitcher) or self.app.return_code is not None:
            return  # quitting already (the app has an exit code): nothing to build
        await switcher.swap(self, self._factory())
