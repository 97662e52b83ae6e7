"""Fewer points for a chart than a long run records: one per column is all a terminal can show."""

from __future__ import annotations

from collections.abc import Sequence


def thin(xs: Sequence[float], ys: Sequence[float], max_points: int) -> tuple[list[float], list[float]]:
    """At most ``max_points`` points: the mean of each equal-width bucket of steps."""
    n = len(xs)
    if n <= max_points or max_points <= 0:
        return list(xs), list(ys)
    out_x: list[float] = []
    out_y: list[float] = []
    size = n / max_points
    for b in range(max_points):
        lo, hi = int(b * size), max(int((b + 1) * size), int(b * size) + 1)
        chunk_x, chunk_y = xs[lo:hi], ys[lo:hi]
        out_x.append(sum(chunk_x) / len(chunk_x))
        out_y.append(sum(chunk_y) / len(chunk_y))
    return out_x, out_y
