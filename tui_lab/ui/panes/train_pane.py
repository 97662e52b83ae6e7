"""Train pane: start/pause/stop/reset a run, live charts and metrics.

The run trains in a child process (core/run_process.py) so that keys and
repaints never wait for a training step; a thread worker here drives it and
the run's events arrive as posted messages.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.widgets import ProgressBar, Static
from textual.worker import Worker, WorkerState

from tui_lab.core.config import LabConfig
from tui_lab.core.errors import one_line
from tui_lab.ui.history import RunHistory
from tui_lab.ui.messages import (
    CheckpointSaved,
    ModelChanged,
    RunFailed,
    RunReady,
    TrainDone,
    TrainEvaluated,
    TrainLog,
)
from tui_lab.ui.widgets.loss_chart import LossChart, LrChart
from tui_lab.ui.widgets.metrics_panel import MetricsPanel
from tui_lab.ui.widgets.quiet_focus import QuietFocus

REDRAW_SECONDS = 0.25  # figures (metrics, progress) are redrawn at most 4 times a second
CHART_SECONDS = 0.5  # the loss chart at most twice a second (a plotext build is the dearest part)
LR_REDRAW_SECONDS = 1.0  # the small learning-rate chart at most once a second
FOLLOW_SECONDS = 1.0


def _sections(config: LabConfig) -> tuple[Any, Any, Any]:
    return (config.model, config.task, config.train)


class TrainPane(QuietFocus, Vertical, can_focus=True):
    """Drives a training process from a thread worker; events arrive as posted messages."""

    BINDINGS = [
        Binding("space", "start", "Start"),
        Binding("space", "pause", "Pause"),
        Binding("space", "resume", "Resume"),
        Binding("s", "stop", "Stop"),
        Binding("r", "reset", "Reset"),
        Binding("l", "toggle_log", "Log scale"),
        Binding("o", "open_run", "Open run"),
    ]

    def __init__(
        self,
        config: LabConfig,
        runs_root: Path,
        open_dir: Path | None = None,
        follow_dir: Path | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._open_at_start = open_dir
        self._follow_at_start = follow_dir
        self.config = config
        self.runs_root = runs_root
        self.history = RunHistory()
        self.state = "loading"
        self.reason = ""
        self.run: Any = None
        self.run_dir: Path | None = None
        self.device = ""
        self.last_step: Any = None
        self.last_eval: Any = None
        self.best: float | None = None
        self.log_scale: bool | None = None  # None: log once the loss spans two decades
        self.loop_finished = threading.Event()
        self.loop_finished.set()
        self._live_run: Any = None
        self._generation = 0
        self._drawn = -1
        self._chart_drawn = 0.0
        self._lr_drawn = 0.0
        # The newest StepEvent, set by the event thread for every step; the redraw
        # timer picks it up (a message per step would wake the UI 50 times a second).
        self._newest_step: Any = None
        self._seen_step: Any = None
        self._figures_dirty = True
        self._config_dirty = False
        self._follow_dir: Path | None = None
        self._pending_open: Path | None = None
        self._stop_requested = threading.Event()
        self._starting = True
        self._start_when_ready = False

    def compose(self) -> ComposeResult:
        yield Static(id="train-status")
        with Horizontal(id="train-body"):
            with Vertical(id="charts"):
                yield LossChart(id="loss-chart")
                yield LrChart(id="lr-chart")
            yield MetricsPanel(id="metrics")
        yield ProgressBar(total=config_steps(self.config), show_eta=False, id="progress")
        yield Static(id="train-log")

    def on_mount(self) -> None:
        """Draw the empty state, start the redraw timer, open a run given on the command line."""
        if getattr(self.app, "_exit", False):
            return  # mounted while the app quits: nothing to show
        self.config = self.app.config
        self.set_interval(REDRAW_SECONDS, self._redraw)
        self._update_status()
        self._redraw(force=True)
        self.app.register_pane("train", self)
        if self._follow_at_start is not None:
            self.follow(self._follow_at_start)
        elif self._open_at_start is not None:
            self.open_run_dir(self._open_at_start)
        if self.app.core is not None:
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

    # ---- state shown --------------------------------------------------------------

    def _set_state(self, state: str) -> None:
        self.state = state
        self._figures_dirty = True
        self._update_status()
        self.refresh_bindings()

    def _update_status(self) -> None:
        if not self.is_attached or getattr(self.app, "_exit", False):
            return
        hint = {
            "loading": "loading torch…",
            "idle": "press space to train",
            "building": "building the model…",
            "ready": "press space to continue training",
            "running": "space pause · s stop",
            "paused": "space resume · s stop",
            "stopping": "stopping…",
            "done": "space to train again · r reset",
            "following": "following a run another process writes",
        }.get(self.state, "")
        name = self.run.config.name if self.run is not None else self.config.name
        where = f" · {self.run_dir}" if self.run_dir else f" · new runs go to {self.runs_root}/"
        dirty = (
            " · [b]config edited: r resets to train it[/b]"
            if self._config_dirty and self.run is not None
            else ""
        )
        self.query_one("#train-status", Static).update(
            f"[b]{name}[/b]{where} · {hint}{dirty}", layout=False  # one line (CSS)
        )

    def _redraw(self, force: bool = False) -> None:
        """Timer callback: redraw what changed (quietly nothing while the app tears down)."""
        try:
            self._redraw_now(force)
        except NoMatches:
            pass  # the pane is being torn down (quitting)

    def _redraw_now(self, force: bool = False) -> None:
        """Redraw charts if the history changed, and the figures if they did (timer).

        Skipped while another pane is on show (``on_show`` catches up); the
        learning-rate chart is redrawn at most once a second.
        """
        self._take_newest_step()
        if not force and not self._visible():
            return
        now = time.monotonic()
        running = self.state == "running"
        if force or (
            self.history.version != self._drawn
            and (not running or now - self._chart_drawn >= CHART_SECONDS)
        ):
            self._drawn = self.history.version
            self._chart_drawn = now
            data = self.history.snapshot()
            self.query_one(LossChart).draw(data, self._use_log(data))
            if force or now - self._lr_drawn >= LR_REDRAW_SECONDS or not running:
                self._lr_drawn = now
                self.query_one(LrChart).draw(data)
            self._figures_dirty = True
        if self._figures_dirty or force:
            self._figures_dirty = False
            total = self.run.total_steps if self.run is not None else config_steps(self.config)
            self.query_one(MetricsPanel).show(
                self.state,
                self.last_step,
                self.last_eval,
                total,
                self.device,
                self.best,
                self.reason,
            )
            bar = self.query_one(ProgressBar)
            bar.update(total=total, progress=self.last_step.step if self.last_step else 0)

    def _take_newest_step(self) -> None:
        newest = self._newest_step
        if newest is not None and newest is not self._seen_step:
            self._seen_step = self.last_step = newest
            self._figures_dirty = True

    def _use_log(self, data: Any) -> bool:
        if self.log_scale is not None:
            return self.log_scale
        values = [v for v in (*data.loss, *data.val_loss) if v > 0]
        return bool(values) and max(values) / min(values) > 100

    def _visible(self) -> bool:
        return bool(self.display)  # the pane switcher hides the panes not on show

    def on_show(self) -> None:
        """Coming back to the pane: catch up with what happened meanwhile (if anything did)."""
        self._redraw()
        self._prewarm()

    def _prewarm(self) -> None:
        """Someone looking at this pane may press space: have a training process ready."""
        core = self.app.core
        if core is not None and self._follow_dir is None and self.state != "running":
            core.run_process.prewarm()

    # ---- messages from the app and the worker ---------------------------------------

    def core_ready(self) -> None:
        """Torch is loaded: training can start (or the pending run folder open)."""
        if self.state == "loading":
            self._set_state("idle")
        if self._visible():
            self._prewarm()
        if self._pending_open is not None:
            path, self._pending_open = self._pending_open, None
            self.open_run_dir(path)
        elif self._follow_dir is not None:
            self._follow_tick()
        if self._start_when_ready and self._follow_dir is None:
            self._start_when_ready = False
            self.action_start()

    def config_changed(self, config: LabConfig) -> None:
        """The Build pane's config changed: used by the next new run."""
        self.config = config
        if self.run is not None:
            self._config_dirty = _sections(config) != _sections(self.run.config)
        self._figures_dirty = True
        self._update_status()

    def on_train_evaluated(self, message: TrainEvaluated) -> None:
        """Keep the newest evaluation."""
        message.stop()
        self.last_eval = message.event
        if message.event.exact_match is not None:
            self.best = max(self.best or 0.0, message.event.exact_match)
        self._figures_dirty = True

    def on_checkpoint_saved(self, message: CheckpointSaved) -> None:
        """Tell the user a checkpoint landed (not for the empty one at step 0)."""
        message.stop()
        if message.event.step > 0:
            self.notify(f"Checkpoint saved at step {message.event.step:,}", timeout=2)

    def on_train_log(self, message: TrainLog) -> None:
        """Show the run's last log line; warnings and errors also notify."""
        message.stop()
        event = message.event
        self.query_one("#train-log", Static).update(f"[dim]log:[/dim] {event.message}", layout=False)
        if event.level in ("warning", "error") and self.state not in ("done",):
            self.notify(event.message, severity=event.level, timeout=6)

    def on_train_done(self, message: TrainDone) -> None:
        """The loop ended: say why, keep the model for decoding."""
        message.stop()
        event = message.event
        self._take_newest_step()  # the last step before the run ended
        self.reason = event.reason
        self._set_state("done")
        titles = {
            "finished": ("Run finished", "information"),
            "target": ("Target reached", "information"),
            "stopped": ("Training stopped", "information"),
            "time": ("Time limit reached", "information"),
            "nan": ("Training stopped: NaN", "error"),
            "error": ("Training failed", "error"),
        }
        title, severity = titles.get(event.reason, ("Run ended", "information"))
        self.notify(
            event.message, title=title, severity=severity, timeout=8 if severity == "error" else 5
        )
        self.post_message(ModelChanged(self.run))
        self._prewarm()  # for the next run

    def on_run_ready(self, message: RunReady) -> None:
        """A run (new or restored) exists: remember it and offer its model to Decode."""
        message.stop()
        if message.run is not self._live_run:
            return
        self.run = message.run
        self.run_dir = message.run.out_dir
        self.device = message.run.device_name
        self._config_dirty = False
        if message.resumed:
            last = message.run.last_step
            self.best = message.run.best_accuracy
            if last is None and message.run.step:
                self._synth_last_step(message.run)
        if self.state == "building":
            self._set_state("ready" if message.resumed and not self._starting else "running")
        self.post_message(ModelChanged(message.run))
        self._update_status()

    def on_run_failed(self, message: RunFailed) -> None:
        """Building or restoring failed: show why; nothing else changes."""
        message.stop()
        self._set_state("idle" if self.run is None else "done")
        self.notify(message.message, title="Cannot start", severity="error", timeout=8)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """An unexpected error in the training thread ends the run, not the app."""
        if event.worker.group != "train" or event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        self.reason = "error"
        self._set_state("done" if self.run is not None else "idle")
        self.notify(
            one_line(error) if error else "training failed",
            title="Training failed",
            severity="error",
        )

    def _synth_last_step(self, run: Any) -> None:
        """A restored run has no StepEvent yet: show its step from the metrics history."""
        data = self.history.snapshot()
        from types import SimpleNamespace

        if data.steps:
            self.last_step = SimpleNamespace(
                step=run.step,
                total_steps=run.total_steps,
                loss=data.loss[-1],
                lr=data.lr[-1],
                grad_norm=float("nan"),
                tokens_per_s=0.0,
                elapsed=run.elapsed,
                eta=None,
            )
        if data.eval_steps:
            self.last_eval = SimpleNamespace(
                step=data.eval_steps[-1],
                val_loss=data.val_loss[-1],
                exact_match=data.accuracy[-1],
            )

    # ---- the worker -------------------------------------------------------------------

    def _callback(self, generation: int) -> Any:
        """The run's on_event: runs in the training thread, posts messages (thread-safe)."""
        train = self.app.core.train

        def on_event(event: Any) -> None:
            if generation != self._generation:
                return  # a run the user has reset away
            if isinstance(event, train.StepEvent):
                self.history.add_step(event.step, event.loss, event.lr)
                self._newest_step = event
            elif isinstance(event, train.EvalEvent):
                self.history.add_eval(event.step, event.val_loss, event.exact_match)
                self.post_message(TrainEvaluated(event))
            elif isinstance(event, train.CheckpointEvent):
                self.post_message(CheckpointSaved(event))
            elif isinstance(event, train.LogEvent):
                self.post_message(TrainLog(event))
            elif isinstance(event, train.DoneEvent):
                self.post_message(TrainDone(event))

        return on_event

    @work(thread=True, exclusive=True, exit_on_error=False, group="train", name="training")
    def _train_worker(
        self,
        generation: int,
        config: LabConfig | None,
        resume_dir: Path | None,
        existing: Any,
        start: bool,
        finished: threading.Event,
    ) -> None:
        """Build or restore a run if needed, then train it until it stops (thread)."""
        try:
            core = self.app.core
            run = existing
            if run is None:
                callback = self._callback(generation)
                remote = core.run_process.RemoteRun
                try:
                    if resume_dir is not None:
                        run = remote(callback, resume_dir=resume_dir)
                    else:
                        assert config is not None
                        folder = core.checkpoint.new_run_dir(self.runs_root, config.name)
                        run = remote(callback, config=config, out_dir=folder)
                except Exception as exc:  # a bad folder or device: one line, app keeps going
                    self.post_message(RunFailed(one_line(exc)))
                    return
                if generation != self._generation:
                    run.close()  # reset while it was being built
                    return
                self._live_run = run
                self.post_message(RunReady(run, resumed=resume_dir is not None))
            if start and generation == self._generation and not self._stop_requested.is_set():
                run.run()
        finally:
            finished.set()  # this launch's event: a stale worker must not end a newer loop

    def _launch(
        self,
        *,
        config: LabConfig | None = None,
        resume_dir: Path | None = None,
        existing: Any = None,
        start: bool = True,
    ) -> None:
        self._stop_requested = threading.Event()
        self._starting = start
        # A fresh event per launch: the worker of a run that just ended may still
        # be returning, and setting a shared event would make s ignore the new run.
        self.loop_finished = threading.Event()
        if existing is None:
            self._retire(self._live_run, self.run)
            self._generation += 1
            self._live_run = None
            self._set_state("building")
        else:
            self._live_run = existing
            self._set_state("running")
        self._train_worker(self._generation, config, resume_dir, existing, start, self.loop_finished)

    # ---- actions ----------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Offer space as start, pause or resume depending on the state."""
        state = self.state
        if action == "start":
            return state in ("idle", "ready", "done", "loading")
        if action == "pause":
            return state == "running"
        if action == "resume":
            return state == "paused"
        if action == "stop":
            return True if state in ("running", "paused", "building") else None
        if action in ("reset", "open_run"):
            return None if state in ("stopping", "following") else True
        return True

    def action_start(self) -> None:
        """Start training: a new run, or continue a stopped/opened one."""
        if self.app.core is None:
            self._start_when_ready = True
            self.notify("training starts as soon as torch has loaded", timeout=3)
            return
        if self._follow_dir is not None:
            self.notify(
                "following another process's run: it cannot be trained from here",
                severity="warning",
            )
            return
        if self.state == "ready" and self.run is not None and not self._config_dirty:
            self._launch(existing=self.run)
        elif (
            self.state == "done"
            and self.run is not None
            and not self._config_dirty
            and self.reason in ("stopped", "time", "error")  # error: from the last checkpoint
            and self.run.step < self.run.total_steps
        ):
            self._launch(resume_dir=self.run_dir)
        else:
            self._new_run()

    def _new_run(self) -> None:
        self.history.clear()
        self.run = None
        self.run_dir = None
        self.last_step = self.last_eval = self.best = None
        self._newest_step = None
        self.reason = ""
        self._config_dirty = False
        self.query_one("#train-log", Static).update("")
        self._launch(config=self.config)

    def action_pause(self) -> None:
        """Pause the running loop (it waits between steps)."""
        if self._live_run is not None and self.state == "running":
            self._live_run.pause()
            self._set_state("paused")

    def action_resume(self) -> None:
        """Resume a paused loop."""
        if self._live_run is not None and self.state == "paused":
            self._live_run.resume()
            self._set_state("running")

    def action_stop(self) -> None:
        """Stop the loop after the current step; it saves a final checkpoint."""
        self._start_when_ready = False
        self._stop_requested.set()
        if self._live_run is not None and not self.loop_finished.is_set():
            self._live_run.stop()
            self._set_state("stopping")
        elif self.state == "building":
            self._set_state("idle")

    def action_reset(self) -> None:
        """Forget the current run (stopping it first): the next start builds a fresh model."""
        self.stop_training()
        self._retire(self._live_run, self.run)
        self._generation += 1
        self._live_run = None
        self.run = None
        self.run_dir = None
        self.history.clear()
        self.last_step = self.last_eval = self.best = None
        self._newest_step = None
        self.reason = ""
        self._config_dirty = False
        self.query_one("#train-log", Static).update("")
        self._set_state("idle" if self.app.core is not None else "loading")
        self._redraw(force=True)
        self.post_message(ModelChanged(None))
        self._prewarm()

    def action_toggle_log(self) -> None:
        """Switch the loss chart between linear and log scale."""
        self.log_scale = not self._use_log(self.history.snapshot())
        self._redraw(force=True)

    def action_open_run(self) -> None:
        """Pick a run folder to show and continue."""
        from tui_lab.ui.screens.open_run import OpenRunScreen

        if self.state in ("running", "paused", "building"):
            self.notify("stop training first (s)", severity="warning")
            return

        def chosen(path: Path | None) -> None:
            if path is not None:
                self.open_run_dir(path)

        self.app.push_screen(OpenRunScreen(self.runs_root), chosen)

    # ---- run folders ------------------------------------------------------------------

    def open_run_dir(self, path: Path) -> None:
        """Show a run folder's curves and restore its model; space continues it."""
        core = self.app.core
        if core is None:
            self._pending_open = Path(path)
            self.run_dir = Path(path)
            self._update_status()
            return
        try:
            loaded = core.checkpoint.load_run(path)
            records = core.checkpoint.read_metrics(path)
        except Exception as exc:  # RunError: one line
            self.notify(one_line(exc), title="Cannot open run", severity="error", timeout=8)
            return
        self.stop_training()
        self.history.clear()
        self.history.load_records(records)
        self.last_step = self.last_eval = None
        self._newest_step = None
        self.reason = ""
        self.run = None
        self.run_dir = Path(path)
        self.app.show_run_config(loaded.config)
        self._launch(resume_dir=Path(path), start=False)
        self._redraw(force=True)

    def follow(self, path: Path) -> None:
        """Watch a run another process writes: reload its metrics every second."""
        self._follow_dir = Path(path)
        self.run_dir = Path(path)
        self.set_interval(FOLLOW_SECONDS, self._follow_tick)
        self._set_state("following")

    def _follow_tick(self) -> None:
        core = self.app.core
        if core is None or self._follow_dir is None:
            return
        try:
            records = core.checkpoint.read_metrics(self._follow_dir)
        except Exception:  # noqa: BLE001 - a half-written file: try again next tick
            return
        self.history.clear()
        self.history.load_records(records)
        steps = [r for r in records if r.get("kind") == "step"]
        evals = [r for r in records if r.get("kind") == "eval"]
        from types import SimpleNamespace

        if steps:
            r = steps[-1]
            self.last_step = SimpleNamespace(
                step=r.get("step", 0),
                total_steps=r.get("total_steps", 0),
                loss=r.get("loss", float("nan")),
                lr=r.get("lr", 0.0),
                grad_norm=r.get("grad_norm", float("nan")),
                tokens_per_s=r.get("tokens_per_s", 0.0),
                elapsed=r.get("elapsed"),
                eta=r.get("eta"),
            )
        if evals:
            r = evals[-1]
            self.last_eval = SimpleNamespace(
                step=r.get("step"),
                val_loss=r.get("val_loss", float("nan")),
                exact_match=r.get("exact_match"),
            )
        self._figures_dirty = True

    # ---- shutting down --------------------------------------------------------------

    def on_unmount(self) -> None:
        """However the app ends (quit, or a crash), the training process stops and saves."""
        self.stop_training()
        self._retire(self._live_run, self.run)

    def _retire(self, *runs: Any) -> None:
        """Let runs the pane no longer shows stop, save and end their processes (thread)."""
        for run in {id(r): r for r in runs if r is not None}.values():
            threading.Thread(target=run.close, name="retire-run", daemon=True).start()

    def stop_training(self) -> None:
        """Ask a live loop to stop (used by stop, reset and quit); returns at once."""
        self._stop_requested.set()
        run = self._live_run
        if run is not None and not self.loop_finished.is_set():
            run.stop()


def config_steps(config: LabConfig) -> int:
    return config.train.steps
