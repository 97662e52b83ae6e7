"""What every pane's worker shares: merged progress messages and the worker's cancel flag.

A verb reports ``progress(done, total, what)`` from its thread as often as its loop
turns; posting each one would flood the UI (toolong's lesson), so a worker posts at
most one message per interval, and always the last one, so a bar reaches its end.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from textual.message import Message
from textual.worker import get_current_worker

Post = Callable[[Message], object]
ProgressReport = Callable[[int, int, str], None]


def merged(post: Post, message: Callable[[int, int, str], Message], every_s: float) -> ProgressReport:
    """``progress(done, total, what)`` posting ``message(done, total, what)`` at most every
    ``every_s`` seconds, and whenever ``done`` reaches ``total``."""
    last = [0.0]

    def progress(done: int, total: int, what: str) -> None:
        if done >= total or time.monotonic() - last[0] >= every_s:
            last[0] = time.monotonic()
            post(message(done, total, what))

    return progress


def worker_cancelled() -> bool:
    """Whether the worker this runs in has been cancelled (read between steps, never mid-kernel)."""
    return get_current_worker().is_cancelled
