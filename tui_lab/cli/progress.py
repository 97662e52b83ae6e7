"""Progress on the command line: for headless training a rich bar on a terminal and plain
lines when piped; for counted work (``ablate``'s heads) one line rewritten in place on a
terminal, nothing when piped (a log file gets no carriage returns)."""

from __future__ import annotations

import math
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tui_lab.core.runs.events import EvalEvent, Event
    from tui_lab.core.training.train import TrainingRun


def _fmt_acc(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def eval_line(event: EvalEvent) -> str:
    """One evaluation, with how many held-out examples training has also seen."""
    if event.exact_match is None and event.next_char_accuracy is not None:
        # A language model has no exact answer: its perplexity and next-token accuracy instead.
        return (f"step {event.step}: val loss {event.val_loss:.4f} (perplexity "
                f"{math.exp(min(event.val_loss, 700.0)):,.1f}), next-token accuracy "
                f"{_fmt_acc(event.next_char_accuracy)}")
    text = f"step {event.step}: val loss {event.val_loss:.4f}, exact match {_fmt_acc(event.exact_match)}"
    if event.overlap is not None:
        text += f" ({event.overlap} of {event.n} held-out also seen in training)"
    return text


class PlainReporter:
    """One line every few seconds and at every evaluation; nothing with --json but the summary."""

    def __init__(self, quiet: bool = False, every: float = 2.0) -> None:
        self.quiet = quiet
        self.every = every
        self._last = 0.0

    def start(self, run: TrainingRun) -> None:
        self._say(f"training {run.config.name} on {run.device_name} -> {run.out_dir}")

    def _say(self, text: str) -> None:
        if not self.quiet:
            print(text, flush=True)

    def on_event(self, event: Event) -> None:
        from tui_lab.core.training.train import DoneEvent, EvalEvent, LogEvent, StepEvent

        if isinstance(event, StepEvent):
            now = time.monotonic()
            if now - self._last >= self.every:
                self._last = now
                self._say(
                    f"step {event.step}/{event.total_steps} loss {event.loss:.4f} "
                    f"lr {event.lr:.2e} {event.tokens_per_s:,.0f} tok/s {event.elapsed:.1f}s"
                )
        elif isinstance(event, EvalEvent):
            self._say(eval_line(event))
        elif isinstance(event, LogEvent) and event.level != "info":
            print(f"{event.level}: {event.message}", file=sys.stderr, flush=True)
        elif isinstance(event, DoneEvent):
            self._say(event.message)

    def finish(self, summary: dict[str, object]) -> dict[str, object]:
        return summary


class RichReporter(PlainReporter):
    """A live progress bar with loss, accuracy, tokens/s and ETA."""

    def start(self, run: TrainingRun) -> None:
        from rich.progress import (
            BarColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TextColumn("{task.fields[stats]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        )
        self.progress.start()
        self.bar = self.progress.add_task(run.config.name, total=run.total_steps, completed=run.step, stats="")
        self.progress.console.print(f"training {run.config.name} on {run.device_name} -> {run.out_dir}")
        self.acc: float | None = None

    def on_event(self, event: Event) -> None:
        from tui_lab.core.training.train import DoneEvent, EvalEvent, LogEvent, StepEvent

        if isinstance(event, StepEvent):
            now = time.monotonic()
            if now - self._last >= 0.1 or event.step == event.total_steps:
                self._last = now
                stats = f"loss {event.loss:.3f} acc {_fmt_acc(self.acc)} {event.tokens_per_s:,.0f} tok/s"
                self.progress.update(self.bar, completed=event.step, stats=stats)
        elif isinstance(event, EvalEvent):
            self.acc = event.exact_match
            self.progress.console.print(eval_line(event))
        elif isinstance(event, LogEvent) and event.level != "info":
            self.progress.console.print(f"[red]{event.message}")
        elif isinstance(event, DoneEvent):
            self.progress.console.print(event.message)

    def finish(self, summary: dict[str, object]) -> dict[str, object]:
        self.progress.stop()
        return summary


def make_reporter(json_mode: bool) -> PlainReporter:
    if json_mode:
        return PlainReporter(quiet=True)
    if sys.stdout.isatty():
        return RichReporter()
    return PlainReporter()


class CountLine:
    """``LABEL done/total`` rewritten in place with ``\\r`` while stderr is a terminal.

    Called as ``(done, total)``; ``close()`` ends the line. Where stderr is not a
    terminal (a pipe, a log file, a test) it prints nothing at all.
    """

    def __init__(self, label: str, enabled: bool = True) -> None:
        self.label = label
        self.live = enabled and sys.stderr.isatty()
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        if self.live:
            print(f"\r{self.label} {done}/{total}", end="", file=sys.stderr, flush=True)
            self.shown = True

    def close(self) -> None:
        if self.shown:
            print(file=sys.stderr, flush=True)
            self.shown = False
