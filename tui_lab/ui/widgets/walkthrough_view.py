"""The walkthrough: one query row's raw scores, scaled scores, softmax and weighted sum."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from tui_lab.core.analysis.basics.walkthrough import WalkRow


def _num(x: float) -> str:
    return f"{x:+.3f}" if abs(x) < 1000 else f"{x:+.2e}"


class WalkthroughView(Static):
    """Shows ``softmax(q·k / sqrt(d)) v`` written out for the cursor's query row."""

    def show_message(self, text: str) -> None:
        """A line instead of numbers (loading, nothing decoded, ...)."""
        self.update(Text(text, style="dim italic"))

    def show_row(self, row: WalkRow) -> None:
        """Render the table of intermediate numbers and the output vector."""
        title = Text()
        title.append("Walkthrough ", style="bold")
        title.append(f"{row.name} head {row.head + 1}, query ", style="dim")
        title.append(f"{row.query!r}", style="bold")
        title.append(f" (row {row.row + 1})", style="dim")
        scores = f"q·k / √{row.d_head}" if row.scale is None else f"q·k × {row.scale:g}"
        formula = Text(f"w = softmax({scores}),  out = Σ w·v", style="italic dim")
        table = Table(box=None, padding=(0, 1), show_edge=False, header_style="bold")
        table.add_column("key", no_wrap=True)
        table.add_column("q·k", justify="right")
        table.add_column(row.scale_label, justify="right")
        table.add_column("softmax", justify="right")
        for j, key in enumerate(row.keys):
            if row.masked[j]:
                table.add_row(
                    key,
                    Text("masked", style="dim"),
                    Text("-∞", style="dim"),
                    Text("0", style="dim"),
                )
                continue
            w = row.weights[j]
            table.add_row(
                key,
                _num(row.raw[j]),
                _num(row.scaled[j]),
                Text(f"{w:.3f}", style="bold" if w > 0.3 else ""),
            )
        total = Text(f"Σ softmax = {sum(row.weights):.3f}", style="dim")
        shown = ", ".join(f"{x:+.2f}" for x in row.output[:8])
        more = ", …" if len(row.output) > 8 else ""
        out = Text()
        out.append("out = Σ w·v = ", style="dim")
        out.append(f"[{shown}{more}]")
        out.append(f"  ({row.d_head} dims)", style="dim")
        check = Text(
            f"matches the captured weights (max diff {row.max_diff:.1e})"
            if row.captured and row.max_diff < 1e-4
            else f"differs from the captured weights by {row.max_diff:.1e}",
            style="green" if row.captured and row.max_diff < 1e-4 else "yellow",
        )
        self.update(Group(title, formula, table, total, out, check))
