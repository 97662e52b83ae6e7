"""A few lines under the preset list: the edited model's size and cost, live."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from tui_lab.core.config.shape import Shape

if TYPE_CHECKING:
    from tui_lab.core.config.sections import ModelConfig
    from tui_lab.core.model.params import ParamReport


def human(n: float, unit: str = "") -> str:
    """1234567 -> '1.23M' (SI prefixes, three significant digits)."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= factor:
            return f"{n / factor:.3g}{prefix}{unit}"
    return (
        f"{n:.3g}{unit}"
        if isinstance(n, float) and not float(n).is_integer()
        else f"{int(n)}{unit}"
    )


def stacks(m: ModelConfig) -> str:
    """The layers a model config has, by stack: ``3 encoder layers``, ``2 encoder + 2 decoder
    layers``, ``4 decoder layers`` (a config holds both counts; its arch says which apply)."""
    if m.shape is Shape.ENCODER_ONLY:
        return f"{m.n_encoder_layers} encoder layers"
    encoder = f"{m.n_encoder_layers} encoder + " if m.shape is Shape.ENCODER_DECODER else ""
    return f"{encoder}{m.n_decoder_layers} decoder layers"


def human_bytes(n: float) -> str:
    """Bytes with binary prefixes: 1536 -> '1.5 KiB'."""
    for factor, prefix in ((2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki")):
        if n >= factor:
            return f"{n / factor:.3g} {prefix}B"
    return f"{int(n)} B"


class ModelSummary(Static):
    """Parameter count, FLOPs per token and memory of the config being edited."""

    def show_loading(self) -> None:
        """Say that the counts wait for torch."""
        self.update(Text("parameters: loading torch…", style="dim"))

    def show_invalid(self, message: str) -> None:
        """Say that nothing is counted while the form has errors."""
        self.update(Text(f"not counted: {message}", style="dim"))

    def show_report(self, report: ParamReport, vocab_size: int, edited: bool) -> None:
        """Show a ParamReport's headline figures."""
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="dim")
        grid.add_column(justify="right", style="bold")
        grid.add_row("parameters", f"{report.total:,}")
        grid.add_row("FLOPs/token", f"{human(report.train_flops_per_token)} train")
        grid.add_row("", f"{human(report.infer_flops_per_token)} infer")
        grid.add_row("weights", f"{human_bytes(report.fp32_bytes)} fp32")
        grid.add_row("vocab", f"{vocab_size}{'  (edited)' if edited else ''}")
        self.update(grid)
