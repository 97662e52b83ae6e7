"""Which source each crosscoder feature belongs to: the relative decoder norm and its histogram.

For sources A and B, a feature's relative norm is ``||d_B|| / (||d_A|| + ||d_B||)``
(its decoder rows' norms at each): 0 when only A's reconstruction uses it, 1
when only B's, about ½ when both do. The crosscoder papers draw its histogram
over the live features: a peak at ½ (shared) and small ones at 0 and 1.

Classes, with the thresholds as the papers' figures read (the exclusive peaks
sit within a tenth of the ends):

- ``b_only`` (new at B): r ≥ 0.9;
- ``a_only`` (gone at B): r ≤ 0.1;
- ``shared``: 0.3 ≤ r ≤ 0.7;
- ``mixed``: in between (leaning to one side, neither exclusive nor shared);
- ``dead``: never fired on the rows training last saw (its norms mean nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

EXCLUSIVE = 0.1  # r ≤ EXCLUSIVE: A only; r ≥ 1 − EXCLUSIVE: B only
SHARED = 0.2  # |r − ½| ≤ SHARED: shared
CLASSES = ("b_only", "a_only", "shared", "mixed", "dead")
TITLES = {"b_only": "new at B", "a_only": "gone at B", "shared": "shared", "mixed": "in between", "dead": "dead"}
BINS = 20


def relative_norms(norms: torch.Tensor, a: int = 0, b: int = 1) -> torch.Tensor:
    """(F,) ``||d_b|| / (||d_a|| + ||d_b||)`` from (F, n) decoder norms (½ where both are zero)."""
    na, nb = norms[:, a].double(), norms[:, b].double()
    total = na + nb
    return torch.where(total > 0, nb / total.clamp_min(1e-300), torch.full_like(total, 0.5)).float()


def classify(rel: torch.Tensor, alive: torch.Tensor | None = None) -> list[str]:
    """Each feature's class (``CLASSES``) from its relative norm; ``alive``: (F,) bool, False is dead."""
    out = []
    for i, r in enumerate(rel.tolist()):
        if alive is not None and not bool(alive[i]):
            out.append("dead")
        elif r >= 1 - EXCLUSIVE:
            out.append("b_only")
        elif r <= EXCLUSIVE:
            out.append("a_only")
        elif abs(r - 0.5) <= SHARED:
            out.append("shared")
        else:
            out.append("mixed")
    return out


def counts(classes: list[str]) -> dict[str, int]:
    """How many features of each class (every class named, zeros included)."""
    return {c: classes.count(c) for c in CLASSES}


@dataclass(frozen=True)
class Histogram:
    """Counts of live features' relative norms in BINS equal bins over [0, 1]."""

    edges: list[float]
    counts: list[int]

    def to_json(self) -> list[dict[str, float | int]]:
        return [{"low": lo, "high": hi, "count": n}
                for lo, hi, n in zip(self.edges[:-1], self.edges[1:], self.counts, strict=True)]


def histogram(rel: torch.Tensor, alive: torch.Tensor | None = None, bins: int = BINS) -> Histogram:
    """The papers' histogram of the relative norm over the live features."""
    live = rel if alive is None else rel[alive]
    counted = torch.histc(live.float(), bins=bins, min=0.0, max=1.0) if live.numel() else torch.zeros(bins)
    edges = [round(i / bins, 6) for i in range(bins + 1)]
    return Histogram(edges, [int(c) for c in counted.tolist()])


def histogram_lines(hist: Histogram, width: int = 40) -> list[str]:
    """The histogram as text, one bin a line: ``0.00-0.05 ████ 12``."""
    most = max(hist.counts, default=0) or 1
    lines = []
    for lo, hi, n in zip(hist.edges[:-1], hist.edges[1:], hist.counts, strict=True):
        bar = "█" * round(width * n / most) if n else ""
        lines.append(f"{lo:4.2f}-{hi:4.2f} {bar} {n}")
    return lines


def summary(norms: torch.Tensor, fired: torch.Tensor) -> dict[str, object]:
    """Counts of each class between the first source and the last, the thresholds, and the
    histogram of the live features' relative norms (``fired``: (F,) firing counts)."""
    rel = relative_norms(norms, 0, norms.shape[1] - 1)
    alive = fired > 0
    return {"counts": counts(classify(rel, alive)),
            "thresholds": {"b_only": f"r >= {1 - EXCLUSIVE:g}", "a_only": f"r <= {EXCLUSIVE:g}",
                           "shared": f"|r - 0.5| <= {SHARED:g}", "dead": "never fired on training's last rows"},
            "histogram": histogram(rel, alive).to_json()}
