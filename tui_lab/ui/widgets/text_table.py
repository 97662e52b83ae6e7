"""A read-only table drawn as lines of text in a focusable view that scrolls both ways.

The Params and Decode tables are only read and scrolled. Textual's DataTable
throws away every rendered row whenever it gains or loses focus or is shown
again; a Rich table in a Static is laid out twice (once to learn its height)
each time its pane is shown after a change. This lays the table out once per
change, with Rich, keeps the lines, and does it ahead of time (when the
application is idle) while its pane is hidden, so that showing the pane is
cheap.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import TypedDict

from rich import box
from rich.console import Console, JustifyMethod, RenderableType
from rich.measure import Measurement
from rich.segment import Segment
from rich.style import Style
from rich.table import Column, Table
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer
from typing_extensions import Unpack

from tui_lab.ui.widgets.quiet_focus import QuietFocus
from tui_lab.ui.widgets.widget_options import WidgetOptions

_WIDE = Console(width=1000, file=io.StringIO())  # only measures, never prints
PRERENDER_DELAY = 0.25  # seconds after the last change, while the table is hidden


class ColumnSpec(TypedDict, total=False):
    """The ``rich.table.Column`` keyword arguments a table's column is given."""

    header: RenderableType
    justify: JustifyMethod
    no_wrap: bool
    style: str


Row = tuple[RenderableType | None, ...]  # a row's cells: strings or Rich Text


class TextTable(ScrollView, QuietFocus, can_focus=True):
    """Columns given as Rich ``Column`` keyword arguments; ``show`` replaces the rows.

    The table keeps its natural width and scrolls sideways where the pane is narrower.
    """

    def __init__(self, *columns: ColumnSpec, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self._columns = columns
        self._table: Table | None = None
        self._lines: list[list[Segment]] | None = None  # laid out, not yet styled
        self._strips: dict[int, Strip] = {}
        self._timer: Timer | None = None
        self._base: Style | None = None  # the widget's style: resolving it walks the DOM

    def on_mount(self) -> None:
        """An empty table shows its header."""
        self.show([])

    def set_columns(self, *columns: ColumnSpec) -> None:
        """Use these columns (``rich.table.Column`` keyword dicts) from the next ``show`` on."""
        self._columns = columns

    def show(self, rows: Sequence[Row]) -> None:
        """Draw these rows (cells are strings or Rich Text) under the header."""
        # Rich keeps cells in its Column objects, so each table gets new ones.
        table = Table(
            *(Column(**spec) for spec in self._columns),
            box=box.SIMPLE_HEAD,
            header_style="bold",
            pad_edge=False,
        )
        for row in rows:
            table.add_row(*row)
        self._table, self._lines = table, None
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if self.display and self.region:
            self._lay_out()
        else:  # hidden: lay out once the changes stop coming, before it is shown
            self._timer = self.set_timer(PRERENDER_DELAY, self._lay_out)

    def _lay_out(self) -> None:
        self._timer = None
        if self._lines is not None or self._table is None:
            return
        # As wide as the table wants: Rich would squeeze it into the pane's width.
        width = Measurement.get(_WIDE, _WIDE.options, self._table).maximum
        console = self.app.console
        options = console.options.update(width=width, height=None)
        self._lines = console.render_lines(self._table, options, pad=True)
        self._strips.clear()
        self.virtual_size = Size(width, len(self._lines))
        self.refresh()

    def notify_style_update(self) -> None:
        """A theme or CSS change: draw again with the new background."""
        super().notify_style_update()
        self._strips.clear()
        self._base = None

    @property
    def text(self) -> str:
        """The table as plain text, one line per row (what a reader of the pane sees)."""
        self._lay_out()
        return "\n".join("".join(s.text for s in line).rstrip() for line in self._lines or [])

    def render_line(self, y: int) -> Strip:
        """One line of the table, scrolled sideways to the view."""
        if self._lines is None:
            self._lay_out()
        scroll_x, scroll_y = self.scroll_offset
        index = y + scroll_y
        width = self.scrollable_content_region.width
        if self._base is None:
            self._base = self.rich_style
        base = self._base
        strip = self._strips.get(index)
        if strip is None:
            line = self._lines[index] if self._lines and index < len(self._lines) else []
            strip = Strip(list(Segment.apply_style(line, base)))
            self._strips[index] = strip
        return strip.crop_extend(scroll_x, scroll_x + width, base)
