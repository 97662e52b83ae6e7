"""The app's routing: the messages that cross panes, each handed to the panes it concerns.

A pane posts a message (``ui/messages.py``) and never fetches another pane; the
handlers here are the one place that knows which panes a message reaches, and
what the lab keeps of it (its config, the model Decode uses, the last decode
and report, where time travel stands). What a pane is to do is a message too
(``ToPane``), posted to it (``tell``): this module calls no pane's methods.
``LabApp`` owns the state and the layout; this mixin only moves messages on.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING, Generic, TypeVar, cast, overload

from textual import work
from textual.app import App
from textual.message import Message

from tui_lab.core.config.lab_config import LabConfig
from tui_lab.core.errors import one_line
from tui_lab.ui.messages import (
    ClearDecode,
    ConfigChanged,
    ConfigInvalid,
    CountsStale,
    Decoded,
    DecodeRequested,
    DecodeText,
    ModelChanged,
    ModelOpened,
    OpenFeatureRequested,
    OpenRunFolder,
    OpenRunRequested,
    OpenSaeFolder,
    OpenSaeRequested,
    ReportReady,
    RunConfigOpened,
    ShowCard,
    ShowConfig,
    ShowCounts,
    ShowDecode,
    ShowForm,
    ShowTranscoderFeature,
    SnapshotDecoded,
    ToPane,
    TravelMoved,
    UseConfig,
    UseModel,
    UseTask,
)
from tui_lab.ui.pane_registry import spec
from tui_lab.ui.state.ablation import AblationState
from tui_lab.ui.state.host import Pane
from tui_lab.ui.state.lab_state import LabState
from tui_lab.ui.state.travel import Travel
from tui_lab.ui.widgets.snapshot_strip import SnapshotStrip

T = TypeVar("T")

if TYPE_CHECKING:  # the panes are imported when first built (lazy_panes.py), not with the app
    from tui_lab.core.decoding.decode import DecodeResult
    from tui_lab.core.opening.model_handle import ModelHandle
    from tui_lab.core.opening.model_in_hand import ModelInHand
    from tui_lab.ui.core_access import Core
    from tui_lab.ui.panes.params.param_count import ParamCounter
    from tui_lab.ui.panes.train.train_pane import TrainPane


class StateField(Generic[T]):
    """An attribute of the app that is the ``LabState`` field of the same name."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, objtype: type) -> StateField[T]: ...
    @overload
    def __get__(self, obj: PaneRouting, objtype: type) -> T: ...
    def __get__(self, obj: PaneRouting | None, objtype: type) -> T | StateField[T]:
        if obj is None:
            return self
        return cast(T, getattr(obj.state, self.name))

    def __set__(self, obj: PaneRouting, value: T) -> None:
        setattr(obj.state, self.name, value)


class PaneRouting(App[None]):
    """The message handlers of ``LabApp`` that hand what one pane says to the others."""

    # The lab's state (LabApp.__init__ makes it); the names below read and write it.
    state: LabState
    config: StateField[LabConfig] = StateField()
    core: StateField[Core | None] = StateField()
    core_state: StateField[str] = StateField()
    current_run: StateField[ModelHandle | None] = StateField()  # the model Decode uses
    opened: StateField[ModelInHand | None] = StateField()  # the ModelInHand of --model, once open
    last_report: StateField[ReportReady | None] = StateField()
    last_decode: StateField[Decoded | None] = StateField()
    ablation: StateField[AblationState] = StateField()
    travel: StateField[Travel] = StateField()
    model_source: StateField[str | None] = StateField()  # until it fails to open or a run replaces it
    model_revision: StateField[str | None] = StateField()
    model_dtype: StateField[str] = StateField()
    runs_root: StateField[Path] = StateField()
    user_dir: StateField[Path | None] = StateField()
    panes: dict[str, Pane]
    pane_waiters: dict[str, list[ToPane]]  # pane id -> messages for when it mounts
    counter: ParamCounter
    _report_generation: int
    # LabApp's: the status bar's text, and switching panes.
    _update_status: Callable[[], None]
    action_show_pane: Callable[[str], None]
    loaded: Callable[[], None]  # torch (and --model) loaded: the hidden panes are built

    def pane(self, pane_id: str) -> Pane | None:
        """The pane widget with this id ('train'...); None before it is built or while
        quitting. (A message the app routes while it quits would reach a pane whose widgets
        are gone.) Each pane registers itself under its ``PANE_ID``."""
        return None if self.quitting else self.panes.get(pane_id)

    def train_pane(self) -> TrainPane | None:
        """The Train pane, whose training state the status bar and the quit key read."""
        return cast("TrainPane | None", self.pane("train"))

    def tell(self, pane_id: str, message: ToPane, wait: bool = False) -> None:
        """Post ``message`` to the pane ``pane_id``; one not built yet misses it, unless
        ``wait``: then it gets it once it mounts (``LabApp.register_pane``)."""
        pane = self.pane(pane_id)
        if pane is not None:
            pane.post_message(message)
        elif wait and not self.quitting:
            self.pane_waiters.setdefault(pane_id, []).append(message)

    @property
    def quitting(self) -> bool:
        """True once the app is exiting: it has an exit code, or it is shutting down without one
        (a test's ``run_test`` ending), when panes' widgets are being removed."""
        return self.return_code is not None or not self.is_running

    # ---- the lab's config ---------------------------------------------------------

    def on_config_changed(self, message: ConfigChanged) -> None:
        """A valid config from Build: Train uses it next, Params recounts it."""
        self._use_config(message.config, message.edited)

    def on_config_invalid(self, message: ConfigInvalid) -> None:
        """The form is invalid: Params says its table is stale."""
        self.tell("params", CountsStale(message.message))

    def on_run_config_opened(self, message: RunConfigOpened) -> None:
        """An opened run's config becomes the lab's: status bar, Build, Params, Train, Decode, Attention."""
        config = message.config
        self._leave_model()  # the run's model replaces an opened one
        self.tell("build", ShowConfig(config))
        self.last_decode = None  # a decode of another model
        self.tell("attention", ClearDecode())
        self._use_config(config, edited=False)

    def _use_config(self, config: LabConfig, edited: bool) -> None:
        self.config = config
        self.tell("train", UseConfig(config))
        self.tell("attention", UseConfig(config))
        self._update_status()
        self._request_report(config, edited)

    def _request_report(self, config: LabConfig, edited: bool) -> None:
        if self.core is None or self.model_source is not None:
            return  # an opened model's report is the model's own (on_model_opened)
        self._report_generation += 1
        self._report_worker(config, edited, self._report_generation)

    # Not exclusive: a count takes milliseconds, and an older one's result is dropped
    # by its generation (cancelling it would fail whoever waits for the workers).
    @work(thread=True, exit_on_error=False, group="report")
    def _report_worker(self, config: LabConfig, edited: bool, generation: int) -> None:
        """Count parameters on the meta device (thread); cached per config by the core."""
        message = self.counter.count(config, edited)
        if message.report is None or generation == self._report_generation:
            self.post_message(message)

    def on_report_ready(self, message: ReportReady) -> None:
        """Show the new counts in Build's summary and the Params table; Decode's examples."""
        if message.report is None:
            self.tell("params", CountsStale(message.error or "cannot count"))
            return
        self.last_report = message
        counts = ShowCounts(message.config, message.report, message.vocab_size, message.edited)
        self.tell("build", counts)
        self.tell("params", counts)
        self.tell("decode", UseTask(message.task))

    # ---- models and decodes ---------------------------------------------------------

    def on_model_changed(self, message: ModelChanged) -> None:
        """Decode uses the newest model (an opened one when the Train pane has none)."""
        run = message.run if message.run is not None else self.opened
        self.current_run = run
        self.tell("decode", UseModel(run))
        self._update_status()

    # ---- a real model opened from files ----------------------------------------------

    def on_model_opened(self, message: ModelOpened) -> None:
        """``--model`` opened (Build shows its card, Params its breakdown, Decode and Attention
        work on it), or failed: one line, and the lab goes on with the default preset."""
        loaded = message.loaded
        version = self.core.version if self.core is not None else "?"
        self.loaded()  # the hidden panes are built from here on
        if loaded is None:
            self.model_source = None
            self.core_state = f"model failed to open · torch {version} ready"
            self.notify(
                message.error or "unknown error",
                title=f"Could not open {message.source}; using the default preset",
                severity="error",
                timeout=15,
            )
            self._update_status()
            self._request_report(self.config, edited=False)
            self.tell("train", UseConfig(self.config))  # trains the preset again
            self.tell("build", ShowForm())
            return
        self.opened = loaded
        self.core_state = f"torch {version} ready"
        self.last_decode = None
        self.tell("build", ShowCard(loaded.card))
        self.tell("attention", ClearDecode())
        self.tell("attention", UseConfig(loaded.config))
        self.on_model_changed(ModelChanged(loaded))
        self._model_report_worker(loaded)
        for note in loaded.notes:
            self.notify(note, title=loaded.config.name, timeout=8)

    @work(thread=True, exit_on_error=False, group="report")
    def _model_report_worker(self, loaded: ModelInHand) -> None:
        """The opened model's parameter breakdown, from its own tensors (thread)."""
        from tui_lab.core.model.params import report_for_model
        from tui_lab.ui.state.model_copies import settled

        model_config = loaded.config.model
        try:
            report = report_for_model(settled(loaded).model, model_config.max_len)  # a tied head once
        except Exception as exc:  # noqa: BLE001 - shown in Params, the lab keeps going
            self.post_message(ReportReady(loaded.config, None, 0, one_line(exc)))
            return
        vocab = int(model_config.vocab_size or len(loaded.task.vocab))
        self.post_message(ReportReady(loaded.config, report, vocab, task=loaded.task))

    def _leave_model(self) -> None:
        """Back to the lab's own configs (a run was opened): Build shows its form again."""
        if self.opened is None and self.model_source is None:
            return
        self.opened = None
        self.model_source = None
        self.tell("build", ShowForm())

    def on_decoded(self, message: Decoded) -> None:
        """Attention shows the newest decode."""
        self.last_decode = message
        self.tell("attention", ShowDecode(message))

    def on_decode_requested(self, message: DecodeRequested) -> None:
        """Attention switched a head: Decode decodes the input on show again."""
        self.tell("decode", DecodeText(message.text))

    def on_snapshot_decoded(self, message: SnapshotDecoded) -> None:
        """A time-travel step: Attention shows it first (the next frame holds the new heatmap),
        then the decode goes through Decode's handlers (output, top-k) and back here (last decode).
        The repaint is timed from the first refresh after Attention has handled it."""
        decoded = message.decoded
        attention = self.pane("attention")
        if attention is not None:
            attention.post_message(ShowDecode(decoded))
        decode = self.pane("decode")
        if decode is not None:
            decode.post_message(decoded)
        else:
            self.on_decoded(decoded)
        # Queued behind ShowDecode on Attention's queue: called after the refresh that shows it.
        (attention or self).call_after_refresh(self._travel_painted, decoded.result, message.started)

    def _travel_painted(self, result: DecodeResult, started: float) -> None:
        now = perf_counter()
        self.travel.repaint_ms = (now - started) * 1000
        self.travel.painted = (result, now)

    def on_travel_moved(self, message: TravelMoved) -> None:
        """Redraw the snapshot strip of every pane (Decode's and Attention's) for where travel is."""
        state = self.travel.state
        curves = message.curves
        if curves is None and state.run_dir is not None:
            curves = self.travel.curves.get(state.run_dir, (None, None))[1]
        total = getattr(self.current_run, "total_steps", None)
        for strip in self.query(SnapshotStrip):
            strip.show(state, curves, total)

    def on_open_run_requested(self, message: OpenRunRequested) -> None:
        """The Runs pane's enter: the Train pane opens the folder and comes on show."""
        train = self.train_pane()
        if train is None:
            self.notify("the Train pane is still loading", severity="warning")
            return
        if not train.train_state.can_open:
            self.notify(f"stop training first ({spec('train').key}, then s)", severity="warning")
            return
        self.tell("train", OpenRunFolder(message.path))
        self.action_show_pane("train")

    def on_open_sae_requested(self, message: OpenSaeRequested) -> None:
        """The Runs pane's enter on an SAE: the Features pane comes on show and opens it
        (once built: shown, a pane not yet built is built now)."""
        self.action_show_pane("features")
        self.tell("features", OpenSaeFolder(message.path), wait=True)

    def on_open_feature_requested(self, message: OpenFeatureRequested) -> None:
        """The Circuit pane's enter on a feature: the Features pane comes on show and is told it."""
        self.action_show_pane("features")
        self.tell("features", ShowTranscoderFeature(message.transcoders, message.layer, message.feature), wait=True)
        self.notify(f"transcoder layer {message.layer}, feature {message.feature}", title="Features")

    def on_train_pane_phase_changed(self, message: Message) -> None:
        """Training started, paused, stopped...: the status bar says so."""
        self._update_status()

