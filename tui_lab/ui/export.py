"""Export what the lab shows: a runs table as CSV or JSON, any screen as an SVG.

The table files hold the same fields as ``tfx-lab runs --csv/--json`` (through
``run_summary``'s ``csv_row`` and ``to_dict``) and land in the runs root as
``runs-<time>.csv``/``.json``; screenshots land in ``<runs root>/screenshots``.
The app's ``f12`` and the Runs pane's ``e``/``E`` call these and say, in a
notification, where the file went.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from textual.app import App

from tui_lab.core.runs.summary import CSV_COLUMNS, RunSummary, csv_row

SCREENSHOTS = "screenshots"


def stamp(now: datetime | None = None) -> str:
    """A file-name-safe local time, to the second ("20261130-210512")."""
    return (now or datetime.now()).strftime("%Y%m%d-%H%M%S")


def free_path(folder: Path, stem: str, suffix: str) -> Path:
    """``folder/stem.suffix``, or ``stem-2.suffix``... when that exists (two exports in a second)."""
    path = folder / f"{stem}{suffix}"
    n = 2
    while path.exists():
        path = folder / f"{stem}-{n}{suffix}"
        n += 1
    return path


def write_runs_table(
    summaries: Iterable[RunSummary], folder: Path, kind: str, now: datetime | None = None
) -> Path:
    """Write the runs as ``runs-<time>.csv`` (the CLI's columns) or ``.json`` (a list); its path."""
    if kind not in ("csv", "json"):
        raise ValueError(f"export kind: expected csv or json, got {kind!r}")
    folder.mkdir(parents=True, exist_ok=True)
    path = free_path(folder, f"runs-{stamp(now)}", f".{kind}")
    rows = list(summaries)
    with path.open("w", encoding="utf-8", newline="") as fh:
        if kind == "json":
            json.dump([r.to_dict() for r in rows], fh, indent=1)
            fh.write("\n")
        else:
            writer = csv.DictWriter(fh, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
            writer.writeheader()
            for r in rows:
                writer.writerow(csv_row(r))
    return path


def save_svg(app: App[None], runs_root: Path, pane: str) -> Path | None:
    """Save the screen as it is (any pane, a modal too) to ``<runs root>/screenshots`` as an SVG,
    named after ``pane`` and the time; say where in a notification. None (and an error
    notification) when it could not be written."""
    folder = Path(runs_root) / SCREENSHOTS
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = free_path(folder, f"{pane or 'lab'}-{stamp()}", ".svg")
        saved = app.save_screenshot(filename=path.name, path=str(folder))
    except OSError as exc:
        app.notify(f"Screenshot not saved: {exc.strerror or exc}", severity="error")
        return None
    app.notify(f"Screenshot saved to {saved}", title="Saved SVG")
    return Path(saved)
