"""A list of lines with a cursor, drawn line by line (Textual's line API): the feature list and
the typed text's tokens. Each drawn line is kept; moving the cursor draws only the two
lines whose look changed (a 30-line list drawn whole cost 14 ms a key under load)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget
from typing_extensions import Unpack

from tui_lab.ui import key_bindings
from tui_lab.ui.widgets.widget_options import WidgetOptions


class CursorList(Widget, can_focus=True):
    """Rich ``Text`` lines; ``up``/``down``/page keys move the cursor (the pane's bindings
    call ``move``), ``enter`` chooses. The lines are given by ``show``."""

    BINDINGS = key_bindings.FEATURE_LIST
    cursor: reactive[int] = reactive(0, layout=False)

    @dataclass
    class Moved(Message):
        """The cursor is on line ``index``."""

        sender: CursorList
        index: int

    @dataclass
    class Chosen(Message):
        """Enter on line ``index``."""

        sender: CursorList
        index: int

    def __init__(self, empty: str = "", **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.lines: list[Text] = []
        self.empty = empty
        self._top = 0  # the first line on show
        self._strips: dict[tuple[int, str, int], Strip] = {}  # (line, look, width) -> drawn
        self._base: Style | None = None

    def show(self, lines: list[Text], cursor: int | None = None) -> None:
        """Replace the lines (the cursor kept in range, or moved to ``cursor``)."""
        self.lines = lines
        self._strips.clear()
        target = self.cursor if cursor is None else cursor
        self.set_reactive(CursorList.cursor, max(0, min(len(lines) - 1, target)))
        self._follow()
        self.refresh()

    def move(self, delta: int) -> None:
        """Move the cursor by ``delta`` lines (clamped); tell the pane."""
        if not self.lines:
            return
        new = max(0, min(len(self.lines) - 1, self.cursor + delta))
        if new != self.cursor:
            self.cursor = new
            self.post_message(self.Moved(self, new))

    def action_move(self, delta: int) -> None:
        """Up/down/page/home/end: move the cursor."""
        self.move(delta)

    def action_choose(self) -> None:
        """Enter: choose the line under the cursor."""
        self.choose()

    def choose(self) -> None:
        if self.lines:
            self.post_message(self.Chosen(self, self.cursor))

    def watch_cursor(self, old: int, new: int) -> None:
        """Redraw the two lines whose look changed, or all of them when the view scrolled."""
        top = self._top
        self._follow()
        if self._top != top:
            self.refresh()
            return
        for row in (old, new):
            if top <= row < top + self.size.height:
                self.refresh(Region(0, row - top, self.size.width, 1))

    def _follow(self) -> None:
        """Scroll the view so the cursor's line shows."""
        height = max(1, self.size.height)
        if self.cursor < self._top:
            self._top = self.cursor
        elif self.cursor >= self._top + height:
            self._top = self.cursor - height + 1
        self._top = max(0, min(self._top, max(0, len(self.lines) - height)))

    def on_resize(self) -> None:
        self._follow()
        self.refresh()

    def _look(self, row: int) -> str:
        if row != self.cursor:
            return ""
        return "reverse" if self.has_focus else "bold underline"

    def render_line(self, y: int) -> Strip:
        """Line ``y`` of the view, drawn once per look (plain, cursor, cursor with focus)."""
        width = self.size.width
        if self._base is None:
            self._base = self.rich_style
        base = self._base
        row = self._top + y
        if not self.lines:
            text = Text(self.empty, style="dim") if y == 0 else Text()
            return self._draw(text, width, base)
        if row >= len(self.lines):
            return Strip.blank(width, base)
        look = self._look(row)
        key = (row, look, width)
        strip = self._strips.get(key)
        if strip is None:
            line = self.lines[row].copy()
            if look:
                line.stylize(look)
            strip = self._strips[key] = self._draw(line, width, base)
        return strip

    def _draw(self, text: Text, width: int, base: Style) -> Strip:
        console = self.app.console
        options = console.options.update(width=max(1, width), height=1, no_wrap=True, overflow="ellipsis")
        segments = [s for s in console.render(text, options) if s.text != "\n"]
        return Strip(list(Segment.apply_style(segments, base))).adjust_cell_length(width, base)

    def on_focus(self) -> None:
        self._strips = {k: v for k, v in self._strips.items() if not k[1]}
        self.refresh()

    def on_blur(self) -> None:
        self._strips = {k: v for k, v in self._strips.items() if not k[1]}
        self.refresh()
