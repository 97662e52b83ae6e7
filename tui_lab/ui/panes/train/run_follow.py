"""A run folder's metrics as events: what opening a run shows, and following one.

``metrics.jsonl`` holds one record per step and per evaluation; the core's
``event_from_record`` turns each back into the ``StepEvent``/``EvalEvent`` the
live run posted, so an opened or followed run is drawn by the same code as a
live one. Nothing here imports Textual: the pane asks, then draws.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable
from pathlib import Path

from tui_lab.core.runs.events import EvalEvent, OptimizerEvent, StepEvent, event_from_record

MetricEvent = StepEvent | EvalEvent | OptimizerEvent
ReadMetrics = Callable[[Path], list[dict[str, object]]]  # records of a run folder's metrics.jsonl


def read_metrics(path: Path) -> list[dict[str, object]]:
    """The run folder's metrics records (the core's reader; call it once torch is loaded)."""
    from tui_lab.core.runs.log import read_metrics as read  # torch-backed, loaded by then

    return read(path)


def events_of(records: Iterable[object]) -> list[MetricEvent]:
    """The events the records stand for, in order; damaged or unknown records are left out."""
    events: list[MetricEvent] = []
    for record in records:
        event = optimizer_event(record) or event_from_record(record)
        if event is not None:
            events.append(event)
    return events


def optimizer_event(record: object) -> OptimizerEvent | None:
    """An ``"optimizer"`` record as its event; None for any other record or a damaged one."""
    if not isinstance(record, dict) or record.get("kind") != "optimizer":
        return None
    step, groups, tps, mfu = (record.get(k) for k in ("step", "groups", "tokens_per_s", "mfu"))
    if not isinstance(step, int) or not isinstance(groups, dict):
        return None
    clean = {
        str(name): {str(k): float(v) for k, v in figures.items() if isinstance(v, int | float)}
        for name, figures in groups.items() if isinstance(figures, dict)
    }
    speed = float(tps) if isinstance(tps, int | float) else 0.0
    return OptimizerEvent(step, clean, speed, float(mfu) if isinstance(mfu, int | float) else None)


def latest(events: Iterable[MetricEvent]) -> tuple[StepEvent | None, EvalEvent | None]:
    """The last step and the last evaluation among ``events`` (None where there is none)."""
    step: StepEvent | None = None
    evaluation: EvalEvent | None = None
    for event in events:
        if isinstance(event, StepEvent):
            step = event
        elif isinstance(event, EvalEvent):
            evaluation = event
    return step, evaluation


def resting_step(last: StepEvent, step: int, total_steps: int, elapsed: float) -> StepEvent:
    """A restored run's last step as the figures show it before it trains again.

    The run folder's own step count and time win over the last record's (a
    record may be newer than the checkpoint); speed, gradient norm and ETA
    described a loop that is no longer running, so they read as unknown.
    """
    return dataclasses.replace(
        last,
        step=step,
        total_steps=total_steps,
        grad_norm=float("nan"),
        tokens_per_s=0.0,
        elapsed=elapsed,
        eta=None,
    )


class RunFollower:
    """Polls a run folder another process writes and says when its metrics moved on."""

    def __init__(self, path: Path, read: ReadMetrics = read_metrics) -> None:
        self.path = Path(path)
        self._read = read
        self._seen: tuple[int, str] | None = None

    def poll(self) -> list[MetricEvent] | None:
        """Every event so far if something changed since the last poll, else None.

        A file caught half-written (or not there yet) reads as no change: the
        next poll, a second later, tries again.
        """
        try:
            events = events_of(self._read(self.path))
        except Exception:  # noqa: BLE001 - a RunError or OSError mid-write: try next poll
            return None
        # repr, not ==: a NaN figure never equals itself, and would count as news
        mark = (len(events), repr(events[-1]) if events else "")
        if mark == self._seen:
            return None  # nothing new: the charts need no rebuild
        self._seen = mark
        return events

    def ended(self) -> str | None:
        """The followed run's end (``state.json``'s ``"end"`` reason), None while it trains.

        A run another process resumes loses its end again, so this is asked on
        every poll rather than once.
        """
        try:
            end = json.loads((self.path / "state.json").read_text(encoding="utf-8")).get("end")
        except (OSError, ValueError, AttributeError):
            return None  # not there yet, or caught mid-replace: the next poll tries again
        reason = end.get("reason") if isinstance(end, dict) else None
        return reason if isinstance(reason, str) else None
