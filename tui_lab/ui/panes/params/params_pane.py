"""Params pane: parameter breakdown by component with bars, totals, memory and FLOPs per token."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static
from typing_extensions import Unpack

from tui_lab.ui import key_bindings
from tui_lab.ui.messages import CountsStale, ShowCounts
from tui_lab.ui.pane_registry import pane_id
from tui_lab.ui.state.host import Pane
from tui_lab.ui.widgets.model_summary import human, human_bytes, stacks
from tui_lab.ui.widgets.text_table import TextTable
from tui_lab.ui.widgets.widget_options import WidgetOptions

if TYPE_CHECKING:
    from tui_lab.core.config.lab_config import LabConfig
    from tui_lab.core.model.params import ParamReport

BAR_WIDTH = 20
EIGHTHS = " ▏▎▍▌▋▊▉█"


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    """A horizontal bar with eighth-block precision."""
    cells = max(0.0, min(1.0, fraction)) * width
    full = int(cells)
    part = EIGHTHS[int((cells - full) * 8)] if full < width else ""
    return ("█" * full + part).ljust(width)


class ParamsPane(Pane, Vertical, can_focus=False):
    """Follows the Build pane's config: every component's count, share and bar."""

    PANE_ID = pane_id(__name__)
    BINDINGS = key_bindings.PARAMS

    def __init__(self, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.report: ParamReport | None = None
        self.config: LabConfig | None = None
        self.vocab_size = 0
        self.grouped = False

    def compose(self) -> ComposeResult:
        yield Static(id="params-title")
        yield TextTable(
            {"header": "component", "no_wrap": True},
            {"header": "params", "justify": "right", "no_wrap": True},
            {"header": "%", "justify": "right", "no_wrap": True},
            {"header": "share", "no_wrap": True},
            {"header": "note", "style": "dim italic", "no_wrap": True},
            id="params-table",
        )
        yield Static(id="params-totals")

    def on_mount(self) -> None:
        """Columns, and a note until torch (and so the counter) is loaded."""
        if self.host.quitting:
            return  # mounted while the app quits
        self.query_one("#params-title", Static).update(
            Text("Parameters: loading torch…", style="dim")
        )
        self.host.register_pane(self.PANE_ID, self)
        last = self.host.state.last_report
        if last is not None and last.report is not None:  # kept only with a report
            self.show_report(last.report, last.config, last.vocab_size, last.edited)

    def focus_default(self) -> None:
        """The table takes focus so it can be scrolled with the keys."""
        self.query_one("#params-table").focus()

    def on_counts_stale(self, message: CountsStale) -> None:
        """The form is invalid or the count failed: the table is stale."""
        self.show_invalid(message.reason)

    def on_show_counts(self, message: ShowCounts) -> None:
        """New parameter counts: the table."""
        self.show_report(message.report, message.config, message.vocab_size, message.edited)

    def show_invalid(self, message: str) -> None:
        """The form is invalid: keep the last table, say why it is stale."""
        title = self.query_one("#params-title", Static)
        title.update(Text(f"Parameters (stale: {message})", style="yellow"))

    def show_report(self, report: ParamReport, config: LabConfig, vocab_size: int, edited: bool = False) -> None:
        """Fill the table and the totals from a ParamReport."""
        self.report, self.config, self.vocab_size = report, config, vocab_size
        m = config.model
        title = Text()
        title.append("Parameters of ", style="dim")
        title.append(config.name + (" (edited)" if edited else ""), style="bold")
        title.append(
            f"  ·  {m.arch}, d_model {m.d_model}, {m.n_heads} heads, "
            f"{stacks(m)}, "
            f"vocab {vocab_size}",
            style="dim",
        )
        self.query_one("#params-title", Static).update(title)
        self._fill_table(report)
        self._fill_totals(report)

    def _fill_table(self, report: ParamReport) -> None:
        total = max(1, report.total)
        if self.grouped:
            rows = [(group, n, "") for group, n in report.groups().items()]
        else:
            rows = [(r.name, r.params, r.note) for r in report.rows]
        largest = max((n for _, n, _ in rows), default=1) or 1
        self.query_one(TextTable).show(
            [
                # bars relative to the largest row
                (name, f"{n:,}", f"{n / total:.1%}", Text(bar(n / largest), style="cyan"), note)
                for name, n, note in rows
            ]
        )

    def _fill_totals(self, r: ParamReport) -> None:
        grid = Table.grid(padding=(0, 2))
        for _ in range(4):
            grid.add_column()
        grid.add_row(
            Text("total", style="dim"),
            Text(f"{r.total:,}", style="bold"),
            Text("FLOPs/token train", style="dim"),
            Text(human(r.train_flops_per_token), style="bold"),
        )
        grid.add_row(
            Text("non-embedding", style="dim"),
            Text(f"{r.non_embedding:,}"),
            Text("FLOPs/token infer", style="dim"),
            Text(human(r.infer_flops_per_token)),
        )
        grid.add_row(
            Text("memory fp32", style="dim"),
            Text(human_bytes(r.fp32_bytes)),
            Text("memory bf16", style="dim"),
            Text(human_bytes(r.bf16_bytes)),
        )
        grid.add_row(
            Text("AdamW training", style="dim"),
            Text(human_bytes(r.train_bytes) + " + activations"),
            Text("context", style="dim"),
            Text(f"{r.context_len} tokens"),
        )
        self.query_one("#params-totals", Static).update(grid)

    def action_toggle_grouped(self) -> None:
        """Switch between one row per tensor group and one row per layer."""
        self.grouped = not self.grouped
        if self.report is not None:
            self._fill_table(self.report)
