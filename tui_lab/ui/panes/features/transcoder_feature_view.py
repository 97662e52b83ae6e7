"""A transcoder feature's card as Rich text: which layer and feature, what it was read from,
then the SAE card's body (``card_view.card_text``: logit effects, histogram, shaded contexts)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from tui_lab.ui.panes.features.card_view import BAR, card_text, shown

if TYPE_CHECKING:
    from tui_lab.ui.panes.features.browser import Card

BACK = "escape: back to the SAE features"


def header_text(layer: int, feature: int) -> Text:
    out = Text()
    out.append(f"transcoder layer {layer} · feature {feature}", style="bold")
    out.append("   from the Circuit pane\n", style="dim")
    return out


def transcoder_card_text(card: Card, layer: int, feature: int, label: str, hook: str, source: str,
                         width: int = 70) -> Text:
    """The whole card: the header, where it reads, its Circuit label, then the SAE card's body."""
    out = header_text(layer, feature)
    out.append(f"reads {hook} · set {source}\n", style="dim")
    out.append("label in the graph ", style="dim")
    out.append(shown(label) + "\n", style="bold cyan")
    out.append("logit effects: its decoder row through the final norm and the unembedding, demeaned\n",
               style="dim italic")
    out.append_text(card_text(card, width))
    out.append(f"\n{BACK}", style="dim")
    return out


def progress_text(layer: int, feature: int, done: int, total: int) -> Text:
    """Reading the layer's contexts: a bar and the tokens done."""
    out = header_text(layer, feature)
    frac = done / max(1, total)
    out.append(f"reading contexts {BAR * int(30 * frac)}{'·' * (30 - int(30 * frac))} {done:,}/{total:,} tokens\n",
               style="dim")
    out.append(BACK, style="dim")
    return out


def failed_text(text: str) -> Text:
    """The one line that says why the card cannot be shown."""
    out = Text(text, style="red")
    out.append(f"\n{BACK}", style="dim")
    return out
