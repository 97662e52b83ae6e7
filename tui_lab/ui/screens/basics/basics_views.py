"""The basics screen's four views: positions, masks, scaling, schedule (one widget each).

Each view draws a ``BasicsData`` (basics_data.py) once, when it arrives;
heatmaps are the lab's ``Heatmap``, charts the cached plotext charts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static

from tui_lab.ui.screens.basics.basics_charts import EntropyChart, RateChart
from tui_lab.ui.screens.basics.basics_data import (
    BasicsData,
    Grid,
    is_encoder_picture,
    mask_grids,
    position_grids,
)
from tui_lab.ui.widgets.heatmap import Heatmap

SHOWN_PADS = 3  # padded keys listed after a row's real ones in the weights table
ENCODER_NOTE = (
    "\nan encoder-only model reads every real token both ways: its one mask hides padding "
    "(left); a decoder would also hide the future (the causal triangle, beside it)"
)

if TYPE_CHECKING:
    from tui_lab.core.analysis.basics.basics_scaling import ScalingRow


class ValueHeatmap(Heatmap):
    """The lab's heatmap with a legend of its own (the attention one speaks of weights)."""

    legend = ""

    def render(self) -> Text:
        """The heatmap, its last line (the weights legend) replaced by ``legend``."""
        out = super().render()
        if not self.weights or not self.legend:
            return out
        lines = out.split("\n")
        return Text("\n", no_wrap=True, overflow="crop").join(
            [*lines[:-1], Text(" " * (self._label_width() + 1) + self.legend, style="dim")]
        )


def _show(heatmap: Heatmap, grid: Grid) -> None:
    heatmap.set_matrix(grid.values, grid.rows, grid.cols)


def _error(data: BasicsData, view: str) -> Text | None:
    line = data.errors.get(view)
    return Text(f"cannot draw this view: {line}", style="red") if line else None


class PositionsView(VerticalScroll):
    """The model's positional table as a heatmap, and each position's dot product with the others."""

    def compose(self) -> ComposeResult:
        yield Static("", id="pos-caption", classes="basics-caption")
        yield ValueHeatmap(id="pos-table")
        yield Static("", id="pos-value", classes="basics-caption")
        yield Static("", id="pos-sim-caption", classes="basics-caption")
        yield ValueHeatmap(id="pos-sim")

    def show(self, data: BasicsData) -> None:
        """Draw the positions picture."""
        caption = self.query_one("#pos-caption", Static)
        p = data.positions
        if p is None or p.kind == "none":
            caption.update(_error(data, "positions") or Text(p.what if p else "", style="dim"))
            for h in self.query(Heatmap):
                h.clear("")
            return
        self.picture = p
        table, sim = position_grids(p)
        dims = int(p.table.size(1))
        shown = f"first {len(table.cols)} of {dims}" if len(table.cols) < dims else f"{dims}"
        what = "pairs" if p.kind == "rope" else "dimensions"
        caption.update(Text.assemble(
            (f"{p.kind}", "bold"), f": {p.what}\n",
            (f"rows: positions 0-{p.length - 1}; columns: {shown} {what}; "
             f"shade {table.low:.3g} (dark) to {table.high:.3g} (bright)", "dim"),
        ))
        heat = self.query_one("#pos-table", ValueHeatmap)
        heat.legend = f"dark {table.low:.3g} … bright {table.high:.3g}; arrows move the cursor"
        _show(heat, table)
        self.query_one("#pos-sim-caption", Static).update(Text.assemble(
            ("dot product of each position's encoding with the others", "bold"),
            (f"  (shade {sim.low:.3g} to {sim.high:.3g}: nearby positions look alike)", "dim"),
        ))
        heat = self.query_one("#pos-sim", ValueHeatmap)
        heat.legend = f"dark {sim.low:.3g} … bright {sim.high:.3g}"
        _show(heat, sim)

    def on_heatmap_cursor_moved(self, event: Heatmap.CursorMoved) -> None:
        """Say the true number under the table's cursor (the cells are shades of it)."""
        p = getattr(self, "picture", None)
        if p is None or event.heatmap.id != "pos-table":
            return
        value = float(p.table[event.row, event.col])
        what = {"rope": f"angle of pair {event.col}", "sinusoidal": f"PE[{event.row}, {event.col}]"}
        name = what.get(p.kind, f"row {event.row}, dim {event.col}")
        self.query_one("#pos-value", Static).update(
            Text(f"position {event.row}: {name} = {value:.4f}", style="dim")
        )


class MasksView(VerticalScroll):
    """Padding, causal and combined masks of a padded batch row, and one attention row before/after."""

    def compose(self) -> ComposeResult:
        yield Static("", id="mask-caption", classes="basics-caption")
        with Horizontal(id="mask-grids"):
            for i in range(3):
                with Vertical(classes="mask-cell"):
                    yield Static("", id=f"mask-title-{i}", classes="basics-caption")
                    yield Heatmap(id=f"mask-{i}")
        yield Static("", id="mask-row")

    def show(self, data: BasicsData) -> None:
        """Draw the masks picture."""
        m = data.masks
        caption = self.query_one("#mask-caption", Static)
        if m is None:
            caption.update(_error(data, "masks") or "")
            return
        typed = f"the last decoded input {m.batch.texts[0]!r} beside " if data.text else ""
        caption.update(Text.assemble(
            (f"a padded batch: {typed}{len(m.batch.texts) - (1 if data.text else 0)} task examples, "
             f"lengths {m.batch.lengths}, padded to {len(m.labels)}; row {m.row} shown", "bold"),
            ("\nrows: queries, columns: keys; bright = may attend, · = masked", "dim"),
            (ENCODER_NOTE if is_encoder_picture(m) else "", "dim"),
        ))
        for i, (name, grid) in enumerate(mask_grids(m)):
            self.query_one(f"#mask-title-{i}", Static).update(Text(name, style="bold"))
            _show(self.query_one(f"#mask-{i}", Heatmap), grid)
        title = Text(f"{m.module} head {m.head}, query {m.query} ({m.labels[m.query]}): "
                     "softmax(q.k / sqrt(d_k)) before and after the mask", style="bold")
        # The row's real keys and a few pads: a long padded row would not fit across.
        shown = min(len(m.labels), m.batch.lengths[m.row] + SHOWN_PADS)
        table = Table(box=None, padding=(0, 1))
        table.add_column("")
        for label in m.labels[:shown]:
            table.add_column(label or "pad", justify="right", no_wrap=True)
        allowed = m.combined[m.query].tolist()[:shown]
        table.add_row("before", *(f"{v:.2f}" for v in m.before.tolist()[:shown]))
        table.add_row("after", *(
            Text(f"{v:.2f}", style="bold" if ok else "dim")
            for v, ok in zip(m.after.tolist()[:shown], allowed, strict=True)
        ))
        rest = len(m.labels) - shown
        more = Text(f"(and {rest} more padded keys: 0 after the mask)", style="dim") if rest else Text("")
        self.query_one("#mask-row", Static).update(Group(title, table, more))


def _scaling_table(title: str, rows: list[ScalingRow]) -> Table:
    table = Table(title=title, title_justify="left", box=None, padding=(0, 1))
    for header in ("", "d_k", "var q.k", "var /sqrt(d_k)", "H unscaled", "H scaled", "H uniform"):
        table.add_column(header, justify="right" if header else "left")
    for r in rows:
        table.add_row(r.name, str(r.d_k), f"{r.var_raw:.2f}", f"{r.var_scaled:.2f}",
                      f"{r.entropy_raw:.2f}", f"{r.entropy_scaled:.2f}", f"{r.entropy_max:.2f}")
    return table


class ScalingView(VerticalScroll):
    """var(q.k) and softmax entropy with and without 1/sqrt(d_k): the model's q, k, then random ones."""

    def compose(self) -> ComposeResult:
        yield Static("", id="scaling-model")
        yield Static("", id="scaling-random-table")
        yield EntropyChart(id="entropy-chart")

    def show(self, data: BasicsData) -> None:
        """Draw the scaling picture."""
        model = self.query_one("#scaling-model", Static)
        error = _error(data, "scaling")
        if error is not None:
            model.update(error)
        else:
            scales = {r.model_scale for r in data.scaling if r.model_scale is not None}
            note = f"\n(this model multiplies q.k by {', '.join(f'{s:g}' for s in sorted(scales))} itself)" if scales else ""
            model.update(_scaling_table(
                "the model's own q, k on the example batch (H: mean softmax row entropy, nats)" + note,
                data.scaling,
            ))
        if data.random:
            self.query_one("#scaling-random-table", Static).update(
                _scaling_table("random q, k (unit variance), 16 keys a row",
                               data.random)
            )
            self.query_one(EntropyChart).draw(data.random)


class ScheduleView(Vertical):
    """The config's learning rate over the run's steps beside the Noam curve."""

    def compose(self) -> ComposeResult:
        yield Static("", id="schedule-caption", classes="basics-caption")
        with Horizontal(id="schedule-charts"):
            yield RateChart(id="lr-config")
            yield RateChart(id="lr-noam")

    def show(self, data: BasicsData) -> None:
        """Draw the schedule picture."""
        s = data.schedule
        if s is None:
            return
        (lr_step, lr_top), (noam_step, noam_top) = s.lr_peak, s.noam_peak
        by_time = " (decay_over: time; drawn by steps)" if s.by_time else ""
        self.query_one("#schedule-caption", Static).update(Text.assemble(
            (f"train.schedule {s.schedule} over {s.total:,} steps, warmup {s.warmup}{by_time}", "bold"),
            f": peak {lr_top:.3g} at step {lr_step:,}\n",
            (f"Noam: d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) with d_model {s.d_model}: "
             f"peak {noam_top:.3g} at step {noam_step:,}", "dim"),
        ))
        self.query_one("#lr-config", RateChart).draw(f"{s.schedule} (this config)", s.steps, s.lr, "green")
        self.query_one("#lr-noam", RateChart).draw("Noam (the tutorials)", s.steps, s.noam, "orange")
