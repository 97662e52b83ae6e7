"""How a run ended (or that it has not), read from the folder without loading anything.

``TrainingRun`` records how it ended in ``state.json`` (``"end"``: reason,
message, step) and writes the same message as the last line of ``log.txt``.
The reason comes from ``state.json``, else from that line (folders written
before ``"end"`` existed), and where both are missing (a process killed before
it could say goodbye) from ``state.json``'s figures and how recently the
folder was written.

Statuses: ``running``, ``target``, ``finished``, ``time``, ``stopped``,
``failed`` (nan or error) and ``damaged`` (the folder cannot be read; the
summary says why).
"""

from __future__ import annotations

import os
import re
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tui_lab.core.config.sections import TrainConfig

# A run whose files were written this recently, with no closing line, is taken
# to be alive: metrics are appended every step and a checkpoint every few seconds.
RUNNING_WINDOW_S = 60.0

# Statuses after which a run has nothing left to do (a sweep skips them, and a
# run that failed on nan: training it again would fail the same way).
COMPLETE = frozenset({"target", "finished", "time"})


def is_complete(status: str, detail: str) -> bool:
    """Whether a run has nothing left to do: it ended on its own, or on a nan loss."""
    return status in COMPLETE or (status == "failed" and detail.startswith("nan"))

# The closing messages of core/train.py, first match wins.
_CLOSING = (
    (re.compile(r"^finished \d+ steps"), "finished"),
    (re.compile(r"^reached .* exact match at step \d+"), "target"),
    (re.compile(r"^time limit of .* reached at step \d+"), "time"),
    (re.compile(r"^(stopped|interrupted) at step \d+"), "stopped"),
    (re.compile(r"became (nan|inf|-inf|inf/nan)\b"), "nan"),
    (re.compile(r"^training failed at step"), "error"),
)
_STARTED = re.compile(r"^training on .* from step \d+ to \d+")
_TAIL_BYTES = 4096


def read_log_ends(path: Path) -> tuple[str | None, str | None, float | None]:
    """(first line's time stamp, last line's message, log.txt's mtime); Nones when absent.

    Reads at most the first and the last few KB: a log can grow with every resume.
    """
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            f.seek(0)
            head = f.read(min(size, 64))
            f.seek(max(0, size - _TAIL_BYTES))
            tail = f.read()
            mtime = os.fstat(f.fileno()).st_mtime
    except OSError:
        return None, None, None
    stamp = head.split(b" ", 1)[0].decode("ascii", "replace") if head else None
    lines = [ln for ln in tail.decode("utf-8", "replace").splitlines() if ln.strip()]
    if size > _TAIL_BYTES:
        lines = lines[1:]  # the first may be the end of a longer line
    last = lines[-1].split(" ", 1)[1] if lines and " " in lines[-1] else None
    return stamp, last, mtime


def parse_stamp(stamp: str | None) -> float | None:
    """A log line's ISO time stamp as epoch seconds; None when it is not one."""
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def closing_reason(message: str | None) -> str | None:
    """The DoneEvent reason a closing log line stands for; ``"started"`` for a start
    line; None for anything else (or no line)."""
    if not message:
        return None
    for pattern, reason in _CLOSING:
        if pattern.search(message):
            return reason
    if _STARTED.match(message):
        return "started"
    return "error"  # a RunError's message (disk full, ...): the run ended on it


def status_of(
    last_line: str | None,
    state: dict[str, object] | None,
    train: TrainConfig,
    last_write: float | None,
    now: float | None = None,
) -> tuple[str, str]:
    """(status, one-line detail) from the log's last line, ``state.json`` and the last write.

    ``train`` is the run's TrainConfig (steps, target and time limit decide what
    a folder without a closing line had reached).
    """
    end = state.get("end") if isinstance(state, dict) else None
    if isinstance(end, dict) and isinstance(end.get("reason"), str) and isinstance(end.get("message"), str):
        reason, last_line = end["reason"], end["message"]
    else:
        reason = closing_reason(last_line)
    now = time.time() if now is None else now
    recent = last_write is not None and now - last_write < RUNNING_WINDOW_S
    if reason in ("finished", "target", "time", "stopped"):
        return reason, last_line or reason
    if reason in ("nan", "error"):
        return "failed", f"{reason}: {last_line}"
    if recent:
        return "running", f"last written {max(0.0, now - (last_write or now)):.0f} s ago"
    if state is None:
        return "damaged", "no state.json: it never saved a checkpoint"
    step = _int(state.get("step"))
    best = state.get("best_accuracy")
    elapsed = state.get("elapsed")
    if step >= train.steps:
        return "finished", f"finished {step} steps"
    if train.target_accuracy is not None and isinstance(best, (int, float)) and best >= train.target_accuracy:
        return "target", f"reached {best:.1%} exact match"
    if train.max_seconds is not None and isinstance(elapsed, (int, float)) and elapsed >= train.max_seconds:
        return "time", f"time limit of {train.max_seconds:g} s reached at step {step}"
    if reason == "started":
        return "stopped", f"no closing line: the process ended at step {step} without one (killed?)"
    return "stopped", f"stopped at step {step}"


def _int(value: object) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0
