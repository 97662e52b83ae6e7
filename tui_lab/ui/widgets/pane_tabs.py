"""The panes: one on show at a time, named in a one-line tab bar.

Textual's TabbedContent nests three full-screen containers and a dozen tab
widgets around each pane. Repainting them, and restyling the tabs, took about
half of a pane switch's 50 ms budget on a two-core machine that is training a
model. A line of text and a container that toggles its children's ``display``
do the same job: switching panes repaints the new pane and one line.
"""

from __future__ import annotations

from typing import Any

from textual import events
from textual.containers import Container
from textual.content import Content
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.widget import Widget


def pane_widget_id(name: str) -> str:
    """The DOM id of a pane (or of its stand-in until it is built): ``train-pane``."""
    return f"{name}-pane"


class PaneTabs(Widget):
    """`` 1 Build   2 Train  …``: the pane on show stands out; a click switches."""

    DEFAULT_CSS = """
    PaneTabs {
        height: 1;
        background: $surface;
        color: $text-muted;
    }
    """

    active: reactive[str] = reactive("")

    def __init__(self, tabs: list[tuple[str, str]], active: str, **kwargs: Any) -> None:
        """``tabs``: (pane id, its tab's text: "1 Build"), in order."""
        super().__init__(**kwargs)
        self._tabs = tabs
        self.set_reactive(PaneTabs.active, active)

    def _labels(self) -> list[tuple[str, str]]:
        return [(name, f" {text} ") for name, text in self._tabs]

    def render(self) -> Content:
        parts: list[Content | str] = []
        for name, label in self._labels():
            style = "bold $text on $primary" if name == self.active else ""
            parts += [Content.styled(label, style), " "]
        return Content.assemble(*parts)

    async def on_click(self, event: events.Click) -> None:
        """A click on a tab shows its pane (through the app, as the pane keys do)."""
        x = 0
        for name, label in self._labels():
            if x <= event.x < x + len(label):
                await self.app.run_action(f"show_pane('{name}')")
                return
            x += len(label) + 1


class PaneSwitcher(Container):
    """Holds the panes and shows the active one; the others keep their state, hidden."""

    # A pane is drawn once, beneath the one on show, as soon as it is built:
    # Textual keeps a widget's drawn lines while it is hidden, so its first
    # showing costs what any later one does (a first drawing of the Decode
    # pane took ~60 ms). An inline style puts it on the lower layer for that
    # frame: a CSS class would restyle, and so redraw, every widget in it.
    # (Textual takes layer names from the outermost ancestor that lists them:
    # the screen's ``layers`` in app.tcss start with "warming".)
    DEFAULT_CSS = """
    PaneSwitcher {
        height: 1fr;
        padding: 0 1;
    }
    PaneSwitcher > * {
        layer: base;
    }
    """

    def __init__(self, *panes: Widget, active: str, warm: bool = True, **kwargs: Any) -> None:
        for pane in panes:
            pane.display = pane.id == pane_widget_id(active)
        super().__init__(*panes, **kwargs)
        self.active = active
        self._warm_queue: list[Widget] = []
        self._warming: Widget | None = None  # the pane on the lower layer now
        self.drawn_beneath: set[str] = set()  # ids of the panes drawn out of sight
        self.warms = warm  # whether a pane mounted out of sight is drawn there once

    def show(self, name: str) -> None:
        """Put pane ``name`` on show (a no-op if it already is)."""
        if name == self.active:
            return
        hidden, self.active = self.active, name
        for pane_name, shown in ((hidden, False), (name, True)):
            try:
                pane = self.get_child_by_id(pane_widget_id(pane_name))
            except NoMatches:
                continue  # a stand-in is being swapped for its pane: ``swap`` sets it
            if pane in self._warm_queue:
                self._warmed(pane)
            pane.styles.layer = "base"
            pane.display = shown

    async def swap(self, stand_in: Widget, pane: Widget) -> None:
        """Replace a pane's stand-in with the pane (same id), shown if it is active."""
        await stand_in.remove()
        pane.display = pane.id == pane_widget_id(self.active)
        await self.mount(pane)
        if not pane.display and self.warms:
            self.warm(pane)

    def warm(self, pane: Widget) -> None:
        """Draw hidden ``pane`` for one frame beneath the pane on show (one pane at a time)."""
        self._warm_queue.append(pane)
        if self._warming is None:
            self._warm_first()

    def _warm_first(self) -> None:
        if self._warming is not None or not self._warm_queue:
            return
        pane = self._warm_queue[0]
        if pane.display or not pane.is_attached:  # shown (or gone) meanwhile
            self._warmed(pane)
            return
        self._warming = pane
        pane.styles.layer = "warming"
        pane.display = True
        self.call_after_refresh(self._cool, pane, 20)

    def _cool(self, pane: Widget, tries: int) -> None:
        if self._warming is not pane:
            return  # shown by ``show`` meanwhile
        if not pane.region and tries > 0:  # not laid out (so not drawn) yet
            self.call_after_refresh(self._cool, pane, tries - 1)
            return
        if pane.region:
            self.drawn_beneath.add(str(pane.id))
        pane.styles.layer = "base"
        pane.display = pane.id == pane_widget_id(self.active)
        self._warmed(pane)

    def _warmed(self, pane: Widget) -> None:
        if pane in self._warm_queue:
            self._warm_queue.remove(pane)
        if self._warming is pane:
            self._warming = None
        if self._warm_queue:
            self.call_after_refresh(self._warm_first)
