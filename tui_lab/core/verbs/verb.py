"""What every verb shares: how it reports progress, how it is told to stop, what it returns.

A verb module holds a frozen ``Request`` (checked in ``__post_init__``: a request
that exists is one the verb can run), a result with ``to_json()``, and::

    def run(request, model, progress=no_progress, cancelled=never) -> Result

The command line parses arguments into the request, runs it and prints the
result (``to_json()`` for ``--json``); a pane's worker calls the same ``run`` with
``progress`` posting a message and ``cancelled`` reading the worker's flag.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from tui_lab.core.checks import check_context
from tui_lab.core.errors import LabError

# (done, total, what): ``total`` 0 when unknown. Called from the verb's thread.
Progress = Callable[[int, int, str], None]
# True once the caller wants the verb to stop (checked between steps, never mid-kernel).
Cancelled = Callable[[], bool]

JSON = dict[str, object]


class Result(Protocol):
    """What a verb returns: the command line prints ``to_json()``; a pane reads the fields."""

    def to_json(self) -> JSON:
        """The result as plain JSON types (the ``--json`` output)."""
        ...


class Stopped(LabError):
    """The caller cancelled the verb before it finished."""


def no_progress(done: int, total: int, what: str) -> None:
    """The default ``progress``: say nothing."""


def never() -> bool:
    """The default ``cancelled``: run to the end."""
    return False


def stop_if(cancelled: Cancelled) -> None:
    """Raise ``Stopped`` when the caller has asked the verb to stop."""
    if cancelled():
        raise Stopped("stopped")


def check_text(model: Any, text: str, what: str) -> None:
    """Refuse ``text`` longer than ``model``'s context in one line, before any model work
    (the text is only tokenized)."""
    limit = int(getattr(model.config.model, "max_len", 0) or 0)
    if limit > 0 and text:
        check_context(len(model.task.vocab.encode(text)), limit, what)
