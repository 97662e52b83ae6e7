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
from typing import TYPE_CHECKING, Protocol

from tui_lab.core.checks import check_context
from tui_lab.core.errors import LabError

if TYPE_CHECKING:
    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.tasks.protocol import TrainingTask

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


def check_text(model: ModelInHand, text: str, what: str) -> None:
    """Refuse ``text`` longer than ``model``'s context in one line, before any model work
    (the text is only tokenized)."""
    limit = int(model.config.model.max_len or 0)
    if limit > 0 and text:
        check_context(len(model.task.vocab.encode(text)), limit, what)


def training_task(model: ModelInHand) -> TrainingTask:
    """The task of a run (a lab task, or a fine-tuned run's text): what held-out pairs and
    evaluation read; a model opened from files has none, refused in one line."""
    from tui_lab.core.tasks.base import TaskBase
    from tui_lab.core.tasks.token_lm import TokenLMTask

    task = model.task
    if not isinstance(task, (TaskBase, TokenLMTask)):
        raise LabError(f"{model.config.name}: {task.name} has no held-out examples (a run's task has)")
    return task
