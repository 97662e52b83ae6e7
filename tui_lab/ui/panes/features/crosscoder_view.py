"""The crosscoder diff view as Rich text (no Textual): the header with the relative-norm
histogram, a list's lines, a feature's card with its contexts at every source, and the
typed text's tokens with the features firing on each.

The list and the card speak of the same density: the share of the table's tokens (the
text read at every source when the crosscoder opened) on which the crosscoder's own
activation, its encoder reading every source at once, is above zero.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from tui_lab.ui.panes.features.card_view import shown

if TYPE_CHECKING:
    from tui_lab.core.verbs.crosscoder_features import CrosscoderCard, FeatureRow
    from tui_lab.ui.panes.features.crosscoder_workers import TokenFeature

GROUPS = ("b_only", "a_only", "shared")  # the lists ``g`` cycles through
BARS = " ▁▂▃▄▅▆▇█"
# the classes' titles, as core/sae/crosscoder_norms.py's TITLES (that module imports torch;
# this one is imported before torch loads)
TITLES = {"b_only": "new at B", "a_only": "gone at B", "shared": "shared", "mixed": "in between", "dead": "dead"}
SHADE_STYLES = ("", "on grey23", "on grey35", "on grey50", "bold black on grey78")


def histogram_bars(counts: list[int], height: int = 4) -> list[str]:
    """The histogram as ``height`` rows of block characters, one column per bin, tallest on top."""
    most = max(counts, default=0) or 1
    levels = [round(c / most * height * 8) for c in counts]
    rows = []
    for row in range(height, 0, -1):
        floor = (row - 1) * 8
        rows.append("".join(BARS[max(0, min(8, lv - floor))] * 2 for lv in levels))
    return rows


def header_text(summary: dict[str, object], sources: list[str], group: str, hook: str,
                tokens: int | None = None) -> Text:
    """Which sources, the counts of each class, the histogram, the list on show and what its
    columns are (``tokens``: the table's, whose density the list shows)."""
    out = Text()
    out.append("Crosscoder diff", style="bold")
    a, b = sources[0], sources[-1]
    out.append(f"  ·  {hook}  ·  A = {a}, B = {b}\n", style="dim")
    counts = summary.get("counts")
    if isinstance(counts, dict):
        for kind, n in counts.items():
            style = "bold reverse" if kind == group else ""
            out.append(f" {TITLES[kind]} {n} ", style=style)
            out.append(" ")
        out.append("\n")
    hist = summary.get("histogram")
    if isinstance(hist, list) and hist:
        for line in histogram_bars([int(h["count"]) for h in hist]):
            out.append("  " + line + "\n", style="cyan")
        out.append("  A only" + " " * (2 * len(hist) - 14) + "B only\n", style="dim")
        out.append("  relative decoder norm ||d_B|| / (||d_A|| + ||d_B||) of the live features", style="dim")
    if tokens is not None:
        out.append(f"\n  list: feature · r = relative norm · % = share of the {tokens:,} text tokens it fires on "
                   "(all sources read at once)", style="dim")
    return out


def ordered(group: str, rows: list[FeatureRow], density: list[float]) -> list[FeatureRow]:
    """A list's rows in the order shown: new at B most one-sided first, gone at B likewise,
    the others densest first; ties by density (the column the list shows)."""
    if group == "b_only":
        return sorted(rows, key=lambda r: (-r["relative_norm"], -density[r["index"]]))
    if group == "a_only":
        return sorted(rows, key=lambda r: (r["relative_norm"], -density[r["index"]]))
    return sorted(rows, key=lambda r: -density[r["index"]])


def row_line(row: FeatureRow, density: float) -> Text:
    """One feature of a list: index, relative norm, and the share of the table's tokens it
    fires on (``density``: the card's "fires on", the same number)."""
    line = Text(no_wrap=True)
    line.append(f"{row['index']:>6} ", style="bold")
    line.append(f"r {row['relative_norm']:.3f}  {density:7.2%}", style="dim")
    return line


def card_text(card: CrosscoderCard) -> Text:
    """A feature: its class and norms, then its top contexts at each source, shaded by activation."""
    out = Text()
    out.append(f"feature {card['feature']}", style="bold")
    out.append(f"  {TITLES[card['kind']]}, relative norm {card['relative_norm']:.3f}, decoder norms "
               + ", ".join(f"{n:.3f}" for n in card["norms"]) + "\n", style="dim")
    out.append(f"fires on {card['density']:.2%} of the {card['tokens']:,} tokens (every source read at once, "
               "as the list)\n", style="dim")
    for src in card["sources"]:
        out.append(f"\nat {src['source']}", style="bold")
        out.append(f" (the encoder reading it alone): density {src['density']:.2%}, "
                   f"max {src['max_activation']:.3f}\n", style="dim")
        if not src["contexts"]:
            out.append("  never fires here\n", style="italic dim")
        for c in src["contexts"]:
            out.append(f"  {c['peak']:7.3f}  ", style="dim")
            lo = max(0, c["peak_at"] - 30)
            for j in range(lo, min(len(c["tokens"]), c["peak_at"] + 12)):
                style = "bold reverse" if j == c["peak_at"] else SHADE_STYLES[c["shade"][j]]
                out.append(shown(c["tokens"][j]), style=style)
            out.append("\n")
    return out


def token_line(row: TokenFeature, token: str, sources: list[str], kind: str | None) -> Text:
    """One feature on one token of the typed text: the crosscoder's activation (every source read
    at once) and the encoder's reading each source alone; ``kind`` its class (None: unknown)."""
    line = Text(no_wrap=True)
    line.append(f"{row.t:>3} {shown(token):<6}", style="bold")
    line.append(f" feature {row.feature:<6}", style="dim")
    line.append(f"{TITLES[kind] if kind else '':<11}", style="cyan")
    line.append(f" all sources {row.joint:6.3f}", style="" if row.joint > 0 else "dim")
    for label, value in zip(sources, row.alone, strict=True):
        line.append(f"  ·  {label} alone {value:6.3f}", style="dim")
    return line
