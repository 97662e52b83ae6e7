"""``tfx-lab runs`` and ``tfx-lab compare``: run folders as tables, CSV, JSON and a terminal chart.

Summaries come from ``core.runs.summary`` (no torch); this module only lays
them out. ``expand_runs`` and ``short_names`` are also how ``export`` names runs.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from tui_lab.core.errors import LabError

from .shared import Subparsers

if TYPE_CHECKING:
    from rich.table import Table

    from tui_lab.core.runs.summary import RunSummary

# One fixed colour per run, in order: xterm-256 indices (plotext takes them as is, and the
# legend printed under a chart uses the same escape), readable on dark and light terminals.
COLOURS = (4, 1, 2, 208, 5, 6, 3, 244)
STATUS_STYLE = {"running": "cyan", "target": "green", "finished": "green", "time": "green",
                "stopped": "yellow", "failed": "red", "damaged": "red"}


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("runs", help="every run under DIR with its summary")
    s.add_argument("dir", nargs="?", help="folder of runs (default: $TFX_LAB_RUNS or ./runs)")
    _add_formats(s)
    s.set_defaults(handler=runs)

    s = sub.add_parser("compare", help="runs side by side")
    s.add_argument("runs", nargs="+", metavar="RUN", help="run folders (a sweep folder: its runs)")
    _add_formats(s)
    s.add_argument("--plot", action="store_true", help="overlay train/val loss in the terminal")
    s.set_defaults(handler=compare)


def _add_formats(s: argparse.ArgumentParser) -> None:
    fmt = s.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON (a list of summaries)")
    fmt.add_argument("--csv", action="store_true", help="print CSV")


def runs(args: argparse.Namespace) -> int:
    """Every run folder under DIR (default: the runs root) with its summary."""
    from tui_lab.core.runs.folder import runs_root
    from tui_lab.core.runs.summary import summarize_runs

    root = runs_root(args.dir)
    if not root.is_dir():
        if args.dir:
            raise LabError(f"{root}: no such folder of runs")
        rows: list[RunSummary] = []  # no runs yet under the default root: an empty list
    else:
        rows = summarize_runs(root)
    emit(rows, args, title=f"Runs in {root}")
    return 0


def compare(args: argparse.Namespace) -> int:
    """Runs side by side; ``--plot`` overlays their loss curves in the terminal."""
    if args.plot and (args.json or args.csv):
        raise LabError("--plot draws for people; use it without --json/--csv")
    from tui_lab.core.runs.summary import summarize_run

    folders = expand_runs(args.runs)
    bases: dict[str | None, dict[str, object]] = {}
    names = short_names(folders)
    rows = [summarize_run(f, name=n, bases=bases) for f, n in zip(folders, names, strict=True)]
    emit(rows, args, title="Compare")
    if args.plot:
        print(plot(rows))
    return 0


def expand_runs(paths: list[str]) -> list[Path]:
    """Run folders named on the command line: a run folder as is, a sweep folder (or its
    ``sweep.json``) or a folder of runs as the runs in it; each folder once."""
    from tui_lab.core.runs.summary import is_run_folder, list_run_folders

    out: list[Path] = []
    seen: set[Path] = set()
    for text in paths:
        p = Path(text)
        if p.is_file() and p.name == "sweep.json":
            p = p.parent
        if not p.exists():
            raise LabError(f"{p}: no such run folder")
        if p.is_file():
            raise LabError(f"{p}: a file, not a run folder")
        found = [p] if is_run_folder(p) else list_run_folders(p)
        if not found:
            raise LabError(f"{p}: holds no run folders")
        for f in found:
            key = f.resolve()
            if key not in seen:
                seen.add(key)
                out.append(f)
    return out


def short_names(folders: list[Path]) -> list[str]:
    """Folder names, or parent/name where two runs share a name (two sweeps' s0)."""
    names = [f.name for f in folders]
    return [f"{f.parent.name}/{f.name}" if names.count(f.name) > 1 else f.name for f in folders]


def emit(rows: list[RunSummary], args: argparse.Namespace, title: str) -> None:
    """JSON (a list of summaries), CSV (``CSV_COLUMNS``) or a rich table."""
    from tui_lab.core.config.diff import difference_label
    from tui_lab.core.runs.summary import CSV_COLUMNS, csv_row

    if args.json:
        print(json.dumps([r.to_dict() for r in rows]))
    elif args.csv:
        writer = csv.DictWriter(sys.stdout, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
        writer.writeheader()
        for r in rows:
            writer.writerow(csv_row(r))
    else:
        from rich.console import Console

        console = Console()
        if not rows:
            console.print(f"{title}: no runs")
            return
        shared = shared_difference(rows)
        if shared:
            title += f"\nall differ from their preset in: {difference_label(shared)}"
        console.print(table(rows, title))


def best_text(r: RunSummary) -> str:
    """Exact match for the digit tasks; validation loss and bits per character for char-lm;
    an SAE's or a crosscoder's last figures (a crosscoder's: its new, gone and shared features)."""
    if r.kind in ("sae", "crosscoder"):
        return r.sae_text or "-"
    if r.is_lm:
        if r.best_val_loss is None:
            return "-"
        return f"{r.best_val_loss:.3f} ({r.bits_per_char:.2f} bpc)"
    return "-" if r.best_exact_match is None else f"{r.best_exact_match:.1%}"


def table(rows: list[RunSummary], title: str) -> Table:
    from rich.table import Table
    from rich.text import Text

    t = Table(title=title, title_justify="left")
    labels = distinct_labels(rows) if len(rows) > 1 else [r.label if r.diff else "-" for r in rows]
    for col, justify in (("run", "left"), ("preset", "left"), ("differs", "left"), ("status", "left"),
                         ("steps", "right"), ("best", "right"), ("to target", "right"),
                         ("tok/s", "right"), ("params", "right"), ("date", "left")):
        t.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r, label in zip(rows, labels, strict=True):
        status = Text(r.status, style=STATUS_STYLE.get(r.status, ""))
        if r.status in ("damaged", "failed"):
            status.append(f": {r.detail}")
        steps = f"{r.step}/{r.total_steps}" if r.total_steps else str(r.step or "-")
        target = "-"
        if r.steps_to_target is not None:
            secs = "" if r.seconds_to_target is None else f", {r.seconds_to_target:.1f} s"
            target = f"{r.steps_to_target}{secs}"
        t.add_row(
            r.name, r.preset or "-", Text("-" if label == r.name else label), status, steps, best_text(r),
            target, f"{r.tokens_per_s:,.0f}" if r.tokens_per_s else "-",
            f"{r.params:,}" if r.params else "-",
            datetime.fromtimestamp(r.started).strftime("%Y-%m-%d %H:%M") if r.started else "-",
        )
    return t


def shared_difference(rows: list[RunSummary]) -> dict[str, object]:
    """The part of the config difference every row has alike (said once, above the table)."""
    if len(rows) < 2:
        return {}
    first = rows[0].diff
    return {k: v for k, v in first.items() if all(k in r.diff and r.diff[k] == v for r in rows[1:])}


def distinct_labels(rows: list[RunSummary]) -> list[str]:
    """Each run's difference from its preset without the part all rows share; its name
    where nothing is left or two runs would read the same."""
    from tui_lab.core.config.diff import difference_label

    shared = shared_difference(rows)
    labels = [difference_label({k: v for k, v in r.diff.items() if k not in shared}) for r in rows]
    return [lab if lab and labels.count(lab) == 1 else (f"{lab} ({r.name})" if lab else r.name)
            for lab, r in zip(labels, rows, strict=True)]


def plot(rows: list[RunSummary], width: int | None = None, height: int | None = None) -> str:
    """Train and validation loss of ``rows`` side by side, one colour per run (log scale),
    and a legend of how each run differs (under the charts: plotext drops a legend
    that does not fit inside one)."""
    import plotext as plt

    from tui_lab.core.runs.curves import read_curves

    size = shutil.get_terminal_size((120, 30))
    plt.clear_figure()
    plt.theme("clear")  # the terminal's own background
    plt.plotsize(width or size.columns, height or max(15, min(size.lines - 2 - len(rows), 30)))
    plt.subplots(1, 2)
    curves = [read_curves(r.path) for r in rows]
    labels = distinct_labels(rows)
    for col, (metric, name) in enumerate((("train_loss", "train loss"), ("val_loss", "val loss")), 1):
        plt.subplot(1, col)
        plt.title(name)
        plt.xlabel("step")
        values = [v for c in curves for v in c.curve(metric).values]
        for i, c in enumerate(curves):
            curve = c.curve(metric)
            if curve.steps:
                plt.plot(curve.steps, curve.values, color=COLOURS[i % len(COLOURS)], marker="braille")
        if values and all(v > 0 for v in values):
            plt.yscale("log")
    legend = [f"\x1b[38;5;{COLOURS[i % len(COLOURS)]}m━━\x1b[0m {lab}" for i, lab in enumerate(labels)]
    return "\n".join([str(plt.build()), *legend])
