"""The Runs pane's table without Textual: rows, columns, cell text, sorting, filtering.

A ``RunRow`` is a core ``RunSummary`` plus where it sits (the sweep and arm it
belongs to, if any). Everything here is plain Python, so it is unit tested
without an app, and cheap for hundreds of rows.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.text import Text

from tui_lab.core.runs.curves import METRICS, Curve, RunCurves, mean_curve, read_curves
from tui_lab.core.runs.summary import RunSummary, summarize_run
from tui_lab.core.sweeps.record import SWEEP_FILE, arm_groups


@dataclass
class RunRow:
    """One table row: a run folder's summary, and its sweep arm when it is a sweep's run."""

    summary: RunSummary
    arm: str | None = None  # the arm's label ("model.norm=post")
    sweep: str | None = None  # the sweep folder's path

    @property
    def key(self) -> str:
        """The row's identity (its folder's path)."""
        return self.summary.path

    @property
    def group(self) -> tuple[str, str] | None:
        """(sweep folder, arm label) for a sweep's run; None for a lone run."""
        return (self.sweep, self.arm) if self.sweep and self.arm else None

    @property
    def series_key(self) -> str:
        """The overlay series the row belongs to: its arm's for a sweep's run, else its own."""
        return f"arm:{self.sweep}:{self.arm}" if self.group is not None else self.key

    @property
    def legend(self) -> str:
        """The overlay's label: how the config differs from its preset (else the name)."""
        return self.summary.label


@dataclass(frozen=True)
class Column:
    """A table column: its key, header, alignment and how to sort by it."""

    key: str
    header: str
    right: bool = False
    width: int | None = None  # None: as wide as its widest cell


COLUMNS = (
    Column("name", "run", width=18),
    Column("preset", "preset"),
    Column("label", "difference", width=26),
    Column("status", "status"),
    Column("step", "step", True),
    Column("exact", "exact", True),
    Column("val", "val loss", True),
    Column("bpc", "bits/ch", True),
    Column("to_steps", "→target", True),
    Column("to_seconds", "→s", True),
    Column("speed", "tok/s", True),
    Column("params", "params", True),
    Column("date", "date"),
)
COLUMN_KEYS = tuple(c.key for c in COLUMNS)

# A column's figure of a row (None: the row has none, it sorts last).
_SORT: dict[str, Callable[[RunRow], str | float | None]] = {
    "name": lambda r: r.summary.name.lower(),
    "preset": lambda r: r.summary.preset,
    "label": lambda r: r.arm or difference_text(r),
    "status": lambda r: r.summary.status,
    "step": lambda r: r.summary.step,
    "exact": lambda r: r.summary.best_exact_match,
    "val": lambda r: r.summary.best_val_loss,
    "bpc": lambda r: r.summary.bits_per_char,
    "to_steps": lambda r: r.summary.steps_to_target,
    "to_seconds": lambda r: r.summary.seconds_to_target,
    "speed": lambda r: r.summary.tokens_per_s,
    "params": lambda r: r.summary.params,
    "date": lambda r: r.summary.started,
}


def difference_text(row: RunRow) -> str:
    """The difference column: the config difference, or why a damaged folder is damaged."""
    s = row.summary
    if s.status == "damaged":  # the reason, less the folder's path (the row names it)
        return s.detail.replace(f"{s.path}/", "").replace(f"{s.path}: ", "")
    return s.label if s.diff else "(as preset)"


def human_count(n: float) -> str:
    """12345 -> "12.3k", 1234567 -> "1.23M"."""
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:.0f}"


def cell(row: RunRow, key: str) -> str:
    """The text of one cell ("" where the run has no figure)."""
    s = row.summary
    if key == "name":
        return s.name
    if key == "preset":
        return s.preset or ""
    if key == "label":
        return difference_text(row)
    if key == "status":
        return s.status
    if key == "step":
        return f"{s.step}" + (f"/{s.total_steps}" if s.total_steps else "")
    if key == "exact":
        return "" if s.best_exact_match is None else f"{s.best_exact_match:.1%}"
    if key == "val":
        return "" if s.best_val_loss is None else f"{s.best_val_loss:.3f}"
    if key == "bpc":
        return "" if s.bits_per_char is None else f"{s.bits_per_char:.2f}"
    if key == "to_steps":
        return "" if s.steps_to_target is None else str(s.steps_to_target)
    if key == "to_seconds":
        return "" if s.seconds_to_target is None else f"{s.seconds_to_target:.1f}"
    if key == "speed":
        return "" if s.tokens_per_s is None else human_count(s.tokens_per_s)
    if key == "params":
        return "" if s.params is None else human_count(s.params)
    if key == "date":
        return datetime.fromtimestamp(s.started).strftime("%m-%d %H:%M") if s.started else ""
    raise KeyError(key)


def sort_rows(rows: list[RunRow], key: str, reverse: bool = False) -> list[RunRow]:
    """Rows sorted by column ``key``; rows without a figure go last either way.

    Ties keep a sweep's runs together by arm, then by name.
    """
    get = _SORT[key]
    figures = [(get(r), r) for r in rows]
    known = [(figure, r) for figure, r in figures if figure is not None]
    missing = [r for figure, r in figures if figure is None]
    tie = sorted(known, key=lambda fr: (fr[1].sweep or "", fr[1].arm or "", fr[1].summary.name))
    ranked = [r for _, r in sorted(tie, key=lambda fr: fr[0], reverse=reverse)]
    return ranked + sorted(missing, key=lambda r: r.summary.name)


def filter_rows(rows: list[RunRow], text: str) -> list[RunRow]:
    """Rows whose name, preset, difference, arm, task or status hold every word of ``text``."""
    words = text.lower().split()
    if not words:
        return list(rows)

    def haystack(r: RunRow) -> str:
        s = r.summary
        return " ".join(
            (s.name, s.preset or "", difference_text(r), r.arm or "", s.task or "", s.status)
        ).lower()

    return [r for r in rows if all(w in haystack(r) for w in words)]


def overlay_series(rows: list[RunRow], marked: list[str]) -> dict[str, tuple[str, list[Path]]]:
    """series key -> (legend, run folders): one per marked run, one per marked sweep arm
    (the mean of all the arm's runs), in marking order."""
    by_key = {r.key: r for r in rows}
    out: dict[str, tuple[str, list[Path]]] = {}
    for key in marked:
        row = by_key.get(key)
        if row is None:
            continue
        if row.group is not None:
            runs = [Path(r.key) for r in rows if r.group == row.group]
            label = f"{row.arm} (mean of {len(runs)})" if len(runs) > 1 else str(row.arm)
            out[row.series_key] = (label, runs)
        else:
            out[key] = (row.legend, [Path(key)])
    return out


def detail_text(row: RunRow, styles: dict[str, str]) -> Text:
    """The line under the table: the run's name, status, why, and its arm."""
    s = row.summary
    text = Text()
    text.append(f"{s.name}: ", style="bold")
    text.append(s.status, style=styles.get(s.status, ""))
    if s.detail:
        text.append(f" · {s.detail}", style="dim")
    if s.sae_text:
        text.append(f" · {s.sae_text}")
    if row.arm:
        text.append(f" · arm {row.arm}", style="cyan")
    return text


# ---- reading the folders (the pane's thread worker calls this) --------------------

_WATCHED = ("metrics.jsonl", "state.json", "log.txt", "config.yaml", "model.safetensors",
            "trainer_state.json", "cfg.json", "transcoder_metrics.json", "crosscoder_weights.safetensors")


def folder_stamp(path: Path) -> tuple[float, ...]:
    """The modification times of a run's files: a row is re-read only when they change."""
    out = []
    for name in _WATCHED:
        try:
            out.append(os.stat(path / name).st_mtime)
        except OSError:
            out.append(0.0)
    return tuple(out)


class RowReader:
    """Reads the run folders under some roots into rows, re-reading only folders that changed.

    Running runs are re-read on every call (their status depends on the clock).
    """

    def __init__(self) -> None:
        self._cache: dict[str, tuple[tuple[float, ...], RunRow]] = {}
        self._bases: dict[str | None, dict[str, Any]] = {}

    def read(self, roots: list[Path]) -> list[RunRow]:
        """Every run folder under ``roots`` (two levels deep) as rows; never raises."""
        from tui_lab.core.runs.summary import list_run_folders

        rows: list[RunRow] = []
        seen: set[str] = set()
        for i, root in enumerate(roots):
            arms = _sweep_arms(root)
            for path in list_run_folders(root):
                if str(path) in seen:
                    continue
                seen.add(str(path))
                name = path.name if path == root else str(path.relative_to(root))
                if i and path != root:  # a folder added with o: its own name first
                    name = f"{root.name}/{name}"
                rows.append(self._row(path, name, arms.get(str(path))))
        return rows

    def _row(self, path: Path, name: str, arm: tuple[str, str] | None) -> RunRow:
        stamp = folder_stamp(path)
        cached = self._cache.get(str(path))
        if cached and cached[0] == stamp and cached[1].summary.status != "running":
            row = cached[1]
        else:
            row = RunRow(summarize_run(path, name=name, bases=self._bases))
            self._cache[str(path)] = (stamp, row)
        if arm is not None:
            row.sweep, row.arm = arm
        return row


def _sweep_arms(root: Path) -> dict[str, tuple[str, str]]:
    """run folder path -> (sweep folder, arm label), for ``root`` and its sub-folders with a sweep.json."""
    out: dict[str, tuple[str, str]] = {}
    candidates = [root]
    try:
        candidates += sorted(p for p in root.iterdir() if (p / SWEEP_FILE).is_file())
    except OSError:
        pass
    for folder in candidates:
        try:
            groups = arm_groups(folder)
        except Exception:  # noqa: BLE001 - a damaged sweep.json: its runs are lone rows
            continue
        for group in groups:
            for run in group.runs:
                out[str(run)] = (str(folder), group.label)
    return out


class CurveReader:
    """Reads the overlay's curves: a run's own, or the mean over a sweep arm's runs.

    A run's file is parsed again only when its files changed.
    """

    def __init__(self) -> None:
        self._cache: dict[Path, tuple[tuple[float, ...], RunCurves]] = {}

    def read(
        self, series: dict[str, tuple[str, list[Path]]]
    ) -> dict[str, tuple[str, dict[str, Curve]]]:
        """series key -> (legend, {metric: curve}) for series key -> (legend, run folders)."""
        out: dict[str, tuple[str, dict[str, Curve]]] = {}
        for key, (label, runs) in series.items():
            read = []
            for run in runs:
                stamp = folder_stamp(run)
                cached = self._cache.get(run)
                if cached is None or cached[0] != stamp:
                    cached = self._cache[run] = (stamp, read_curves(run))
                read.append(cached[1])
            if len(read) == 1:
                out[key] = (label, {m: read[0].curve(m) for m in METRICS})
            else:
                out[key] = (label, {m: mean_curve([c.curve(m) for c in read]) for m in METRICS})
        return out
