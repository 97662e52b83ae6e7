"""All heads of one attention module side by side, as small shaded maps."""

from __future__ import annotations

from rich.columns import Columns
from rich.panel import Panel
from rich.style import Style
from rich.text import Text
from textual.widgets import Static

from tui_lab.ui.widgets.heatmap import cell_text, colour, short_label


def small_map(weights: list[list[float]], rows: list[str], cols: list[str], cell: int) -> Text:
    """A compact heatmap: one-character row labels, ``cell`` columns per key."""
    out = Text(no_wrap=True)
    out.append("  ")
    for label in cols:
        out.append(short_label(label, cell).center(cell), style="dim")
    for label, row in zip(rows, weights, strict=False):
        out.append("\n")
        out.append(short_label(label, 1).rjust(1) + " ", style="dim")
        for value in row[: len(cols)]:
            out.append(cell_text(value, cell), style=Style(color=colour(value)))
    return out


class HeadGrid(Static):
    """The overview: every head of the selected layer and kind (the selected head outlined)."""

    def show(
        self,
        heads: list[list[list[float]]],
        rows: list[str],
        cols: list[str],
        selected: int,
        title: str,
        width: int,
    ) -> None:
        """Lay out one small map per head, as many per line as fit in ``width``."""
        n = max(1, len(heads))
        cell = 2 if (len(cols) * 2 + 6) * min(n, 4) <= width else 1
        panels = []
        for h, weights in enumerate(heads):
            chosen = h == selected
            panels.append(
                Panel(
                    small_map(weights, rows, cols, cell),
                    title=f"head {h + 1}",
                    title_align="left",
                    border_style="bold yellow" if chosen else "dim",
                    expand=False,
                    padding=(0, 0),
                )
            )
        header = Text(
            f"{title}: all {len(heads)} heads (h picks one, a returns to a single head)\n",
            style="dim",
        )
        from rich.console import Group

        self.update(Group(header, Columns(panels, padding=(0, 1))))
