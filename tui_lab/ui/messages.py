"""The messages that cross panes: a pane posts one, the app hands it to whoever needs it.

A message that stays inside one widget is nested in the widget that posts it
(``RunsPane.RowsRead``, ``Heatmap.CursorMoved``); only those another pane
acts on live here. ``LabApp`` has one handler for each and is the only place
that knows which panes a message concerns.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.message import Message

from tui_lab.core.config.lab_config import LabConfig

if TYPE_CHECKING:  # torch-backed: imported by the panes once torch is loaded
    from tui_lab.core.decoding.decode import DecodeResult
    from tui_lab.core.model.params import ParamReport
    from tui_lab.core.opening.model_in_hand import ModelInHand
    from tui_lab.core.tasks import Task
    from tui_lab.core.training.remote import RemoteRun


@dataclass
class ConfigChanged(Message):
    """The Build pane's configuration changed and is valid (Train uses it, Params counts it)."""

    config: LabConfig
    edited: bool = False


@dataclass
class ConfigInvalid(Message):
    """The Build pane's form holds an invalid value; ``message`` says which and why."""

    message: str


@dataclass
class RunConfigOpened(Message):
    """The Train pane opened a run folder: its config becomes the lab's (Build, Params, Attention)."""

    config: LabConfig


@dataclass
class OpenRunRequested(Message):
    """The Runs pane asks for a run folder to be opened in the Train pane (and shown)."""

    path: Path


@dataclass
class OpenSaeRequested(Message):
    """The Runs pane asks for an SAE's folder to be opened in the Features pane (and shown)."""

    path: Path


@dataclass
class ModelChanged(Message):
    """The model the Decode pane uses changed (``run`` holds ``.model`` and ``.task``; None: no model)."""

    run: RemoteRun | ModelInHand | None


@dataclass
class DecodeRequested(Message):
    """Decode ``text`` again with the heads as they are switched now (Attention asks Decode)."""

    text: str


@dataclass
class Decoded(Message):
    """A decode finished: its result, the model and task it used."""

    result: DecodeResult
    model: Any = None  # an EncoderDecoder or DecoderOnly
    task: Task | None = None
    options: Any = None  # the generate() keyword arguments used (to replay it)


@dataclass
class SnapshotDecoded(Message):
    """Time travel decoded the input on a history snapshot: Attention and Decode both show it.

    ``started`` is when the key was pressed (``perf_counter``): the repaint is timed from it.
    """

    decoded: Decoded
    started: float


@dataclass
class TravelMoved(Message):
    """Time travel moved (or stopped playing): every pane's snapshot strip is redrawn.

    ``curves`` are the run's loss and exact-match curves, None to use those read last.
    """

    curves: Any = None


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
class ModelOpened(Message):
    """A real model opened from files (``--model SOURCE``) is ready, or failed to open.

    ``loaded`` is the core's ``ModelInHand`` (config, task, model, ``card``); on a
    failure it is None and ``error`` is one line. Every pane hears of it.
    """

    source: str
    loaded: ModelInHand | None = None
    error: str | None = None


# ---- from the app to one pane ---------------------------------------------------------
# The routing (``routing.py``) posts these to the pane a message concerns; the pane
# handles it (``on_<name>``). They do not bubble: a pane's message never comes back up.


class ToPane(Message, bubble=False):
    """A message the app posts to one pane."""

    def __init_subclass__(cls, bubble: bool | None = False, **kwargs: Any) -> None:
        super().__init_subclass__(bubble=bubble, **kwargs)  # Message's default is True


@dataclass
class ShowConfig(ToPane):
    """Build shows ``config`` in its form (an opened run's), as unedited."""

    config: LabConfig


@dataclass
class ShowForm(ToPane):
    """Build shows its form again (a model's card gives way to the lab's own configs)."""


@dataclass
class ShowCard(ToPane):
    """Build shows an opened model's card instead of its form."""

    card: Any


@dataclass
class ShowCounts(ToPane):
    """Build's summary and the Params table show ``report`` (the parameter counts of ``config``)."""

    config: LabConfig
    report: ParamReport
    vocab_size: int
    edited: bool = False


@dataclass
class CountsStale(ToPane):
    """Params says its table is stale: ``reason`` (the form is invalid, or the count failed)."""

    reason: str


@dataclass
class UseConfig(ToPane):
    """Train trains ``config`` next; Attention sizes its layers and heads by it."""

    config: LabConfig


@dataclass
class UseModel(ToPane):
    """Decode decodes with ``run``'s model (None: no model)."""

    run: Any


@dataclass
class UseTask(ToPane):
    """Decode offers ``task``'s examples (None: the config has no task yet)."""

    task: Task | None


@dataclass
class ShowDecode(ToPane):
    """Attention shows this decode (its heads, for the model and task it used)."""

    decoded: Decoded


@dataclass
class ClearDecode(ToPane):
    """Attention drops the decode it shows (it was another model's)."""


@dataclass
class DecodeText(ToPane):
    """Decode decodes ``text`` (again, with the heads as they are switched now)."""

    text: str


@dataclass
class OpenRunFolder(ToPane):
    """Train opens the run folder ``path``."""

    path: Path


@dataclass
class OpenFeatureRequested(Message):
    """The Circuit pane asks for a transcoder feature to be shown in the Features pane."""

    transcoders: Path | None
    layer: int
    feature: int


@dataclass
class ShowTranscoderFeature(ToPane):
    """Features shows feature ``feature`` of layer ``layer``'s transcoder in ``transcoders``."""

    transcoders: Path | None
    layer: int
    feature: int


@dataclass
class OpenSaeFolder(ToPane):
    """Features opens the SAE folder ``path``."""

    path: Path
