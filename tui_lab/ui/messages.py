"""Small dataclass messages the panes and workers post (toolong style).

Training events arrive from a worker thread through ``post_message`` (which is
thread-safe). Step progress can come hundreds of times a second, so
``TrainProgress`` replaces an older one still waiting in the queue: the UI
handles only the latest, and the full history lives in ``RunHistory``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message

from tui_lab.core.config import LabConfig


@dataclass
class CoreLoaded(Message):
    """Torch and the core modules are imported (``core`` is None if that failed)."""

    core: Any
    error: str | None = None


@dataclass
class ConfigChanged(Message):
    """The Build pane's configuration changed and is valid."""

    config: LabConfig
    edited: bool = False


@dataclass
class TrainEvaluated(Message):
    """An evaluation finished (an ``EvalEvent``)."""

    event: Any


@dataclass
class CheckpointSaved(Message):
    """A checkpoint was written (a ``CheckpointEvent``)."""

    event: Any


@dataclass
class TrainLog(Message):
    """A log line from the run (a ``LogEvent``)."""

    event: Any


@dataclass
class TrainDone(Message):
    """The training loop ended (a ``DoneEvent``)."""

    event: Any


@dataclass
class RunReady(Message):
    """A ``TrainingRun`` was built (or restored) in the worker and holds a model."""

    run: Any
    resumed: bool = False


@dataclass
class RunFailed(Message):
    """Building or restoring a run failed; ``message`` is one line for the user."""

    message: str


@dataclass
class ModelChanged(Message):
    """The model the Decode pane uses changed (``run`` holds ``.model`` and ``.task``)."""

    run: Any


@dataclass
class Decoded(Message):
    """A decode finished; ``result`` is a ``DecodeResult`` and ``model`` the model used."""

    result: Any
    model: Any = None
    task: Any = None
    options: Any = None  # the generate() keyword arguments used (to replay it)


@dataclass
class ReportReady(Message):
    """The parameter report of ``config`` was computed (``report`` None on error)."""

    config: LabConfig
    report: Any
    vocab_size: int = 0
    error: str | None = None
    edited: bool = False


@dataclass
class ConfigInvalid(Message):
    """The Build pane's form holds an invalid value; ``message`` says which and why."""

    message: str


@dataclass
class DecodeFailed(Message):
    """Decoding refused the input or failed; ``message`` is one line shown inline."""

    message: str
