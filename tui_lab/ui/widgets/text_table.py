"""A read-only table drawn as one block of text in a focusable view that scrolls both ways.

The Params and Decode tables are only read and scrolled. Textual's DataTable
throws away every rendered row whenever it gains or loses focus or is shown
again, so a pane holding one took two to four times longer to appear. This
renders the rows once per change, with Rich, and keeps them.
"""

from __future__ import annotations

import io
from typing import Any

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import ScrollableContainer
from textual.widgets import Static

_WIDE = Console(width=1000, file=io.StringIO())  # only measures, never prints


class TextTable(ScrollableContainer):
    """Columns given as Rich ``Column`` keyword arguments; ``show`` replaces the rows.

    The table keeps its natural width and scrolls sideways where the pane is narrower.
    """

    def __init__(self, *columns: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._columns = columns

    def compose(self) -> ComposeResult:
        yield self._draw(Static(classes="text-table-rows"), [])

    def _table(self, rows: list[tuple[Any, ...]]) -> Table:
        # Rich keeps cells in its Column objects, so each table gets new ones.
        table = Table(
            *(Column(**spec) for spec in self._columns),
            box=box.SIMPLE_HEAD,
            header_style="bold",
            pad_edge=False,
        )
        for row in rows:
            table.add_row(*row)
        return table

    def show(self, rows: list[tuple[str | Text, ...]]) -> None:
        """Draw these rows (cells are strings or Rich Text) under the header."""
        self._draw(self.query_one(Static), rows)

    def _draw(self, block: Static, rows: list[tuple[Any, ...]]) -> Static:
        table = self._table(rows)
        # As wide as the table wants: Rich would squeeze it into the pane's width.
        block.styles.width = Measurement.get(_WIDE, _WIDE.options, table).maximum
        block.update(table)
        return block
