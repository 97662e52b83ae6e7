"""An opened model's card: what it is and which file each part was read from (read-only)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

if TYPE_CHECKING:
    from tui_lab.core.opening.model_card import ModelCard

READ_ONLY = (
    "Read-only: these settings come from the model's own files (config.json, the weights, "
    "the tokenizer); the lab does not edit them."
)
WHERE_NEXT = "3 decodes with its tokenizer · 4 shows its heads · 5 counts its parameters"


def card_renderable(card: ModelCard) -> Group:
    """The card as Rich text: a title, the read-only line, its rows, its notes."""
    title = Text("Model card · ", style="bold")
    title.append(card.name, style="bold cyan")
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(overflow="fold")
    for label, value in card.rows():
        grid.add_row(label, Text(value, style="bold"))
    parts: list[RenderableType] = [title, Text(READ_ONLY, style="italic"), Text(""), grid]
    for note in card.notes:
        parts.append(Text(f"note: {note}", style="yellow"))
    parts += [Text(""), Text(WHERE_NEXT, style="dim")]
    return Group(*parts)


class ModelCardView(Static):
    """Shows a ``ModelCard`` (``core.decoding.opened``) in place of the Build pane's form."""

    def show_opening(self, source: str) -> None:
        """Say that ``source`` is being opened (torch loads first, then its files are read)."""
        title = Text("Model card · ", style="bold")
        title.append(source, style="bold cyan")
        self.update(
            Group(
                title,
                Text(
                    "opening: torch loads first, then config.json, the weights (memory-mapped) "
                    "and the tokenizer are read; nothing is downloaded…",
                    style="dim italic",
                ),
            )
        )

    def show_card(self, card: ModelCard) -> None:
        """Draw ``card``."""
        self.update(card_renderable(card))
