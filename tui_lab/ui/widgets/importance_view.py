"""Which head does the work: the exact-match drop per ablated head, beside the baseline.

For a real model (no task with right answers), the rise of its loss on the
typed text with each head switched off instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from tui_lab.ui.widgets.text_table import ColumnSpec, TextTable

if TYPE_CHECKING:
    from tui_lab.core.analysis.heads.head_importance import ImportanceTable
    from tui_lab.core.analysis.heads.text_ablation import TextImportance

BAR_WIDTH = 8
EXACT_COLUMNS: tuple[ColumnSpec, ...] = (
    {"header": "head", "no_wrap": True},
    {"header": "exact", "justify": "right", "no_wrap": True},
    {"header": "drop", "justify": "right", "no_wrap": True},
    {"header": "", "no_wrap": True},
)
LOSS_COLUMNS: tuple[ColumnSpec, ...] = (
    {"header": "head", "no_wrap": True},
    {"header": "loss", "justify": "right", "no_wrap": True},
    {"header": "rise", "justify": "right", "no_wrap": True},
    {"header": "", "no_wrap": True},
)


def drop_bar(drop: float, width: int = BAR_WIDTH) -> Text:
    """A bar as long as the drop (0..1 of exact match); a gain shows as a dim dash."""
    if drop <= 0:
        return Text("–" if drop < 0 else "", style="dim")
    n = max(1, round(min(1.0, drop) * width))
    return Text("█" * n, style="red")


def progress_line(done: int, total: int, what: str, width: int = 20) -> Text:
    """``importance ████░░░░ 3/6 heads (zero, N=200)``."""
    filled = round(width * done / total) if total else 0
    text = Text("importance ", style="dim")
    text.append("█" * filled, style="yellow")
    text.append("░" * (width - filled), style="dim")
    text.append(f" {done}/{total} heads ({what})", style="dim")
    return text


class ImportanceView(Vertical):
    """A status line (progress, baseline, cache) over the table of heads by drop."""

    DEFAULT_CSS = """
    ImportanceView {
        display: none;
        width: 50;
        height: 1fr;
        border-left: solid $panel-lighten-2;
        padding: 0 1;
    }
    ImportanceView #importance-status { height: auto; }
    ImportanceView #importance-table { height: 1fr; }
    """

    def compose(self) -> ComposeResult:
        yield Static(id="importance-status")
        yield TextTable(*EXACT_COLUMNS, id="importance-table")

    def show_message(self, text: str) -> None:
        """One line instead of a result (nothing to compute, or why it failed)."""
        self.query_one("#importance-status", Static).update(Text(text, style="dim"))

    def show_progress(self, done: int, total: int, what: str) -> None:
        """How many heads have been measured so far."""
        self.query_one("#importance-status", Static).update(progress_line(done, total, what))

    def show_table(self, table: ImportanceTable, cached: bool, where: str) -> None:
        """A core ``ImportanceTable``: the baseline above, one row per head (largest drop first)."""
        status = Text("baseline ", style="dim")
        status.append(f"{table.baseline:.1%}", style="bold")
        status.append(f" exact match · N={table.n} · {table.mode}", style="dim")
        status.append(f"\n{where}{' · cached' if cached else ''}", style="dim italic")
        self.query_one("#importance-status", Static).update(status)
        rows = [
            (row.head, f"{row.exact_match:.1%}", f"{row.drop:+.1%}", drop_bar(row.drop))
            for row in table.rows
        ]
        view = self.query_one("#importance-table", TextTable)
        view.set_columns(*EXACT_COLUMNS)
        view.show(rows)

    def show_loss_table(self, table: TextImportance, where: str) -> None:
        """A core ``TextImportance``: the loss on the text, and its rise per head switched off."""
        status = Text("loss ", style="dim")
        status.append(f"{table.baseline:.3f}", style="bold")
        status.append(f" nats/token over {table.n_tokens} predictions · {table.mode}", style="dim")
        status.append(f"\n{where}", style="dim italic")
        self.query_one("#importance-status", Static).update(status)
        largest = max((row.rise for row in table.rows), default=0.0)
        rows = [
            (
                row.head,
                f"{row.loss:.3f}",
                f"{row.rise:+.3f}",
                drop_bar(row.rise / largest if largest > 0 else 0.0),
            )
            for row in table.rows
        ]
        view = self.query_one("#importance-table", TextTable)
        view.set_columns(*LOSS_COLUMNS)
        view.show(rows)
