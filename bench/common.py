"""Shared pieces of the benchmarks: machine facts, results and interleaved timing.

Speed on these shared machines drifts by tens of percent from one minute to
the next (other processes compete for the two cores), so nothing here compares
runs made at different times. Contenders are timed in short alternating windows
in one process (A B C, then B C A, ...), and each round's *ratio* to the
reference is kept; the median of those ratios is the figure reported.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

# ---- results -----------------------------------------------------------------------


@dataclass
class Row:
    """One line of the terminal table / RESULTS.md."""

    item: str
    value: str
    goal: str = ""
    ok: bool | None = None  # None: no goal (informational)
    note: str = ""


@dataclass
class Section:
    """What one benchmark item measured: JSON keys and table rows."""

    name: str
    title: str
    values: dict[str, Any] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None


# ---- the machine -------------------------------------------------------------------


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine() -> dict[str, Any]:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "load_average_1_5_15": load_average(),
    }


# ---- interleaved timing --------------------------------------------------------------


@dataclass
class Contender:
    """Something to time: ``run(i)`` does unit ``i`` of work and returns its size
    (tokens, steps...). Every contender is fed the same sequence of ``i``."""

    name: str
    run: Callable[[int], float]


def interleaved(
    contenders: Sequence[Contender],
    *,
    reference: str,
    budget_s: float,
    window_s: float = 1.0,
    min_rounds: int = 3,
    max_rounds: int = 60,
    warmup: int = 3,
) -> dict[str, Any]:
    """Time ``contenders`` in alternating windows; rates and ratios to ``reference``.

    Each round times one window of every contender, rotating the order so none
    always runs first (or right after the same neighbour). A window runs the
    same units (``i`` values) for every contender and lasts about ``window_s``
    (the unit count is calibrated after the warm-up). Rounds continue until
    ``budget_s`` is spent (at least ``min_rounds``).

    Every window is timed twice: wall clock, and this process's CPU time
    (``time.process_time``: all its threads, but not the time other processes
    hold the cores). With one torch thread the CPU-time rate is the speed the
    window would have had on an idle machine, so its ratio is far steadier on a
    shared machine; both are reported.

    Returns per contender the median rate (units/s, wall and CPU) and the best
    window's rate, and per non-reference contender the median over rounds of
    ``rate / reference rate`` (``ratio``, wall; ``ratio_cpu``) with the wall
    ratio's spread.
    """
    for c in contenders:
        for i in range(warmup):
            c.run(i)
    # Calibrate: how many units fit in a window for the slowest contender.
    unit_time = 0.0
    for c in contenders:
        t0 = time.perf_counter()
        c.run(warmup)
        unit_time = max(unit_time, time.perf_counter() - t0)
    per_window = max(1, int(window_s / max(unit_time, 1e-6)))

    rates: dict[str, list[float]] = {c.name: [] for c in contenders}
    cpu_rates: dict[str, list[float]] = {c.name: [] for c in contenders}
    start = time.perf_counter()
    unit = 0
    rounds = 0
    n = len(contenders)
    while rounds < max_rounds and (rounds < min_rounds or time.perf_counter() - start < budget_s):
        order = [contenders[(rounds + k) % n] for k in range(n)]
        units = range(unit, unit + per_window)
        for c in order:
            t0, c0 = time.perf_counter(), time.process_time()
            size = 0.0
            for i in units:
                size += c.run(i)
            rates[c.name].append(size / (time.perf_counter() - t0))
            cpu_rates[c.name].append(size / max(time.process_time() - c0, 1e-9))
        unit += per_window
        rounds += 1
    out: dict[str, Any] = {"rounds": rounds, "units_per_window": per_window}
    ref, ref_cpu = rates[reference], cpu_rates[reference]
    for c in contenders:
        r, rc = rates[c.name], cpu_rates[c.name]
        entry: dict[str, Any] = {
            "median": statistics.median(r), "best": max(r), "median_cpu": statistics.median(rc),
        }
        if c.name != reference:
            ratios = [a / b for a, b in zip(r, ref, strict=True)]
            cpu_ratios = [a / b for a, b in zip(rc, ref_cpu, strict=True)]
            entry["ratio"] = statistics.median(ratios)
            entry["ratio_min"] = min(ratios)
            entry["ratio_max"] = max(ratios)
            entry["ratio_best_windows"] = max(r) / max(ref)
            entry["ratio_cpu"] = statistics.median(cpu_ratios)
            entry["ratio_cpu_min"] = min(cpu_ratios)
            entry["ratio_cpu_max"] = max(cpu_ratios)
        out[c.name] = entry
    return out


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def fmt_ratio(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}x"


def fmt_pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:+.1f}%"
