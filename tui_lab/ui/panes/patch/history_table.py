"""The Patch pane's history view: each head's patching effect over the run's snapshots,
beside the atlas's score of its best pattern over the same steps (watch a circuit become
causal while its attention pattern forms)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from tui_lab.ui.panes.patch.patch_view import atlas_labels, head_name
from tui_lab.ui.state.travel import sparkline

if TYPE_CHECKING:
    from tui_lab.core.analysis.heads.head_curves import ScoreCurves
    from tui_lab.core.analysis.patching.patching_history import HistoryPatching

SPARK = 24  # characters per curve


def marked(line: str, column: int | None) -> Text:
    """A sparkline with the step on show highlighted."""
    out = Text(line)
    if column is not None and 0 <= column < len(line):
        out.stylize("reverse", column, column + 1)
    return out


def column_of(index: int | None, n: int, width: int) -> int | None:
    """Where history index ``index`` of ``n`` falls on a ``width``-character sparkline."""
    if index is None or n <= 0:
        return None
    return index if n <= width else min(width - 1, index * width // n)


def history_text(history: HistoryPatching, curves: ScoreCurves | None, step_index: int | None, width: int = SPARK) -> Text:
    """One line per cell that is a head: its effect over steps (the patched grid's values on
    a scale from 0, or down to -1, to 1; beyond it clipped) and the atlas's best-pattern score over the same steps."""
    steps = list(history.steps)
    out = Text(no_wrap=True, overflow="crop")
    out.append(f"{history.method} patching of {history.site} over {len(steps)} snapshots "
               f"(steps {steps[0]}-{steps[-1]})\n", style="bold")
    out.append(f"{'head':<7}{'effect over steps':<{width + 2}}{'now':>6}   "
               f"{'atlas score over steps':<{width + 2}}pattern\n", style="dim")
    where = column_of(step_index, len(steps), width)
    rows = _head_rows(history)
    if not rows:
        out.append("this site's cells are positions, not heads: s cycles to z, pattern, q, k or v",
                   style="yellow")
        return out
    # 0 (the corrupted run) to 1 (the clean run), down to -1 at most: early snapshots, where the
    # clean and corrupted runs barely differ, normalise to huge values that would flatten the rest
    lo, hi = max(-1.0, min(0.0, *(v for _, vals in rows for v in vals))), 1.0
    for head, values in rows:
        at = step_index if step_index is not None else len(values) - 1
        out.append(f"{head:<7}", style="bold")
        out.append_text(marked(sparkline(values, width, lo, hi), where))
        out.append(f"  {values[at]:+.2f}   ")
        pattern, scores = _atlas_curve(curves, head)
        if scores:
            out.append_text(marked(sparkline(scores, width, 0.0, 1.0), where))
            out.append(f"  {pattern} {scores[min(at, len(scores) - 1)]:.2f}")
        else:
            out.append("(atlas curves not scored yet)", style="dim")
        out.append("\n")
    return out


def _head_rows(history: HistoryPatching) -> list[tuple[str, list[float]]]:
    """(head, its values over steps) for each cell of the grid that is one head."""
    rows = []
    for key, values in history.cell_curves().items():
        row, _, col = key.partition(":")
        head = head_name(history.site, row, col)
        if head is not None:
            rows.append((head, values))
    return rows


def _atlas_curve(curves: ScoreCurves | None, head: str) -> tuple[str, list[float]]:
    """The head's best pattern at the last step and its score over all steps."""
    if curves is None:
        return "", []
    per: dict[str, list[float]] = next((curves.scores[n] for n in atlas_labels(head) if n in curves.scores), {})
    if not per:
        return "", []
    pattern = max(per, key=lambda p: per[p][-1] if per[p] else 0.0)
    return pattern, list(per[pattern])
