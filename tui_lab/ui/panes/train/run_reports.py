"""The Train pane's side of its training process: the thread worker that drives a launch
(``RunDriver.drive``, train_workers.py) and the handlers of what the run reports.

``RunReports`` is a mixin of ``TrainPane``: Textual finds message handlers along the
pane's class hierarchy, so the ``RunDriver`` messages posted from the worker and the
run's reader thread are handled here, next to the launch that makes them.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from tui_lab.core.config.lab_config import LabConfig
from tui_lab.core.errors import one_line
from tui_lab.ui.messages import ModelChanged
from tui_lab.ui.panes.train.train_state import Phase, TrainState
from tui_lab.ui.panes.train.train_view import ShownRun, done_notice
from tui_lab.ui.panes.train.train_workers import Launch, RunDriver

if TYPE_CHECKING:  # torch-backed: loaded by the time a run is built
    from tui_lab.core.training.remote import RemoteRun
    from tui_lab.ui.state.host import Pane

    _Base = Pane
else:
    _Base = object  # mixed into TrainPane, a pane: no second Widget in its hierarchy


class RunReports(_Base):
    """Launches the training worker and handles the ``RunDriver`` messages (for ``TrainPane``)."""

    shown: ShownRun
    train_state: TrainState
    driver: RunDriver
    _starting: bool

    if TYPE_CHECKING:  # the pane's own, which these handlers call

        def _changed(self) -> None: ...
        def _update_status(self) -> None: ...
        def _take_newest_step(self) -> None: ...
        def _prewarm(self) -> None: ...

    # ---- the worker -------------------------------------------------------------------

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
        """Building or restoring failed: show why; nothing else changes."""
        message.stop()
        if self.train_state.build_failed(has_run=self.shown.run is not None):
            self._changed()
        self.notify(message.message, title="Cannot start", severity="error", timeout=8)

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
