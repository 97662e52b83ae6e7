"""Runs pane: every run folder as a sortable, filterable table; marked runs overlaid in one chart.

Folders are read in a thread worker (``RowReader`` re-reads only folders whose
files changed) and again every ``REFRESH_SECONDS`` while the pane is on show,
so runs still being written update live. A sweep's runs carry their arm: the
overlay shows one mean curve per marked arm. ``enter`` opens the highlighted
run in the lab through the Train pane's ``open_run_dir``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, Static
from typing_extensions import Unpack

from tui_lab.core.runs.curves import METRICS, Curve
from tui_lab.ui import key_bindings
from tui_lab.ui.export import write_runs_table
from tui_lab.ui.messages import OpenRunRequested, OpenSaeRequested
from tui_lab.ui.pane_registry import pane_id
from tui_lab.ui.panes.runs.run_rows import (
    COLUMNS,
    CurveReader,
    RowReader,
    RunRow,
    cell,
    detail_text,
    filter_rows,
    overlay_series,
    sort_rows,
)
from tui_lab.ui.state.host import Pane
from tui_lab.ui.widgets.overlay_chart import COLOURS, Overlay, OverlayChart, Series, rich_colour
from tui_lab.ui.widgets.run_table import RunTable, TableColumn
from tui_lab.ui.widgets.widget_options import WidgetOptions

REFRESH_SECONDS = 2.0
COLUMN_KEYS = ("mark", *(c.key for c in COLUMNS))
RIGHT = {c.key for c in COLUMNS if c.right}
STATUS_STYLES = {
    "running": "bold green",
    "target": "green",
    "finished": "",
    "stopped": "yellow",
    "time": "yellow",
    "failed": "red",
    "damaged": "bold red",
}


class RunsPane(Pane, Vertical, can_focus=False):
    """The run folders under the runs root (and any added with o), and the overlay chart."""

    @dataclass
    class RowsRead(Message):
        """The worker read every folder under the roots: one row each."""

        rows: list[RunRow]

    @dataclass
    class CurvesRead(Message):
        """The worker read the marked series' curves: key -> (legend, {metric: curve})."""

        curves: dict[str, tuple[str, dict[str, Curve]]]

    PANE_ID = pane_id(__name__)
    HELP_EXTRA = (("enter", "in the filter line: back to the table (the filter stays)"),)
    BINDINGS = key_bindings.RUNS

    def __init__(self, root: Path, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.roots = [Path(root)]
        self.reader = RowReader()
        self.curve_reader = CurveReader()
        self.rows: list[RunRow] = []
        self.shown: list[RunRow] = []  # after the filter and the sort
        self.marked: list[str] = []  # row keys (folder paths), in marking order
        self.colours: dict[str, str] = {}  # series key -> its fixed colour
        self.curves: dict[str, tuple[str, dict[str, Curve]]] = {}
        self.sort_key, self.reverse = "name", False
        self.overlay = Overlay()
        self.reading = False
        self._drawn_cells: dict[str, tuple[str, ...]] | None = None  # row key -> cell texts
        self._by_key: dict[str, RunRow] = {}
        self._row_texts: dict[str, list[Text]] = {}  # row key -> its cells, reused while unchanged

    def compose(self) -> ComposeResult:
        """Title, filter line, the runs table, the highlighted run's line, the chart, its legend."""
        yield Static(id="runs-title")
        yield Input(placeholder="filter: words to match (escape clears)", id="runs-filter")
        columns = [TableColumn("mark", " ")]
        columns += [TableColumn(c.key, c.header, c.right, c.width) for c in COLUMNS]
        yield RunTable(columns, id="runs-table")
        yield Static(id="runs-detail")
        yield OverlayChart(id="runs-chart")
        yield Static(id="runs-legend")

    def on_mount(self) -> None:
        """Columns, the live-update timer, and a first read."""
        if self.host.quitting:
            return  # mounted while the app quits
        self.query_one("#runs-filter", Input).display = False
        self.set_interval(REFRESH_SECONDS, self._tick)
        self.host.register_pane(self.PANE_ID, self)
        self._draw_chart()
        if self.display:
            self.refresh_runs()

    def focus_default(self) -> None:
        """The table takes the focus (its arrows move the highlight)."""
        self.query_one(RunTable).focus()

    def on_show(self) -> None:
        """Read the folders again each time the pane comes on show."""
        self.refresh_runs()

    def _tick(self) -> None:
        """Timer: re-read the folders while the pane is on show (only changed folders are parsed)."""
        if self.display and self.host.active_pane == "runs":
            self.refresh_runs()

    # ---- reading ----------------------------------------------------------------------

    def refresh_runs(self) -> None:
        """Read the run folders in a thread (one read at a time)."""
        if self.reading:
            return
        self.reading = True
        self._read_worker(list(self.roots))

    @work(thread=True, exclusive=True, exit_on_error=False, group="runs-read")
    def _read_worker(self, roots: list[Path]) -> None:
        """Summarise every run folder under ``roots`` (thread); posts RowsRead."""
        try:
            rows = self.reader.read(roots)
        finally:
            self.reading = False
        self.post_message(self.RowsRead(rows))

    def on_runs_pane_rows_read(self, message: RunsPane.RowsRead) -> None:
        """New rows: redraw the table, and the chart if a marked run changed."""
        self.rows = message.rows
        self._by_key = keys = {r.key: r for r in self.rows}
        self.marked = [k for k in self.marked if k in keys]
        self._fill_table()
        if self.marked:
            self._read_curves()

    def _series_runs(self) -> dict[str, tuple[str, list[Path]]]:
        """series key -> (legend, run folders) of the marked runs (see ``overlay_series``)."""
        return overlay_series(self.rows, self.marked)

    def _marked_series(self) -> set[str]:
        return {self._by_key[k].series_key for k in self.marked if k in self._by_key}

    def _read_curves(self) -> None:
        series = self._series_runs()
        for key in series:
            if key not in self.colours:
                self.colours[key] = COLOURS[len(self.colours) % len(COLOURS)]
        self._curves_worker(series)

    @work(thread=True, exclusive=True, exit_on_error=False, group="runs-curves")
    def _curves_worker(self, series: dict[str, tuple[str, list[Path]]]) -> None:
        """Read the marked runs' curves (thread), an arm's as the mean of its runs; posts CurvesRead."""
        self.post_message(self.CurvesRead(self.curve_reader.read(series)))

    def on_runs_pane_curves_read(self, message: RunsPane.CurvesRead) -> None:
        """Curves are in: redraw the overlay."""
        self.curves = message.curves
        self._draw_chart()

    # ---- drawing ----------------------------------------------------------------------

    def _mark_cell(self, row: RunRow) -> Text:
        if row.series_key not in self._marked_series():
            return Text(" ")
        return Text("●", style=rich_colour(self.colours.get(row.series_key, "white")))

    def _cell_text(self, row: RunRow, key: str, value: str) -> Text:
        if key == "mark":
            return self._mark_cell(row)
        style = STATUS_STYLES.get(value, "") if key == "status" else ""
        return Text(value, justify="right" if key in RIGHT else "left", style=style)

    def _fill_table(self) -> None:
        """Filter, sort and show the rows; the highlight stays on the same run."""
        text = self.query_one("#runs-filter", Input).value
        self.shown = sort_rows(filter_rows(self.rows, text), self.sort_key, self.reverse)
        self._update_title()
        cells = {
            row.key: (str(self._mark_cell(row).style), *(cell(row, c.key) for c in COLUMNS))
            for row in self.shown
        }
        table = self.query_one(RunTable)
        table.sort_mark = (self.sort_key, self.reverse)
        if self._drawn_cells is not None and list(cells.items()) == list(self._drawn_cells.items()):
            return  # nothing changed (a live update of finished runs)
        old, self._drawn_cells = self._drawn_cells or {}, cells
        rows = []
        for row in self.shown:
            values = cells[row.key]
            texts = self._row_texts.get(row.key) if old.get(row.key) == values else None
            if texts is None:
                texts = [
                    self._cell_text(row, k, v) for k, v in zip(COLUMN_KEYS, values, strict=True)
                ]
                self._row_texts[row.key] = texts
            rows.append((row.key, texts))
        table.show(rows)
        self._show_detail()

    @property
    def highlighted(self) -> RunRow | None:
        """The row under the table's cursor (None in an empty table)."""
        key = self.query_one(RunTable).cursor_key
        return self._by_key.get(key) if key is not None else None

    def _update_title(self) -> None:
        header = next(c.header for c in COLUMNS if c.key == self.sort_key)
        roots = ", ".join(f"{r}/" for r in self.roots)
        title = Text()
        title.append("Runs in ", style="dim")
        title.append(roots, style="bold")
        title.append(
            f"  ·  {len(self.shown)} of {len(self.rows)} shown  ·  {len(self.marked)} marked"
            f"  ·  sort: {header} {'↓' if self.reverse else '↑'}",
            style="dim",
        )
        self.query_one("#runs-title", Static).update(title)

    def _show_detail(self) -> None:
        row = self.highlighted
        detail = detail_text(row, STATUS_STYLES) if row is not None else Text()
        self.query_one("#runs-detail", Static).update(detail)

    def on_run_table_highlighted(self, event: RunTable.Highlighted) -> None:
        """Say more about the highlighted run below the table."""
        self._show_detail()

    def _draw_chart(self) -> None:
        overlay = self.overlay
        overlay.series = [
            Series(
                label,
                self.colours.get(key, "white"),
                curves[overlay.metric].xs(overlay.by),
                curves[overlay.metric].values,
            )
            for key, (label, curves) in self.curves.items()
            if key in self._series_runs()
        ]
        self.query_one(OverlayChart).draw(overlay)
        legend = Text()  # also under the chart: plotext's own can be drawn over by the curves
        for series in overlay.series:
            legend.append("● ", style=rich_colour(series.colour))
            legend.append(series.label + "   ")
        self.query_one("#runs-legend", Static).update(
            legend or Text("space marks runs", style="dim")
        )

    # ---- actions ----------------------------------------------------------------------

    def action_mark(self) -> None:
        """Mark the highlighted run for the overlay chart, or unmark it."""
        row = self.highlighted
        if row is None:
            return
        if row.series_key in self._marked_series():  # for an arm: unmark all its runs
            self.marked = [k for k in self.marked if self._by_key[k].series_key != row.series_key]
        else:
            self.marked.append(row.key)
        self._read_curves()
        self._fill_table()
        self._draw_chart()

    def on_run_table_selected(self, event: RunTable.Selected) -> None:
        """Enter on a row opens that run in the lab."""
        event.stop()
        self.action_open_run()

    def action_open_run(self) -> None:
        """Open the highlighted run in Train, Decode and Attention, and show the Train pane."""
        row = self.highlighted
        if row is None:
            return
        if row.summary.status == "damaged":
            self.notify(row.summary.detail, title="Cannot open run", severity="error")
            return
        if row.summary.kind == "sae":  # an SAE opens in Features, on the model in hand
            self.post_message(OpenSaeRequested(Path(row.key)))
            return
        if row.summary.kind == "transcoders":  # a set traces graphs: it is not a model to open
            self.notify(f"tfx-lab graph --transcoders {row.key}", title="A transcoder set")
            return
        if row.summary.kind == "crosscoder":  # its features open in the Features pane's diff view
            self.notify(f"tfx-lab crosscoder features {row.key}, or Features (8): c, then e with this folder",
                        title="A crosscoder")
            return
        self.post_message(OpenRunRequested(Path(row.key)))  # the app opens it in the Train pane

    def _sort_by(self, key: str, reverse: bool) -> None:
        self.sort_key, self.reverse = key, reverse
        self._fill_table()

    def action_cycle_sort(self) -> None:
        """Sort by the next column."""
        keys = [c.key for c in COLUMNS]
        self._sort_by(keys[(keys.index(self.sort_key) + 1) % len(keys)], False)

    def action_reverse_sort(self) -> None:
        """Reverse the sort order."""
        self._sort_by(self.sort_key, not self.reverse)

    def on_run_table_header_clicked(self, event: RunTable.HeaderClicked) -> None:
        """A click on a header sorts by its column (again: reversed)."""
        event.stop()
        key = event.column
        if key != "mark":
            self._sort_by(key, not self.reverse if key == self.sort_key else False)

    def action_filter(self) -> None:
        """Show the filter line and type into it."""
        field = self.query_one("#runs-filter", Input)
        field.display = True
        field.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        """Filter as the user types."""
        event.stop()
        self._fill_table()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in the filter line goes back to the table (the filter stays)."""
        event.stop()
        self.query_one(RunTable).focus()

    def action_clear_filter(self) -> None:
        """Clear the filter and go back to the table."""
        field = self.query_one("#runs-filter", Input)
        field.value = ""
        field.display = False
        self.query_one(RunTable).focus()
        self._fill_table()

    def action_cycle_metric(self) -> None:
        """Chart the next metric: train loss, validation loss, exact match."""
        self.overlay.metric = METRICS[(METRICS.index(self.overlay.metric) + 1) % len(METRICS)]
        self._draw_chart()

    def action_toggle_x(self) -> None:
        """Chart against step or against training seconds."""
        self.overlay.by = "seconds" if self.overlay.by == "step" else "step"
        self._draw_chart()

    def action_toggle_log(self) -> None:
        """Switch the chart between linear and log scale."""
        self.overlay.log_scale = not self.overlay.log_scale
        self._draw_chart()

    def action_add_folder(self) -> None:
        """Add a run or sweep folder (anywhere) to the table."""
        from tui_lab.ui.screens.open_run import OpenRunScreen

        def chosen(path: Path | None) -> None:
            if path is not None and Path(path) not in self.roots:
                self.roots.append(Path(path))
                self.refresh_runs()

        self.app.push_screen(OpenRunScreen(self.roots[0]), chosen)

    def action_export(self, kind: str = "csv") -> None:
        """Write the table as shown (filter and sort) to runs-<time>.csv or .json in the runs root."""
        try:
            path = write_runs_table([r.summary for r in self.shown], self.roots[0], kind)
        except OSError as exc:
            self.notify(f"Export failed: {exc.strerror or exc}", severity="error")
            return
        self.notify(f"{len(self.shown)} runs written to {path}", title=f"Exported {kind.upper()}")
