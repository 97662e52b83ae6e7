"""A table with a row cursor that draws only the lines on show (the Runs pane's table).

Textual's DataTable re-renders every visible cell whenever it is shown again
or its focus changes, and measures every cell of every new row: with 200 run
folders, showing the Runs pane took ~350 ms. This one keeps the rows as Rich
``Text`` cells, sizes columns from their plain text, and renders a line (and
caches it) only when it is on screen; a sort or a live update replaces the
rows and clears that cache.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from typing_extensions import Unpack

from tui_lab.ui import key_bindings
from tui_lab.ui.widgets.quiet_focus import QuietFocus
from tui_lab.ui.widgets.widget_options import WidgetOptions

GAP = 2  # spaces between columns


@dataclass(frozen=True)
class TableColumn:
    """A column: its key, header, alignment, and the most cells it may take (None: no cap)."""

    key: str
    header: str
    right: bool = False
    cap: int | None = None


class RunTable(ScrollView, QuietFocus, can_focus=True):
    """Rows of Text cells under a fixed header line; arrows move the cursor, enter selects."""

    COMPONENT_CLASSES = {"run-table--cursor", "run-table--header"}
    DEFAULT_CSS = """
    RunTable > .run-table--cursor { background: $accent 30%; }
    RunTable:focus > .run-table--cursor { background: $accent 60%; }
    RunTable > .run-table--header { text-style: bold; color: $text; }
    """
    BINDINGS = key_bindings.RUN_TABLE

    class Highlighted(Message):
        """The cursor is on another row (``key``)."""

        def __init__(self, key: str | None) -> None:
            super().__init__()
            self.key = key

    class Selected(Message):
        """Enter (or a double click) on row ``key``."""

        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

    class HeaderClicked(Message):
        """A click on the header of column ``column``."""

        def __init__(self, column: str) -> None:
            super().__init__()
            self.column = column

    def __init__(self, columns: list[TableColumn], **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.columns = columns
        self.keys: list[str] = []
        self.cells: list[list[Text]] = []
        self.widths = [len(c.header) for c in columns]
        self.cursor = 0
        self.sort_mark: tuple[str, bool] | None = None  # (column, reversed): an arrow in its header
        self._strips: dict[tuple[int, bool], Strip] = {}
        self._styles: tuple[Style, Style, Style] | None = None

    # ---- data ------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        """How many rows the table holds."""
        return len(self.keys)

    @property
    def cursor_key(self) -> str | None:
        """The key of the row under the cursor (None when empty)."""
        return self.keys[self.cursor] if self.keys else None

    def show(self, rows: list[tuple[str, list[Text]]], keep: str | None = None) -> None:
        """Replace the rows; the cursor stays on row ``keep`` (else the highlighted key) if present."""
        keep = keep if keep is not None else self.cursor_key
        self.keys = [key for key, _ in rows]
        self.cells = [cells for _, cells in rows]
        sorted_by = self.sort_mark[0] if self.sort_mark else None
        widths = [len(c.header) + (2 if c.key == sorted_by else 0) for c in self.columns]
        for cells in self.cells:
            for i, text in enumerate(cells):
                widths[i] = max(widths[i], len(text.plain))
        self.widths = [
            min(w, c.cap) if c.cap else w for w, c in zip(widths, self.columns, strict=True)
        ]
        self.cursor = (
            self.keys.index(keep)
            if keep in self.keys
            else min(self.cursor, max(0, len(self.keys) - 1))
        )
        self._strips.clear()
        self.virtual_size = Size(sum(self.widths) + GAP * len(self.widths), len(self.keys) + 1)
        self.refresh()
        self.post_message(self.Highlighted(self.cursor_key))

    def row_text(self, index: int) -> str:
        """Row ``index`` as plain text (for tests and readers)."""
        return " ".join(t.plain for t in self.cells[index])

    def move_to(self, key: str) -> None:
        """Put the cursor on row ``key``."""
        if key in self.keys:
            self._set_cursor(self.keys.index(key))

    # ---- drawing ---------------------------------------------------------------------

    def notify_style_update(self) -> None:
        """A theme or CSS change: draw again with the new colours."""
        super().notify_style_update()
        self._strips.clear()
        self._styles = None

    def focus_changed(self) -> None:
        """Only the cursor line shows focus."""
        self._strips = {k: v for k, v in self._strips.items() if not k[1]}
        self.refresh()

    def _line(self, cells: list[Text], style: Style) -> Strip:
        segments: list[Segment] = []
        for text, width, column in zip(cells, self.widths, self.columns, strict=True):
            cell = text.copy()
            cell.truncate(width, overflow="ellipsis")
            pad = " " * (width - cell.cell_len)
            if column.right:
                segments.append(Segment(pad, style))
            segments.extend(
                Segment(seg.text, style + seg.style if seg.style else style)
                for seg in cell.render(self.app.console)
            )
            if not column.right:
                segments.append(Segment(pad, style))
            segments.append(Segment(" " * GAP, style))
        return Strip(segments)

    def render_line(self, y: int) -> Strip:
        """The header line, or one row (cached), scrolled sideways to the view."""
        if self._styles is None:
            self._styles = (
                self.rich_style,
                self.rich_style + self.get_component_rich_style("run-table--cursor"),
                self.rich_style + self.get_component_rich_style("run-table--header"),
            )
        base, cursor, header = self._styles
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        if y == 0:
            mark = self.sort_mark
            titles = [
                Text(c.header + ((" ↓" if mark[1] else " ↑") if mark and mark[0] == c.key else ""))
                for c in self.columns
            ]
            strip = self._line(titles, header)
        else:
            index = y - 1 + scroll_y
            if index >= len(self.keys):
                return Strip.blank(width, base)
            on_cursor = index == self.cursor
            cached = self._strips.get((index, on_cursor))
            if cached is None:
                cached = self._line(self.cells[index], cursor if on_cursor else base)
                self._strips[(index, on_cursor)] = cached
            strip = cached
        return strip.crop_extend(scroll_x, scroll_x + width, base)

    # ---- moving ----------------------------------------------------------------------

    def _set_cursor(self, index: int) -> None:
        index = max(0, min(index, len(self.keys) - 1))
        if index == self.cursor or not self.keys:
            return
        self.cursor = index
        height = max(1, self.scrollable_content_region.height - 1)
        if index < self.scroll_y:
            self.scroll_to(y=index, animate=False)
        elif index >= self.scroll_y + height:
            self.scroll_to(y=index - height + 1, animate=False)
        self.refresh()
        self.post_message(self.Highlighted(self.cursor_key))

    def action_move(self, rows: int) -> None:
        """Move the cursor up or down by ``rows``."""
        self._set_cursor(self.cursor + rows)

    def action_select(self) -> None:
        """Select the row under the cursor."""
        if self.keys:
            self.post_message(self.Selected(self.keys[self.cursor]))

    def on_click(self, event: events.Click) -> None:
        """A click on the header sorts by that column; on a row, puts the cursor there."""
        if event.y == 0:
            x = event.x + self.scroll_x
            for column, width in zip(self.columns, self.widths, strict=True):
                if x < width + GAP:
                    self.post_message(self.HeaderClicked(column.key))
                    return
                x -= width + GAP
            return
        self._set_cursor(event.y - 1 + int(self.scroll_y))
        if event.chain == 2:
            self.action_select()
