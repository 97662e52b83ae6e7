"""The logit lens as a table: one row per decoder layer, one column per decoding step."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from typing_extensions import Unpack

from tui_lab.core.visible_text import NEWLINE
from tui_lab.ui.widgets.text_table import ColumnSpec, Row, TextTable
from tui_lab.ui.widgets.widget_options import WidgetOptions

if TYPE_CHECKING:
    from tui_lab.core.analysis.lenses.logit_lens import LensTable


def lens_cell(token: str, prob: float, emitted: bool) -> Text:
    """A layer's top token (bold where it is the token the model emitted), then its probability."""
    cell = Text(token.replace("\n", NEWLINE) or "·", style="bold green" if emitted else "")
    cell.append(f" {prob:.0%}" if prob >= 0.01 else " <1%", style="dim")
    return cell


class LensView(TextTable):
    """``show_lens(lens)``: each layer's top token and probability at each step (core LensTable)."""

    DEFAULT_CSS = """
    LensView {
        display: none;
        height: auto;
        max-height: 14;
        border-top: solid $panel-lighten-2;
    }
    """

    def __init__(self, **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__({"header": "layer", "no_wrap": True}, **kwargs)

    def show_lens(self, lens: LensTable) -> None:
        """Draw a ``core.logit_lens.LensTable`` (steps as columns, headed by the emitted token)."""
        self._columns = (
            {"header": "layer", "no_wrap": True},
            *(
                ColumnSpec(header=f"{i} {tok.replace(chr(10), NEWLINE)}", no_wrap=True)
                for i, tok in enumerate(lens.steps, start=1)
            ),
        )
        rows: list[Row] = [
            (
                name,
                *(
                    lens_cell(c.token, c.prob, c.token == tok)
                    for c, tok in zip(row, lens.steps, strict=False)
                ),
            )
            for name, row in zip(lens.layers, lens.rows, strict=False)
        ]
        self.show(rows)

    def show_message(self, text: str) -> None:
        """No lens to show: one dim line instead of the table."""
        self._columns = ({"header": text, "no_wrap": True, "style": "dim"},)
        self.show([])
