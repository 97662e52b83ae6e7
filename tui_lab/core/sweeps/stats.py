"""Per-arm figures of a sweep: mean +- std and min-max over seeds, and how many reached the target."""

from __future__ import annotations

import math
import statistics
from typing import TypedDict

from tui_lab.core.runs.summary import RunSummary


class Spread(TypedDict):
    """A value over an arm's seeds: how many seeds have one, and its mean, std, min and max."""

    n: int
    mean: float | None
    std: float | None
    min: float | None
    max: float | None


def spread(values: list[float | None]) -> Spread:
    """``{"n", "mean", "std", "min", "max"}`` of the known values (std 0 for one; Nones when none)."""
    known = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not known:
        return {"n": 0, "mean": None, "std": None, "min": None, "max": None}
    return {
        "n": len(known),
        "mean": statistics.fmean(known),
        "std": statistics.stdev(known) if len(known) > 1 else 0.0,
        "min": min(known),
        "max": max(known),
    }


def arm_stats(label: str, runs: list[RunSummary]) -> dict[str, object]:
    """One row of a sweep's table, from the summaries of one arm's seeds."""
    lm = any(r.is_lm for r in runs)
    return {
        "arm": label,
        "seeds": len(runs),
        "finished": sum(r.status in ("finished", "target", "time") for r in runs),
        "reached": sum(r.steps_to_target is not None for r in runs),
        "target": next((r.target for r in runs if r.target is not None), None),
        "steps_to_target": spread([r.steps_to_target for r in runs]),
        "seconds_to_target": spread([r.seconds_to_target for r in runs]),
        "metric": "val_loss" if lm else "exact_match",
        "best": spread([r.best_val_loss if lm else r.best_exact_match for r in runs]),
        "bits_per_char": spread([r.bits_per_char for r in runs]) if lm else None,
    }


def format_spread(s: Spread, fmt: str = "{:.0f}") -> str:
    """``"412 ± 35 (380–450)"``; ``"-"`` when no seed has a value."""
    if not s["n"]:
        return "-"
    mean, std, lo, hi = (fmt.format(s[k]) for k in ("mean", "std", "min", "max"))
    return f"{mean} ± {std} ({lo}–{hi})" if s["n"] > 1 else mean
