"""An attention heatmap: Unicode shades with colour, token labels on both axes, a cell cursor.

A matrix larger than the widget (a real model's text of a hundred tokens and
more) is shown through a window that follows the cursor: the rows and keys
that fit, and a line saying which of them are on show; page up/down move a
window's height at a time. Nothing is cut off for good and nothing is drawn
off screen.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.color import Color
from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget
from typing_extensions import Unpack

from tui_lab.core.decoding.attention_text import shade
from tui_lab.ui import key_bindings
from tui_lab.ui.widgets.widget_options import WidgetOptions

LOW = (40, 60, 110)  # dark blue for weights near 0
HIGH = (255, 210, 80)  # warm yellow for weights near 1


def colour(value: float) -> Color:
    """A colour between LOW and HIGH for a weight in [0, 1] (square-root scale shows small weights)."""
    v = min(max(value, 0.0), 1.0) ** 0.5
    return Color.from_rgb(*(lo + (hi - lo) * v for lo, hi in zip(LOW, HIGH, strict=True)))


# A mask token's labels (the lab's, BERT's, RoBERTa's): cut short, "ma" or "[M" would read
# as text, so a narrow column shows the mask as the lab types it.
MASK_LABELS = frozenset({"⟨mask⟩", "[MASK]", "<mask>"})


def short_label(label: str, width: int) -> str:
    """A token label cut to a column's width (special tokens lose their brackets; a mask is _)."""
    if len(label) > width and label in MASK_LABELS:
        return "_"
    text = label.strip("⟨⟩<>") if len(label) > width else label
    return text[:width]


def cell_text(value: float, width: int) -> str:
    """A cell: the shade repeated, with a dot for an exact zero (masked or padding)."""
    if value == 0.0:
        return "·".center(width)
    return shade(value) * width


class Heatmap(Widget, can_focus=True):
    """Rows are queries, columns keys; the arrow keys move a cursor over the cells."""

    BINDINGS = key_bindings.HEATMAP

    cursor: reactive[tuple[int, int]] = reactive((0, 0))

    @dataclass
    class CursorMoved(Message):
        """The cursor is on (row, col) whose weight is ``value``."""

        heatmap: Heatmap
        row: int
        col: int
        value: float

    def __init__(self, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.weights: list[list[float]] = []
        self.rows: list[str] = []
        self.cols: list[str] = []
        self.empty_text = "no attention yet"
        self._first_row = 0  # the window on show: its first query row and first key
        self._first_col = 0

    def set_matrix(self, weights: list[list[float]], rows: list[str], cols: list[str]) -> None:
        """Show a (Tq, Tk) matrix of weights with its query and key labels."""
        self.weights, self.rows, self.cols = weights, rows, cols
        r, c = self.cursor
        self.cursor = (min(r, max(0, len(rows) - 1)), min(c, max(0, len(cols) - 1)))
        self.refresh(layout=True)
        self._announce()

    def clear(self, text: str) -> None:
        """Show ``text`` instead of a matrix."""
        self.weights, self.rows, self.cols = [], [], []
        self.empty_text = text
        self.refresh(layout=True)

    @property
    def value(self) -> float | None:
        """The weight under the cursor."""
        r, c = self.cursor
        if 0 <= r < len(self.weights) and 0 <= c < len(self.weights[r]):
            return self.weights[r][c]
        return None

    def _announce(self) -> None:
        value = self.value
        if value is not None:
            self.post_message(self.CursorMoved(self, self.cursor[0], self.cursor[1], value))

    def action_move(self, d_row: int, d_col: int) -> None:
        """Move the cursor one cell."""
        if not self.weights:
            return
        r, c = self.cursor
        self.cursor = (
            min(max(r + d_row, 0), len(self.rows) - 1),
            min(max(c + d_col, 0), len(self.cols) - 1),
        )
        self._announce()

    def action_page(self, pages: int) -> None:
        """Move the cursor a window's height of rows up or down."""
        if self.weights:
            _, fit_rows = self._fit(self.size.width, self._available_height())
            self.action_move(pages * fit_rows, 0)

    def action_jump(self, col: int) -> None:
        """Move the cursor to the first or last key of its row."""
        if self.weights:
            self.cursor = (self.cursor[0], col % len(self.cols))
            self._announce()

    def _label_width(self) -> int:
        return min(8, max((len(r) for r in self.rows), default=1))

    def _geometry(self, width: int, height: int) -> tuple[int, int]:
        """(cell width, row height): as large as fits, up to 6x3 (a square on screen)."""
        n_rows, n_cols = max(1, len(self.rows)), max(1, len(self.cols))
        by_width = max(1, (width - self._label_width() - 2) // n_cols)
        by_height = max(1, (height - 3) // n_rows)
        row_h = max(1, min(3, by_height, by_width // 2))
        cell_w = max(1, min(by_width, 2 * row_h if row_h > 1 else 4))
        return cell_w, row_h

    def _fit(self, width: int, height: int) -> tuple[int, int]:
        """(keys, query rows) that fit in ``width`` x ``height`` at the current geometry."""
        cw, rh = self._geometry(width, height)
        cols = max(1, (width - self._label_width() - 1) // cw)
        rows = max(1, (height - 2) // rh)  # the key labels' line and the legend's
        return cols, rows

    def _window(self) -> tuple[range, range]:
        """The query rows and keys on show: all that fit, the cursor always among them."""
        width, height = self.size.width, self._available_height()
        fit_cols, fit_rows = self._fit(width, height)
        self._first_row = _follow(len(self.rows), self.cursor[0], fit_rows, self._first_row)
        self._first_col = _follow(len(self.cols), self.cursor[1], fit_cols, self._first_col)
        return (
            range(self._first_row, min(len(self.rows), self._first_row + fit_rows)),
            range(self._first_col, min(len(self.cols), self._first_col + fit_cols)),
        )

    def _available_height(self) -> int:
        """Lines the cells, labels and legend may take: the parent's, less this widget's padding."""
        parent = self.parent
        height = parent.size.height if isinstance(parent, Widget) and parent.size.height else 24
        return max(4, height - self.gutter.height)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """Rows of cells plus the key labels and the legend."""
        if not self.rows:
            return 1
        height = container.height or self._available_height()
        _, row_h = self._geometry(width, height)
        _, fit_rows = self._fit(width, height)
        return min(len(self.rows), fit_rows) * row_h + 2

    def render(self) -> Text:
        """Draw labels and cells; the cursor cell is highlighted and shows its value."""
        if not self.weights:
            return Text(self.empty_text, style="dim italic")
        lw = self._label_width()
        cw, rh = self._geometry(self.size.width, self._available_height())
        cur_c = self.cursor[1]
        shown_rows, shown_cols = self._window()
        out = Text(no_wrap=True, overflow="crop")
        out.append(" " * (lw + 1))
        for j in shown_cols:
            out.append(short_label(self.cols[j], cw).center(cw), style=self._axis_style(j == cur_c))
        out.append("\n")
        for i in shown_rows:
            self._append_row(out, i, shown_cols, (lw, cw, rh))
        windowed = len(shown_rows) < len(self.rows) or len(shown_cols) < len(self.cols)
        margin = " " * (lw + 1)
        if windowed:  # first: the legend's end is what a narrow pane crops
            out.append(margin, style="dim")
            out.append(
                f"{self.AXES[0]} {shown_rows.start + 1}-{shown_rows.stop} of {len(self.rows)}, "
                f"{self.AXES[1]} {shown_cols.start + 1}-{shown_cols.stop} of {len(self.cols)} "
                "(arrows, pgup/pgdn)  ",
                style="bold",
            )
            margin = ""
        self.draw_legend(out, margin)
        return out

    def _axis_style(self, at_cursor: bool) -> str:
        """A row or column label's style: the cursor's (reversed when focused), else dim."""
        if at_cursor:
            return "bold reverse" if self.has_focus else "bold"
        return "dim"

    def _append_row(self, out: Text, i: int, shown_cols: range, sizes: tuple[int, int, int]) -> None:
        """Row ``i``'s ``rh`` text lines: its label on the middle one, then each shown cell."""
        lw, cw, rh = sizes
        cur_r, cur_c = self.cursor
        row = self.weights[i]
        for line in range(rh):
            middle = line == rh // 2
            if middle:
                out.append(short_label(self.rows[i], lw).rjust(lw), style=self._axis_style(i == cur_r))
            else:
                out.append(" " * lw)
            out.append(" ")
            for j in shown_cols:
                value = row[j] if j < len(row) else 0.0
                if i == cur_r and j == cur_c:
                    cursor_style = (
                        Style(color="black", bgcolor="white", bold=True) if self.has_focus else Style(reverse=True)
                    )
                    text = self.cursor_text(value, cw) if middle and cw >= 3 else self.cell_text(value, cw)
                    out.append(text, style=cursor_style)
                else:
                    out.append(
                        self.cell_text(value, cw) if middle or value != 0.0 else " " * cw,
                        style=Style(color=self.colour(value)),
                    )
            out.append("\n")

    # ---- what a subclass may change: the axes' names, a cell's colour and text, the legend

    AXES = ("queries", "keys")

    def colour(self, value: float) -> Color:
        """A cell's colour (a weight in [0, 1])."""
        return colour(value)

    def cell_text(self, value: float, width: int) -> str:
        """A cell's characters."""
        return cell_text(value, width)

    def cursor_text(self, value: float, width: int) -> str:
        """The cursor cell's value, ``width`` characters."""
        return f"{value:.2f}".lstrip("0")[:width].center(width)

    def draw_legend(self, out: Text, margin: str) -> None:
        """The scale under the cells, after ``margin``."""
        out.append(margin + "weight 0 ", style="dim")
        for v in (0.1, 0.3, 0.6, 1.0):
            out.append(shade(v), style=Style(color=colour(v)))
        out.append(" 1  · = 0 (masked)", style="dim")


def _follow(n: int, cursor: int, fit: int, first: int) -> int:
    """The first of ``n`` items to show when ``fit`` fit: ``first`` moved as little as
    keeps ``cursor`` in view, and never past the end."""
    if n <= fit:
        return 0
    first = min(first, cursor)
    first = max(first, cursor - fit + 1)
    return max(0, min(first, n - fit))
