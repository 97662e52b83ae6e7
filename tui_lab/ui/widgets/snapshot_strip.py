"""The time-travel strip: which snapshot is on show, the run's loss curve with a marker there."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

from tui_lab.ui.state.travel import TimeTravel, sparkline, value_at

if TYPE_CHECKING:
    from tui_lab.core.runs.curves import RunCurves

KEYS_HINT = "[ ] step · { } first/last · p play"
SHORT_HINT = "[ ] { } p"  # when the full hint does not fit on the line


class SnapshotStrip(Static):
    """Two lines over a pane: the step on show and its exact match; the loss curve, marked.

    Always two lines (the first cut short with an ellipsis rather than wrapped), so
    stepping never moves the heatmap below it and a redraw needs no layout pass.
    """

    DEFAULT_CSS = """
    SnapshotStrip {
        height: 2; display: none; padding: 0 1;
        text-wrap: nowrap; text-overflow: ellipsis;
    }
    """

    # The last sparkline drawn: its values (the list itself), their count, its width, the line.
    _spark_cache: tuple[list[float], int, int, str] | None = None

    def show(self, state: TimeTravel, curves: RunCurves | None, total_steps: int | None) -> None:
        """Draw ``state`` over ``curves`` (a RunCurves or None); hidden without history."""
        self.display = bool(state.steps)
        if not state.steps:
            return
        head = Text()
        head.append("▶ playing · " if state.playing else "history · ", style="bold cyan")
        head.append(state.describe(total_steps), style="bold")
        step = state.step
        loss = curves.train_loss if curves is not None else None
        if step is not None and curves is not None:
            em = value_at(curves.exact_match.steps, curves.exact_match.values, step)
            if em is not None:
                head.append(f" · exact match {em[1]:.0%}", style="green")
                head.append(f" (eval at step {em[0]:,})" if em[0] != step else "", style="dim")
            at = value_at(loss.steps, loss.values, step) if loss is not None else None
            if at is not None:
                head.append(f" · loss {at[1]:.3f}", style="yellow")
        # Not laid out yet (just shown, or its pane hidden): about the screen's width, less padding.
        avail = self.size.width or max(20, self.app.size.width - 4)
        room = avail - head.cell_len
        hint = next((h for h in (KEYS_HINT, SHORT_HINT) if len(h) + 3 <= room), KEYS_HINT)
        head.append(f"   {hint}", style="dim")
        line = Text("loss ", style="dim")
        width = max(10, avail - 8)
        if loss is not None and loss.values:
            spark = self._spark(loss.values, width)
            marker = self._column(loss.steps, step, len(spark))
            if marker is None:
                line.append(spark, style="blue")
            else:  # the curve in three runs: before the marker, the marker, after it
                line.append(spark[:marker], style="blue")
                line.append(spark[marker], style="bold reverse yellow")
                line.append(spark[marker + 1 :], style="blue")
        else:
            line.append("(no loss recorded yet)", style="dim italic")
        self.update(Text("\n").join([head, line]), layout=False)  # two lines, always

    def _spark(self, values: list[float], width: int) -> str:
        """The loss curve's sparkline, worked out again only when the curve or width changed."""
        # The list itself is kept (not its id): a new curve is never taken for the old one.
        cached = self._spark_cache
        if cached is None or cached[0] is not values or cached[1:3] != (len(values), width):
            cached = self._spark_cache = (values, len(values), width, sparkline(values, width))
        return cached[3]

    @staticmethod
    def _column(steps: list[int], step: int | None, width: int) -> int | None:
        """The column of ``step`` on a curve spanning ``steps`` drawn ``width`` wide."""
        if step is None or not steps or width <= 0:
            return None
        lo, hi = steps[0], steps[-1]
        if hi <= lo:
            return 0
        return max(0, min(width - 1, round((step - lo) / (hi - lo) * (width - 1))))
