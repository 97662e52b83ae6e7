"""A stand-in for a pane that is built (and its module imported) after the first frame."""

from __future__ import annotations

from collections.abc import Callable

from textual.widget import Widget


class LazyPane(Widget):
    """Replaces itself with ``factory()`` once the first frame is on screen.

    Only the Build pane is visible at start; the others (and plotext, which the
    Train pane needs) are imported and mounted right after, so the first frame
    does not wait for them.
    """

    DEFAULT_CSS = "LazyPane { display: none; }"

    def __init__(self, factory: Callable[[], Widget]) -> None:
        super().__init__()
        self._factory = factory

    def on_mount(self) -> None:
        """Build the real pane after the next refresh."""
        self.call_after_refresh(self._build)

    async def _build(self) -> None:
        parent = self.parent
        if parent is None or getattr(self.app, "_exit", False):
            return  # quitting already: nothing to build
        await parent.mount(self._factory(), after=self)  # type: ignore[attr-defined]
        await self.remove()
