"""The Fourier view: a modular-arithmetic embedding's power per frequency as a bar chart.

One column per frequency (0 .. p // 2), the key frequencies in yellow and
named in the title line with the top-8 share; a model that has grokked
puts nearly all its power in a few bars.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

if TYPE_CHECKING:
    from tui_lab.core.analysis.lenses.embedding_fourier import Spectrum

BARS = " ▁▂▃▄▅▆▇█"
HEIGHT = 12  # rows of bars
LABEL_EVERY = 5  # a frequency number under every 5th column


def bar_rows(power: list[float], height: int = HEIGHT, gap: int = 1) -> list[str]:
    """Rows of ▁..█ (top first), one column per share, scaled to the largest share."""
    peak = max(power) if power and max(power) > 0 else 1.0
    eighths = [round(share / peak * height * 8) for share in power]
    rows = []
    for row in range(height, 0, -1):  # the row's top edge, in whole cells
        cells = []
        for e in eighths:
            fill = max(0, min(8, e - (row - 1) * 8))
            cells.append(BARS[fill] + " " * gap)
        rows.append("".join(cells))
    return rows


def axis_line(n: int, gap: int = 1) -> str:
    """Frequency numbers under every ``LABEL_EVERY``-th column."""
    width = n * (1 + gap)
    line = [" "] * (width + 4)
    for k in range(0, n, LABEL_EVERY):
        for i, ch in enumerate(str(k)):
            line[k * (1 + gap) + i] = ch
    return "".join(line).rstrip()


def spectrum_text(spec: Spectrum, where: str, height: int = HEIGHT) -> Text:
    """The title line, the bars (key frequencies highlighted) and the frequency axis."""
    keys = set(spec.key_frequencies)
    named = ", ".join(map(str, spec.key_frequencies)) or "none yet"
    text = Text()
    text.append(f"embedding power per frequency · p = {spec.p} · {where}\n", style="bold")
    text.append("key frequencies ", style="dim")
    text.append(named, style="bold yellow")
    text.append(" · top-8 share ", style="dim")
    text.append(f"{spec.top8_share:.2f}", style="bold green" if spec.top8_share >= 0.8 else "bold")
    text.append("\n\n")
    for row in bar_rows(spec.power, height):
        for k, cell in enumerate(row[i:i + 2] for i in range(0, len(row), 2)):
            text.append(cell, style="yellow" if k in keys else "cyan")
        text.append("\n")
    text.append(axis_line(len(spec.power)) + "\n", style="dim")
    text.append("frequency k: cos and sin of 2πka/p over the residues a", style="dim")
    return text


class FourierView(Static):
    """The spectrum on show, or a line saying why there is none."""

    def show(self, spec: Spectrum, where: str) -> None:
        """Draw ``spec`` (a core ``Spectrum``); ``where`` says which weights it is of."""
        self.update(spectrum_text(spec, where))

    def show_message(self, message: str) -> None:
        """No spectrum: say why."""
        self.update(Text(message, style="dim"))
