"""Small dataclass messages the panes and workers post (toolong style).

Training events arrive from a worker thread through ``post_message`` (which is
thread-safe): an evaluation, a checkpoint, a log line and the end of a run each
become a message. Steps do not: they can come hundreds of times a second, so
the Train pane's redraw timer picks up the newest one instead, and the full
history lives in ``RunHistory``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual.message import Message

from tui_lab.core.config.lab_config import LabConfig
from tui_lab.core.training.events import CheckpointEvent, DoneEvent, EvalEvent, LogEvent

if TYPE_CHECKING:  # torch-backed: imported by the panes once torch is loaded
    from tui_lab.core.decoding.decode import DecodeResult
    from tui_lab.core.model.params import ParamReport
    from tui_lab.core.runs.curves import Curve
    from tui_lab.core.tasks import Task
    from tui_lab.core.training.remote import RemoteRun
    from tui_lab.ui.core_access import Core
    from tui_lab.ui.panes.runs.run_rows import RunRow


@dataclass
class CoreLoaded(Message):
    """Torch and the core modules are imported (``core`` is None if that failed)."""

    core: Core | None
    error: str | None = None


@dataclass
class ConfigChanged(Message):
    """The Build pane's configuration changed and is valid."""

    config: LabConfig
    edited: bool = False


@dataclass
class TrainEvaluated(Message):
    """An evaluation finished (an ``EvalEvent``)."""

    event: EvalEvent


@dataclass
class CheckpointSaved(Message):
    """A checkpoint was written (a ``CheckpointEvent``)."""

    event: CheckpointEvent


@dataclass
class TrainLog(Message):
    """A log line from the run (a ``LogEvent``)."""

    event: LogEvent


@dataclass
class TrainDone(Message):
    """The training loop ended (a ``DoneEvent``)."""

    event: DoneEvent


@dataclass
class RunReady(Message):
    """A run was built (or restored) in the worker and holds a model."""

    run: RemoteRun
    resumed: bool = False


@dataclass
class RunFailed(Message):
    """Building or restoring a run failed; ``message`` is one line for the user."""

    message: str


@dataclass
class ModelChanged(Message):
    """The model the Decode pane uses changed (``run`` holds ``.model`` and ``.task``; None: no model)."""

    run: RemoteRun | None


@dataclass
class Decoded(Message):
    """A decode finished: its result, the model and task it used."""

    result: DecodeResult
    model: Any = None  # an EncoderDecoder or DecoderOnly
    task: Task | None = None
    options: Any = None  # the generate() keyword arguments used (to replay it)


@dataclass
class ReportReady(Message):
    """The parameter report of ``config`` was computed (``report`` None on error).

    ``task`` is the config's task (its vocabulary sized the report; Decode
    offers its examples).
    """

    config: LabConfig
    report: ParamReport | None
    vocab_size: int = 0
    error: str | None = None
    edited: bool = False
    task: Task | None = None


@dataclass
class ConfigInvalid(Message):
    """The Build pane's form holds an invalid value; ``message`` says which and why."""

    message: str


@dataclass
class DecodeFailed(Message):
    """Decoding refused the input or failed; ``message`` is one line shown inline."""

    message: str


@dataclass
class RunsRead(Message):
    """The Runs pane's worker read every folder under its roots: one row each."""

    rows: list[RunRow]


@dataclass
class CurvesRead(Message):
    """The Runs pane's worker read the marked series' curves: key -> (legend, {metric: curve})."""

    curves: dict[str, tuple[str, dict[str, Curve]]]
