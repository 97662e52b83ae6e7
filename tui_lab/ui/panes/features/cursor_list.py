"""A list of lines with a cursor, drawn only as far as it shows: the feature list and the
typed text's tokens. Moving the cursor redraws the visible lines, nothing else."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from tui_lab.ui import keys


class CursorList(Widget, can_focus=True):
    """Rich ``Text`` lines; ``up``/``down``/page keys move the cursor (the pane's bindings
    call ``move``), ``enter`` chooses. The lines are given by ``show``."""

    BINDINGS = keys.FEATURE_LIST
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

    def __init__(self, empty: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lines: list[Text] = []
        self.empty = empty
        self._top = 0

    def show(self, lines: list[Text], cursor: int | None = None) -> None:
        """Replace the lines (the cursor kept in range, or moved to ``cursor``)."""
        self.lines = lines
        target = self.cursor if cursor is None else cursor
        self.set_reactive(CursorList.cursor, max(0, min(len(lines) - 1, target)))
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

    def watch_cursor(self) -> None:
        self.refresh()

    def render(self) -> Text:
        if not self.lines:
            return Text(self.empty, style="dim")
        height = max(1, self.size.height)
        if self.cursor < self._top:
            self._top = self.cursor
        elif self.cursor >= self._top + height:
            self._top = self.cursor - height + 1
        self._top = max(0, min(self._top, max(0, len(self.lines) - height)))
        out = Text(no_wrap=True, overflow="ellipsis")
        for row in range(self._top, min(len(self.lines), self._top + height)):
            line = self.lines[row].copy()
            if row == self.cursor:
                line.stylize("reverse" if self.has_focus else "bold underline")
            out.append_text(line)
            if row < self._top + height - 1:
                out.append("\n")
        return out

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
