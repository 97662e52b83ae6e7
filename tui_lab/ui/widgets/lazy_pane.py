"""A stand-in for a pane that is built (and its module imported) after the first frame."""

from __future__ import annotations

from collections.abc import Callable

from textual.widget import Widget

from tui_lab.ui.widgets.pane_tabs import PaneSwitcher


class LazyPane(Widget):
    """Swaps itself for ``factory()`` once the first frame is on screen.

    Only the Build pane is visible at start; the others (and plotext, which the
    Train pane needs) are imported and mounted right after, so the first frame
    does not wait for them. It takes the pane's id, so the pane switcher can
    show it (as "loading") before the pane exists.
    """

    DEFAULT_CSS = "LazyPane { color: $text-muted; }"

    def __init__(self, factory: Callable[[], Widget], id: str) -> None:  # noqa: A002 - Textual's name
        super().__init__(id=id)
        self._factory = factory

    def render(self) -> str:
        return "loading…"

    def on_mount(self) -> None:
        """Build the real pane after the next refresh."""
        self.call_after_refresh(self._build)

    async def _build(self) -> None:
        switcher = self.parent
        if not isinstance(switcher, PaneSwitcher) or self.app.return_code is not None:
            return  # quitting already (the app has an exit code): nothing to build
        await switcher.swap(self, self._factory())
