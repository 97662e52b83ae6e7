"""What the Decode pane shows of a fill-mask result, as Rich text (Textual-free).

An encoder-only model's decode is fill-mask (``core.decoding.fill_mask``): the
summary says what was read and what came out; one row per mask, in text order,
holds the filler it finally took and its k most likely fillers from the first
read; the fill steps list the masks in the order they were filled (most
confident first, the text re-read after each), so a later mask's choice can be
seen to follow an earlier one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.text import Text

from tui_lab.core.visible_text import VISIBLE_WHITESPACE

if TYPE_CHECKING:  # torch-backed: a result exists only once torch is loaded
    from tui_lab.core.decoding.fill_mask import FillMaskResult
    from tui_lab.ui.panes.decode.decode_view import Row

Printable = Callable[[str], str]  # the pane's ``visible``: text safe to print
Cell = Callable[[str, float, bool], Text]  # the pane's token-and-percentage cell


def piece(label: str) -> str:
    """A filler as a cell shows it: a space as ␣, so a blank filler is seen."""
    return "".join(VISIBLE_WHITESPACE.get(ch, ch) for ch in label) or "∅"


def summary(result: FillMaskResult, visible: Printable) -> Text:
    """Input, filled output and how many masks (``visible``: the pane's printable text)."""
    out = Text()
    out.append("input  ", style="dim")
    out.append(visible(result.input), style="bold")
    out.append("\noutput ", style="dim")
    out.append(visible(result.output), style="bold green")
    n = len(result.masks)
    out.append(
        f"\n{n} mask{'s' if n != 1 else ''} · the fillers of each below, then the fills "
        "one at a time, most confident first",
        style="dim",
    )
    for note in result.notes:
        out.append(f"\nnote: {note}", style="yellow")
    return out


def filler_rows(result: FillMaskResult, top_k: int, cell: Cell) -> list[Row]:
    """One row per mask in text order: its number, the filler it took (and its probability
    when it was filled), then its ``top_k`` fillers from the first read (``cell``: the
    pane's token-and-percentage cell)."""
    taken = {step.position: step for step in result.steps}
    rows: list[Row] = []
    for i, mask in enumerate(result.masks, start=1):
        step = taken.get(mask.position)
        chosen = cell(piece(step.token), step.prob, True) if step is not None else Text("?")
        top = [
            cell(piece(token), p, step is not None and token == step.token)
            for token, p in mask.top[:top_k]
        ]
        top += [Text()] * (top_k - len(top))
        rows.append((f"_{i}", chosen, *top))
    return rows


def fill_steps(result: FillMaskResult, visible: Printable, percent: Callable[[float], str]) -> Text:
    """The fills in the order they were made, each with the text after it."""
    order = {m.position: i for i, m in enumerate(result.masks, start=1)}
    out = Text("fill steps", style="bold")
    out.append("  (mask _n at token position p took the filler; the text after it)", style="dim")
    for n, step in enumerate(result.steps, start=1):
        out.append(f"\n{n:>3}. ", style="dim")
        out.append(f"_{order.get(step.position, '?')}", style="bold")
        out.append(f" @ {step.position} ← ", style="dim")
        out.append(piece(step.token), style="bold cyan")
        out.append(f" {percent(step.prob)}  ", style="dim")
        out.append(visible(step.text))
    return out
