"""What the Probes screen draws, worked out without Textual or torch: the heatmaps'
matrices and labels, and its lines of text.

A cell with no probe (a position class whose slots hold one value only) is drawn
as 0.0, which the heatmap shows as a dot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tui_lab.core.analysis.probes.linear_probe import ProbeTable
    from tui_lab.core.analysis.probes.probe_history import HistoryGrid, ProbeHistory

Matrix = tuple[list[list[float]], list[str], list[str]]
TITLES = (  # one over each heatmap: the colours are accuracies, not attention weights
    "probe accuracy, held out: layer x position class (the model in hand)",
    "probe accuracy over training: layer x step (t)",
    "DAS interchange-intervention accuracy over training: layer x step (d, then t)",
)


def class_label(name: str) -> str:
    """A position class as a column heads it: "column 2" in a cell's width ("col 2")."""
    return name.replace("column ", "col ")


def layer_label(layer: int, hook: str) -> str:
    """A row's label: the layer and where it is read (``2 post``: after the last block)."""
    return f"{layer} {'post' if hook.endswith('resid_post') else 'pre'}"


def table_matrix(table: ProbeTable) -> Matrix:
    """Held-out accuracy by layer (rows) and position class (columns)."""
    values = [[0.0 if s is None else s.accuracy for s in row] for row in table.scores]
    return values, [layer_label(i, h) for i, h in enumerate(table.hooks)], [class_label(c) for c in table.classes]


def grid_matrix(grid: HistoryGrid) -> Matrix:
    """A history grid: layers (rows) by step (columns)."""
    values = [[0.0 if v is None else float(v) for v in row] for row in grid.values]
    return values, [layer_label(i, h) for i, h in enumerate(grid.hooks)], [str(s) for s in grid.steps]


def header_line(variable: str, description: str, position: str, das: bool, stack: str | None = None) -> str:
    """What the screen shows: the variable, the stack read (when chosen), the history's position
    class and whether DAS runs."""
    where = "" if stack is None else f" in the {stack}"
    return (f"probes for {variable} ({description}){where}; over training at position {position}, "
            f"DAS {'on' if das else 'off'}")


def table_cell_line(table: ProbeTable, row: int, col: int) -> str:
    """The table's cell under the cursor, with its control and chance."""
    if not (0 <= row < len(table.scores) and 0 <= col < len(table.classes)):
        return ""
    score = table.scores[row][col]
    where = f"layer {row} ({table.hooks[row]}), {table.classes[col]}"
    if score is None:
        return f"{where}: one value only here, no probe"
    return (f"{where}: accuracy {score.accuracy:.3f}, control {score.control:.3f}, chance {score.chance:.3f} "
            f"({score.n_test} held out)")


def best_line(table: ProbeTable) -> str:
    """The most accurate probe, and its control."""
    best = table.best()
    if best is None:
        return "no probe could be fitted (every position holds one value)"
    layer, col, score = best
    return (f"best: layer {layer} ({table.hooks[layer]}), {table.classes[col]}: {score.accuracy:.3f} "
            f"(control {score.control:.3f})")


def history_line(history: ProbeHistory) -> str:
    """When the variable becomes readable, and (with DAS) causal."""
    readable = history.readable.first_step()
    text = (f"readable (probe >= {history.readable.threshold:.2f}) from step "
            f"{'never' if readable is None else readable}")
    if history.causal is not None:
        causal = history.causal.first_step()
        text += (f"; causal (DAS IIA >= {history.causal.threshold:.2f}) from step "
                 f"{'never' if causal is None else causal}")
    return text


def grid_cell_line(grid: HistoryGrid, row: int, col: int) -> str:
    """A history cell under the cursor."""
    if not (0 <= row < len(grid.values) and 0 <= col < len(grid.steps)):
        return ""
    value = grid.values[row][col]
    shown = "no probe" if value is None else f"{value:.3f}"
    return f"{grid.what} at layer {row} ({grid.hooks[row]}), step {grid.steps[col]}: {shown}"


def progress_line(done: int, total: int, what: str) -> str:
    """A worker's progress (``total`` 0: unknown)."""
    count = f"{done}/{total}" if total else f"{done}"
    return f"working: {what} {count} (escape cancels)"
