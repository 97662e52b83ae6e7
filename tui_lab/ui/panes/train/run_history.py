"""The curves of one run, appended from the training thread and read by the UI.

The run's event callback appends every step here (cheap, under a lock) and
posts no message for it; the Train pane's redraw timer reads a snapshot a few
times a second, so the UI is not woken per step and no point is lost.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from tui_lab.core.runs.events import EvalEvent, OptimizerEvent, StepEvent
from tui_lab.ui.panes.train.optimizer_view import GroupSeries


@dataclass
class HistorySnapshot:
    """Copies of the series, safe to use on the UI thread."""

    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    accuracy: list[float | None] = field(default_factory=list)
    # Per step, beside loss and lr: the batch's training accuracy and the weights' L2 norm.
    train_accuracy: list[float | None] = field(default_factory=list)
    weight_norm: list[float | None] = field(default_factory=list)


class RunHistory:
    """Thread-safe step and evaluation series of one run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data = HistorySnapshot()
        self.version = 0
        self.groups = GroupSeries()  # the optimizer's groups, every few steps

    def clear(self) -> None:
        """Forget every point (a new, reset or reloaded run)."""
        with self._lock:
            self._data = HistorySnapshot()
            self.groups.clear()
            self.version += 1

    def add_step(self, step: int, loss: float, lr: float,
                 train_accuracy: float | None = None, weight_norm: float | None = None) -> None:
        """Append a training step (any thread)."""
        with self._lock:
            d = self._data
            _drop_from(step, d.steps, d.loss, d.lr, d.train_accuracy, d.weight_norm)
            d.steps.append(step)
            d.loss.append(loss)
            d.lr.append(lr)
            d.train_accuracy.append(train_accuracy)
            d.weight_norm.append(weight_norm)
            self.version += 1

    def add_eval(self, step: int, val_loss: float, accuracy: float | None) -> None:
        """Append an evaluation (any thread); a repeated step replaces the later points."""
        with self._lock:
            d = self._data
            _drop_from(step, d.eval_steps, d.val_loss, d.accuracy)
            d.eval_steps.append(step)
            d.val_loss.append(val_loss)
            d.accuracy.append(accuracy)
            self.version += 1

    def add_groups(self, event: OptimizerEvent) -> None:
        """Append a measurement of the optimizer's groups (any thread)."""
        with self._lock:
            self.groups.add(event)
            self.version += 1

    def load_events(self, events: Iterable[object]) -> None:
        """Fill from a run's ``StepEvent``s, ``EvalEvent``s and ``OptimizerEvent``s (read back
        from its folder)."""
        for event in events:
            if isinstance(event, OptimizerEvent):
                self.add_groups(event)
            elif isinstance(event, StepEvent):
                self.add_step(event.step, event.loss, event.lr, event.train_accuracy, event.weight_norm)
            elif isinstance(event, EvalEvent):
                self.add_eval(event.step, event.val_loss, event.exact_match)

    def snapshot(self) -> HistorySnapshot:
        """Copies of the series as they are now."""
        with self._lock:
            d = self._data
            return HistorySnapshot(
                list(d.steps),
                list(d.loss),
                list(d.lr),
                list(d.eval_steps),
                list(d.val_loss),
                list(d.accuracy),
                list(d.train_accuracy),
                list(d.weight_norm),
            )

    def __len__(self) -> int:
        with self._lock:
            return len(self._data.steps)


def _drop_from(step: int, steps: list[int], *series: list[float] | list[float | None]) -> None:
    """Drop the points at or after ``step`` from ``steps`` and each series, before it is added.

    A resumed run repeats the steps after its last checkpoint: the newest points win.
    """
    if steps and step <= steps[-1]:
        keep = next((i for i, s in enumerate(steps) if s >= step), len(steps))
        del steps[keep:]
        for values in series:
            del values[keep:]
