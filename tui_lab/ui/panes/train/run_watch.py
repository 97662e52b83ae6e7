"""Following a run folder another process trains: ``RunWatch``, a widget that draws nothing.

Mounted in the Train pane by ``tfx-lab --follow`` (``TrainPane.follow``), it reads
the folder again every second once torch has loaded (``RunFollower`` in
``run_follow.py`` does the reading) and posts ``RunWatch.Changed`` when the
other process has written something new or has ended (or resumed) the run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from textual.message import Message
from textual.widget import Widget
from typing_extensions import Unpack

from tui_lab.ui.panes.train.run_follow import MetricEvent, RunFollower
from tui_lab.ui.widgets.widget_options import WidgetOptions

FOLLOW_SECONDS = 1.0  # a followed run folder is read again every second


class RunWatch(Widget):
    """Reads a followed run folder every second; says what changed."""

    DEFAULT_CSS = "RunWatch { display: none; }"

    @dataclass
    class Changed(Message):
        """``ended``: how the run ended ("" while it runs); ``events``: all its records, if new."""

        ended: str
        events: list[MetricEvent] | None

    def __init__(self, path: Path, can_read: Callable[[], bool], **kwargs: Unpack[WidgetOptions]) -> None:
        super().__init__(**kwargs)
        self.path = Path(path)
        self.follower = RunFollower(self.path)
        self._can_read = can_read  # False until torch (the metrics reader) has loaded
        self._ended = ""

    def on_mount(self) -> None:
        """Read the folder every second from now on."""
        self.set_interval(FOLLOW_SECONDS, self.tick)

    def tick(self) -> None:
        """Post what the other process has written since the last tick (if anything)."""
        if not self._can_read():
            return
        ended = self.follower.ended() or ""
        events = self.follower.poll()  # None: nothing new (or a half-written file: next tick)
        if ended != self._ended or events is not None:
            self._ended = ended
            self.post_message(self.Changed(ended, events))
