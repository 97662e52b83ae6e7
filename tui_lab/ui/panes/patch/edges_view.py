"""The Patch pane's edges view, Textual-free: the top edges as signed bars, the lines under
them (the metric, CPR and CMD, the known-circuit check), and the faithfulness curves'
points as the charts take them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text

from tui_lab.ui.panes.patch.dla_bars import signed_bar

if TYPE_CHECKING:
    from tui_lab.core.analysis.edges.edges_history import EdgesHistory
    from tui_lab.core.analysis.edges.known_circuit import KnownCircuit
    from tui_lab.core.verbs.circuit import Result

TOP = 20  # edges listed
BAR = 12  # each side of the axis: name, bars and score fit half of a 120-column screen


@dataclass
class EdgesView:
    """What the edges view shows: the circuit's result, its history, the check's verdict."""

    result: Result | None = None
    history: EdgesHistory | None = None
    check: KnownCircuit | None = None
    check_error: str | None = None

    def forget(self) -> None:
        self.result, self.history, self.check, self.check_error = None, None, None, None


def edges_text(result: Result | None, top: int = TOP) -> Text:
    """The top edges by |score|, strongest first, with their scores as bars."""
    if result is None:
        return Text("g scores every edge of the pair (EAP-IG, 5 steps) and draws the faithfulness curve",
                    style="dim")
    s = result.scores
    edges = s.top(top)
    width = max((len(e.name) for e in edges), default=4)
    limit = max((abs(e.score) for e in edges), default=0.0) or 1.0
    out = Text(no_wrap=True, overflow="crop")
    out.append(f"Top {len(edges)} of {s.graph.n_edges} edges", style="bold")
    out.append(f" · {s.method} · pair {result.pair.name}\n", style="dim")
    out.append(f"logit difference: clean {s.clean:.3f}, corrupted {s.corrupt:.3f}\n", style="dim")
    for e in edges:
        out.append(f"{e.name:>{width}} ")
        out.append_text(signed_bar(e.score, limit, BAR))
        out.append(f" {e.score:+.4f}\n")
    return out


def summary_text(view: EdgesView) -> Text:
    """CPR and CMD, the top 5%'s recovered fraction, and the known-circuit check's line."""
    out = Text()  # the check's line wraps: it names the heads it found
    if view.result is None:
        return out
    f = view.result.faithful
    out.append(f"CPR {f.cpr:.3f} · CMD {f.cmd:.3f} · top 5% recover {f.at(5.0):+.2f}", style="bold")
    out.append("  (k: the known-circuit check)\n", style="dim")
    if view.check is not None:
        out.append(view.check.line(), style="green" if view.check.found else "yellow")
    elif view.check_error is not None:
        out.append(view.check_error, style="yellow")
    return out


def curve_points(result: Result | None) -> tuple[list[float], list[float]]:
    """log10 of each percent of edges kept, and the recovered fraction there."""
    if result is None:
        return [], []
    import math

    f = result.faithful
    return [math.log10(p) for p in f.percents], list(f.recovered)


def history_points(history: EdgesHistory | None) -> tuple[list[float], list[float]]:
    """Each snapshot's step and the final circuit's recovered fraction there, from the first
    snapshot that tells the pair apart (before it the fraction is noise)."""
    if history is None:
        return [], []
    steps, recovered = history.readable()
    return [float(s) for s in steps], recovered
