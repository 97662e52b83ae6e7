"""A run's running record: ``metrics.jsonl`` (one JSON object a line) and ``log.txt``.

Both are appended, never rewritten, so each write costs the same however long
the run; a crash can leave only the last line half-written, and the reader
skips it.
"""

from __future__ import annotations

import json
import math
import os
from datetime import datetime
from pathlib import Path

from tui_lab.core.runs.run_files import LOG_FILE, METRICS_FILE, RunDir, RunError, reason


def _append_line(path: Path, line: str) -> None:
    """Append one line, first ending a line a crash left unterminated (so it stays alone)."""
    data = line.encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab+") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() > 0:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    data = b"\n" + data
            f.write(data)
            f.flush()
    except OSError as exc:
        raise RunError(f"cannot save {path}: {reason(exc)}") from exc


def append_metrics(run_dir: RunDir, record: dict[str, object]) -> None:
    """Append ``record`` as one JSON line to ``metrics.jsonl`` and flush it."""
    path = Path(run_dir) / METRICS_FILE
    try:
        line = json.dumps(record, separators=(",", ":")) + "\n"
    except (TypeError, ValueError) as exc:
        raise RunError(f"cannot save {path}: record is not JSON ({exc})") from exc
    _append_line(path, line)


def read_metrics(run_dir: RunDir) -> list[dict[str, object]]:
    """Every metrics record, in order; ``[]`` when there is no ``metrics.jsonl`` yet.

    Lines that are not a JSON object (a line cut short by a crash) are
    skipped: metrics are for charts, and one lost point must not make a run
    unreadable.
    """
    path = Path(run_dir) / METRICS_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise RunError(f"cannot read {path}: {reason(exc)}") from exc
    records = []
    for line in raw.decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            records.append(item)
    return records


def finite_number(value: object) -> float | None:
    """A record's number as a float; None for a missing, non-finite, boolean or text value."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def json_int(value: object) -> int:
    """``int(value)`` of a value read from JSON: a number or numeric text (else the
    TypeError or ValueError ``int`` raises)."""
    if isinstance(value, (int, float, str)):
        return int(value)
    raise TypeError(f"int() argument must be a number or text, not {type(value).__name__!r}")


def json_float(value: object) -> float:
    """``float(value)`` of a value read from JSON, as ``json_int`` does for ints."""
    if isinstance(value, (int, float, str)):
        return float(value)
    raise TypeError(f"float() argument must be a number or text, not {type(value).__name__!r}")


def log(run_dir: RunDir, message: str) -> None:
    """Append ``<local ISO time> <message>`` to ``log.txt`` (one line; newlines flattened)."""
    stamp = datetime.now().astimezone().isoformat(timespec="seconds")
    text = " ".join(str(message).split("\n"))
    _append_line(Path(run_dir) / LOG_FILE, f"{stamp} {text}\n")
