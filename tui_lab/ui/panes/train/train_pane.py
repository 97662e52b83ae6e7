"""Train pane: start/pause/stop/reset a run, live charts and metrics.

The run trains in a child process (core/training/remote.py) so that keys and
repaints never wait for a training step; a thread worker drives it
(``RunDriver``, train_workers.py) and the run's events arrive as its messages,
handled here. Where the lab
stands is a ``TrainState`` (train_state.py): this pane asks it before acting and
draws it, with the run on show and its figures, a ``ShownRun`` (train_view.py,
with the pane's words). Run folders are opened (their records read back by
run_follow.py) and followed (a ``RunWatch``, run_watch.py) here too.
The charts are ``RunCharts`` (loss_chart.py), the figures ``MetricsPanel``.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.widgets import ProgressBar, Static
from textual.worker import Worker, WorkerState
from typing_extensions import Unpack

from tui_lab.core.config.lab_config import LabConfig
from tui_lab.core.config.shape import Shape
from tui_lab.core.errors import one_line
from tui_lab.core.runs.events import EvalEvent, StepEvent
from tui_lab.ui import key_bindings
from tui_lab.ui.messages import ModelChanged, OpenRunFolder, RunConfigOpened, UseConfig
from tui_lab.ui.pane_registry import pane_id
from tui_lab.ui.panes.train import train_view
from tui_lab.ui.panes.train.loss_chart import RunCharts
from tui_lab.ui.panes.train.metrics_panel import MetricsPanel
from tui_lab.ui.panes.train.optimizer_view import speed_text
from tui_lab.ui.panes.train.run_follow import events_of, latest, read_metrics
from tui_lab.ui.panes.train.run_history import RunHistory
from tui_lab.ui.panes.train.run_watch import RunWatch
from tui_lab.ui.panes.train.train_state import Phase, TrainState
from tui_lab.ui.panes.train.train_view import ShownRun, done_notice
from tui_lab.ui.panes.train.train_workers import Launch, RunDriver, retire
from tui_lab.ui.state.host import Pane
from tui_lab.ui.user_keymap import key_of
from tui_lab.ui.widgets.quiet_focus import QuietFocus
from tui_lab.ui.widgets.widget_options import WidgetOptions

if TYPE_CHECKING:  # torch-backed: loaded by the time a run is built
    from tui_lab.core.training.remote import RemoteRun

REDRAW_SECONDS = 0.25  # figures (metrics, progress) are redrawn at most 4 times a second


class TrainPane(Pane, QuietFocus, Vertical, can_focus=True):
    """Drives a training process from a thread worker; events arrive as posted messages."""

    class PhaseChanged(Message):
        """The training phase moved (the app's status bar says it)."""

    PANE_ID = pane_id(__name__)
    KEY_SECTIONS = (("the Fourier view (f)", key_bindings.FOURIER),)
    BINDINGS = key_bindings.TRAIN

    def __init__(
        self,
        config: LabConfig,
        runs_root: Path,
        open_dir: Path | None = None,
        follow_dir: Path | None = None,
        **kwargs: Unpack[WidgetOptions],
    ) -> None:
        super().__init__(**kwargs)
        self._open_at_start = open_dir
        self._follow_at_start = follow_dir
        self.config = config
        self.runs_root = runs_root
        self.history = RunHistory()
        self.train_state = TrainState()
        self.driver = RunDriver(self.post_message, self.history, runs_root)
        self.shown = ShownRun()
        self._starting = True
        self._start_when_ready = False
        self._watch: RunWatch | None = None  # a followed run folder's
        self._pending_open: Path | None = None  # a --run folder given before torch had loaded
        self._accuracy_for: LabConfig | None = None  # the config the accuracy chart follows
        self._speed_shown = ""  # the status line's tokens/s and MFU

    # Read by the app, the tests and the screenshots: the state as the phase's string.
    @property
    def state(self) -> Phase:
        """The training phase (a str enum: ``pane.state == "done"`` reads naturally)."""
        return self.train_state.phase

    @property
    def run(self) -> RemoteRun | None:
        """The run on show (None before one is built or opened)."""
        return self.shown.run

    @property
    def run_dir(self) -> Path | None:
        """The folder of the run on show (or of the one being opened or followed)."""
        return self.shown.run_dir

    @property
    def last_step(self) -> StepEvent | None:
        """The newest step drawn."""
        return self.shown.last_step

    @property
    def last_eval(self) -> EvalEvent | None:
        """The newest evaluation drawn."""
        return self.shown.last_eval

    @property
    def reason(self) -> str:
        """Why the last run ended ("" while none has)."""
        return self.train_state.reason

    @property
    def loop_finished(self) -> threading.Event:
        """Set once the worker of the latest launch has returned."""
        return self.driver.loop_finished

    @property
    def _live_run(self) -> RemoteRun | None:
        """The run whose process the pane drives (a fault test kills its process)."""
        return self.driver.live_run

    @property
    def log_scale(self) -> bool | None:
        """The loss chart's scale as set with l (None: automatic)."""
        return self.query_one(RunCharts).log_scale

    def compose(self) -> ComposeResult:
        """Title line, charts beside the figures, progress bar, last log line."""
        yield Static(id="train-status")
        with Horizontal(id="train-body"):
            yield RunCharts(self.history, id="charts")
            yield MetricsPanel(id="metrics")
        yield ProgressBar(total=self.config.train.steps, show_eta=False, id="progress")
        yield Static(id="train-log")

    def on_mount(self) -> None:
        """Draw the empty state, start the redraw timer, open a run given on the command line."""
        if self.host.quitting:
            return  # mounted while the app quits: nothing to show
        self.config = self.host.state.config
        if self.host.state.core is not None:
            self.train_state.core_loaded()  # before the run folder below is opened
        self.set_interval(REDRAW_SECONDS, self._redraw)
        self._update_status()
        self._redraw(force=True)
        self.host.register_pane(self.PANE_ID, self)
        if self._follow_at_start is not None:
            self.follow(self._follow_at_start)
        elif self._open_at_start is not None:
            self.open_run_dir(self._open_at_start)
        if self.host.state.core is not None:
            self.core_ready()

    def focus_default(self) -> None:
        """The pane itself takes focus so its keys (space, s, r, l, o) work."""
        self.focus()

    def watch_has_focus(self, has_focus: bool) -> None:
        """Restyle the pane alone when it gains or loses focus.

        Textual restyles a widget's whole subtree on a focus change, in case a
        rule like ``TrainPane:focus Label`` depends on it. No rule here does, and
        restyling every chart and metric cost ~7 ms of each switch to and from
        this pane.
        """
        self.app.stylesheet.update_nodes([self], animate=True)

    # ---- drawing --------------------------------------------------------------------

    def _changed(self) -> None:
        """The state moved: redraw the title, figures and status bar; offer the keys that apply."""
        self.shown.figures_dirty = True
        self._update_status()
        self.refresh_bindings()
        # The app's status bar shows "training"/"paused"/"stopping": without this it kept
        # saying "training" after a pause (it was only redrawn when the worker ended).
        if self.is_attached and not self.host.quitting:
            self.post_message(self.PhaseChanged())

    def _update_status(self) -> None:
        """The pane's title line: the run's name and folder, what the keys do now."""
        if not self.is_attached or self.host.quitting:
            return
        status = self.query_one("#train-status", Static)
        if self.host.state.model_source is not None and self.run is None:  # --model: not trainable here
            opened = self.host.state.opened
            encoder_only = opened is not None and opened.shape is Shape.ENCODER_ONLY
            line = train_view.opened_model_line(self.host.state.model_source, encoder_only, self.key("train.toggle"))
            status.update(line, layout=False)
            return
        hint = self.train_state.hint_with(
            {name: self.key(f"train.{name}") for name in ("toggle", "stop", "reset")}
        )
        self._speed_shown = self._speed()
        line = self.shown.status_line(self.config, self.runs_root, hint, self.key("train.reset"), self._speed_shown)
        status.update(line, layout=False)  # one line (CSS)

    def _speed(self) -> str:
        """Tokens/s and MFU as the run's optimizer measurements last gave them."""
        groups = self.history.groups.snapshot()
        return speed_text(groups.tokens_per_s, groups.mfu)

    def key(self, binding_id: str) -> str:
        """The key of ``binding_id`` as the user's keymap has it (for text that names it)."""
        return key_of(binding_id, self.host.state.keymap)

    def _redraw(self, force: bool = False) -> None:
        """Timer callback: redraw what changed (quietly nothing while the app tears down)."""
        try:
            self._redraw_now(force)
        except NoMatches:
            pass  # the pane is being torn down (quitting)

    def _redraw_now(self, force: bool = False) -> None:
        """Redraw the charts and figures that changed (timer; on_show catches up when hidden)."""
        self._take_newest_step()
        self._sync_accuracy()  # the accuracy chart's default follows the config on show
        if not force and not (self.display and self.size.width):
            # Hidden (the pane switcher shows one pane), or shown but not yet laid out: a
            # timer tick between the two would set the progress bar at width 0, unrounded,
            # half a cell off what on_show (after the layout) sets; on_show catches up.
            return
        shown = self.shown
        if self.query_one(RunCharts).draw(training=self.state is Phase.RUNNING, force=force):
            shown.figures_dirty = True
            if self._speed() != self._speed_shown:
                self._update_status()
        if shown.figures_dirty or force:
            shown.figures_dirty = False
            total = shown.run.total_steps if shown.run is not None else self.config.train.steps
            self.query_one(MetricsPanel).show(
                self.train_state, shown.last_step, shown.last_eval, total, shown.device, shown.best
            )
            bar = self.query_one(ProgressBar)
            bar.update(total=total, progress=self.last_step.step if self.last_step else 0)

    def _take_newest_step(self) -> None:
        """Pick up the step the event thread recorded last (it posts no message per step)."""
        self.shown.take_newest(self.driver.newest_step)

    def on_show(self) -> None:
        """Coming back to the pane: catch up with what happened meanwhile (if anything did)."""
        self._redraw()
        self._prewarm()

    def _prewarm(self) -> None:
        """Someone looking at this pane may press space: have a training process ready."""
        if self.host.state.core is not None and self._watch is None and self.state is not Phase.RUNNING:
            from tui_lab.core.training.remote import prewarm  # torch-backed: loaded by now

            prewarm()

    def _clear_run(self) -> None:
        """Forget the figures and curves shown (a new, reset or opened run replaces them)."""
        self.history.clear()
        self.shown.clear()
        self.query_one("#train-log", Static).update("")

    # ---- messages from the app and the worker ---------------------------------------

    def core_ready(self) -> None:
        """Torch is loaded: training can start (or the pending run folder open)."""
        if self.train_state.core_loaded():
            self._changed()
        if self.display:
            self._prewarm()
        if self._pending_open is not None:
            path, self._pending_open = self._pending_open, None
            self.open_run_dir(path)
        elif self._watch is not None:
            self._watch.tick()
        if self._start_when_ready and self._watch is None:
            self._start_when_ready = False
            self.action_start()

    def on_use_config(self, message: UseConfig) -> None:
        """The lab's config changed: trained next."""
        self.config_changed(message.config)

    def on_open_run_folder(self, message: OpenRunFolder) -> None:
        """The Runs pane's enter on a run."""
        self.open_run_dir(message.path)

    def config_changed(self, config: LabConfig) -> None:
        """The Build pane's config changed: used by the next new run."""
        self.config = config
        self.shown.config_edited(config)
        self._update_status()

    # ---- actions ----------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Offer space as start, pause or resume, and s, r and o, as the state allows."""
        if action == "fourier":  # for a modular-addition run or config only
            return bool(self.shown.config_or(self.config).task.name == "modular-addition")
        return self.train_state.offers(action)

    def action_start(self) -> None:
        """Start training: a new run, or continue a stopped/opened one."""
        if self.host.state.model_source is not None and self.run is None:  # --model: fine-tune it
            opened, spec = self.host.state.opened, self.host.state.finetune
            if (refusal := train_view.finetune_refusal(opened.config if opened else None)) is not None:
                self.notify(refusal, severity="warning", timeout=6)
            elif spec is None or self.host.state.core is None:
                wanted = train_view.finetune_wanted(self.host.state.model_source, self.key("app.build"))
                self.notify(wanted, severity="warning", timeout=5)
            else:
                self._clear_run()
                self._launch(config=self.config, finetune=spec)
            return
        if self.host.state.core is None:
            self._start_when_ready = True
            self.notify("training starts as soon as torch has loaded", timeout=3)
            return
        if self._watch is not None:
            self.notify(
                "following another process's run: it cannot be trained from here",
                severity="warning",
            )
            return
        run = None if self.shown.config_dirty else self.run  # the run shown, its config unchanged
        if run is not None and self.state is Phase.READY:
            self._launch(existing=run)
        elif run is not None and self.train_state.resumable and run.step < run.total_steps:
            self._launch(resume_dir=self.run_dir)  # an error too: from the last checkpoint
        else:
            self._clear_run()
            self._launch(config=self.config)

    def action_pause(self) -> None:
        """Pause the running loop (it waits between steps)."""
        if self.driver.live_run is not None and self.train_state.pause():
            self.driver.live_run.pause()
            self._changed()

    def action_resume(self) -> None:
        """Resume a paused loop."""
        if self.driver.live_run is not None and self.train_state.resume():
            self.driver.live_run.resume()
            self._changed()

    def action_stop(self) -> None:
        """Stop the loop after the current step; it saves a final checkpoint."""
        self._start_when_ready = False
        if self.train_state.stop(loop_live=self.driver.stop()):
            self._changed()

    def action_reset(self) -> None:
        """Forget the current run (stopping it first): the next start builds a fresh model."""
        if not self.train_state.reset(core_loaded=self.host.state.core is not None):
            return
        self.stop_training()
        self.driver.forget(self.run)
        self._clear_run()
        self._changed()
        self._redraw(force=True)
        self.post_message(ModelChanged(None))
        self._prewarm()

    def action_toggle_log(self) -> None:
        """Switch the loss chart between linear and log scale."""
        self.query_one(RunCharts).toggle_log()


    # ---- the accuracy chart (a) and the Fourier screen (f) ----------------------------

    def _sync_accuracy(self) -> None:
        """A new config: the accuracy chart shows by itself for full-batch training (grokking)."""
        config = self.shown.config_or(self.config)
        if config is self._accuracy_for:
            return
        self._accuracy_for = config
        self.query_one(RunCharts).show_accuracy(bool(config.train.full_batch))
        self.refresh_bindings()  # f is offered for modular-addition only

    def action_cycle_chart(self) -> None:
        """Show loss, learning rate, gradient norm or update ratio per group (the next one)."""
        self.query_one(RunCharts).cycle_view()

    def action_toggle_accuracy(self) -> None:
        """Show or hide the accuracy chart (train and held-out accuracy, weight norm)."""
        charts = self.query_one(RunCharts)
        charts.show_accuracy(not charts.accuracy)

    def action_fourier(self) -> None:
        """The embedding's power per frequency for a modular-addition run, through its history."""
        run = self.run
        if run is None or self.host.state.core is None:
            self.notify(
                f"train this preset first ({self.key('train.toggle')}), "
                f"or open a run ({self.key('train.open_run')})",
                severity="warning",
                timeout=3,
            )
            return
        from tui_lab.ui.screens.fourier_screen import FourierScreen

        self.app.push_screen(FourierScreen(run, self.run_dir, self.host.state.travel, self.host.training_active))

    # ---- shutting down --------------------------------------------------------------

    def on_unmount(self) -> None:
        """However the app ends (quit, or a crash), the training process stops and saves."""
        self.stop_training()
        retire(self.driver.live_run, self.run)

    def stop_training(self) -> None:
        """Ask a live loop to stop (reset, opening a run, quitting); returns at once."""
        self.driver.stop()

    @work(thread=True, exclusive=True, exit_on_error=False, group="train", name="training")
    def _train_worker(self, generation: int, launch: Launch, finished: threading.Event) -> None:
        """Build or restore a run if needed, then train it until it stops (thread)."""
        self.driver.drive(generation, finished=finished, **launch)

    def _launch(
        self,
        *,
        config: LabConfig | None = None,
        resume_dir: Path | None = None,
        existing: RemoteRun | None = None,
        start: bool = True,
        finetune: dict[str, object] | None = None,
    ) -> None:
        """Start the worker on a new run, a restored one, the built run that waits, or a
        fine-tuning run of the opened model (``finetune``)."""
        if not (self.train_state.build() if existing is None else self.train_state.start()):
            return  # not from where the lab stands (a run is live, or followed)
        self._starting = start
        finished = self.driver.begin(existing, retiring=self.shown.run)
        self._changed()
        launch = Launch(config=config, resume_dir=resume_dir, existing=existing, start=start,
                        finetune=finetune)
        self._train_worker(self.driver.generation, launch, finished)

    # ---- what the training process reports (RunDriver's messages) --------------------

    def on_run_driver_evaluated(self, message: RunDriver.Evaluated) -> None:
        """Keep the newest evaluation."""
        message.stop()
        self.shown.evaluated(message.event)

    def on_run_driver_checkpoint_saved(self, message: RunDriver.CheckpointSaved) -> None:
        """Tell the user a checkpoint landed (not for the empty one at step 0)."""
        message.stop()
        if message.event.step > 0:
            self.notify(f"Checkpoint saved at step {message.event.step:,}", timeout=2)

    def on_run_driver_logged(self, message: RunDriver.Logged) -> None:
        """Show the run's last log line; warnings and errors also notify."""
        message.stop()
        event = message.event
        self.query_one("#train-log", Static).update(f"[dim]log:[/dim] {event.message}", layout=False)
        if event.level in ("warning", "error") and self.train_state.phase is not Phase.DONE:
            self.notify(event.message, severity="warning" if event.level == "warning" else "error", timeout=6)

    def on_run_driver_done(self, message: RunDriver.Done) -> None:
        """The loop ended: say why, keep the model for decoding."""
        message.stop()
        event = message.event
        self._take_newest_step()  # the last step before the run ended
        if not self.train_state.finish(event.reason):
            return
        self._changed()
        title, severity = done_notice(event.reason)
        self.notify(
            event.message, title=title, severity=severity, timeout=8 if severity == "error" else 5
        )
        self.post_message(ModelChanged(self.shown.run))
        self._prewarm()  # for the next run

    def on_run_driver_run_ready(self, message: RunDriver.RunReady) -> None:
        """A run (new or restored) exists: remember it and offer its model to Decode."""
        message.stop()
        run = message.run
        if run is not self.driver.live_run:
            return
        self.shown.ready(run, message.resumed)
        if self.train_state.built(wait=message.resumed and not self._starting):
            self._changed()
        self.post_message(ModelChanged(run))
        self._update_status()

    def on_run_driver_run_failed(self, message: RunDriver.RunFailed) -> None:
        """Building or restoring failed: show why. A run folder that cannot continue training
        still opens its model for Decode and the other panes, when its weights read."""
        message.stop()
        if self.train_state.build_failed(has_run=self.shown.run is not None):
            self._changed()
        if message.resume_dir is None:
            self.notify(message.message, title="Cannot start", severity="error", timeout=8)
            return
        self.notify(f"{message.message}; opening its model for decoding and analysis",
                    title="Cannot continue training", severity="warning", timeout=8)
        self._open_for_reading(message.resume_dir)

    @work(thread=True, exit_on_error=False, group="read-only")
    def _open_for_reading(self, folder: Path) -> None:
        """The folder's model for the other panes, when training cannot resume it (thread)."""
        from tui_lab.core.opening.from_run import load_for_inference

        try:
            handle = load_for_inference(folder, "cpu")
        except Exception as exc:  # the weights themselves are damaged: one line, nothing opens
            self.post_message(RunDriver.RunFailed(one_line(exc)))
            return
        self.post_message(ModelChanged(handle))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """An error in the training thread ends the run, not the app; a stop that trained no step ends too."""
        if event.worker.group != "train":
            return
        if event.state == WorkerState.SUCCESS and self.train_state.phase is Phase.STOPPING:
            # Stopped before its loop began (s during the build): no DoneEvent will come.
            if self.train_state.finish("stopped"):
                self._changed()
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        if self.train_state.crash(has_run=self.shown.run is not None):
            self._changed()
        self.notify(
            one_line(error) if error else "training failed",
            title="Training failed",
            severity="error",
        )

    def action_open_run(self) -> None:
        """Pick a run folder to show and continue."""
        from tui_lab.ui.screens.open_run import OpenRunScreen

        if not self.train_state.can_open:
            self.notify(f"stop training first ({self.key('train.stop')})", severity="warning")
            return

        def chosen(path: Path | None) -> None:
            if path is not None:
                self.open_run_dir(path)

        self.app.push_screen(OpenRunScreen(self.runs_root), chosen)

    def open_run_dir(self, path: Path) -> None:
        """Show a run folder's curves and restore its model; space continues it."""
        if self.host.state.core is None:
            self._pending_open = self.shown.run_dir = Path(path)
            self._update_status()
            return
        if not self.train_state.can_open:
            return  # a run is live, or another process's run is followed
        from tui_lab.core.runs.folder import load_run

        try:
            loaded = load_run(path)
            events = events_of(read_metrics(path))
        except Exception as exc:  # RunError: one line
            self.notify(one_line(exc), title="Cannot open run", severity="error", timeout=8)
            return
        self.stop_training()
        self._clear_run()
        self.history.load_events(events)
        # Shown once the run is restored (on_run_ready), as before: the progress bar
        # rounds to its width when set, and set before the pane is laid out it drew
        # the same step half a cell longer.
        self.shown.opened_figures = latest(events)
        self.shown.run_dir = Path(path)
        self.post_message(RunConfigOpened(loaded.preset_config))  # the lab's config from now on
        self._launch(resume_dir=Path(path), start=False)
        self._redraw(force=True)

    def follow(self, path: Path) -> None:
        """Watch a run another process writes: reload its metrics every second."""
        if not self.train_state.follow():
            return
        self.shown.run_dir = Path(path)
        self._watch = RunWatch(Path(path), lambda: self.host.state.core is not None)
        self.mount(self._watch)
        self._changed()

    def on_run_watch_changed(self, message: RunWatch.Changed) -> None:
        """The followed run moved on (or ended): show what the other process has written."""
        message.stop()
        if message.ended != self.train_state.reason:  # it finished (or resumed) the run
            self.train_state.reason = message.ended
            self._changed()
        if message.events is None:
            return
        self.history.clear()
        self.history.load_events(message.events)
        self.shown.watched(message.events)
