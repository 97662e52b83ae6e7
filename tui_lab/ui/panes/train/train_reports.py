"""What the Train pane does with what its training process reports.

A mixin of ``TrainPane``: ``TrainParts`` declares what of the pane it uses
(``train_state``, ``driver``, ``run``, ``last_step``...). The run's events
arrive as ``RunDriver``'s messages, posted from the run's reader thread or the
pane's worker (see ``run_driver.py``); each handler updates what the pane
shows and asks the state object before it moves.
"""

from __future__ import annotations

from textual.notifications import SeverityLevel
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from tui_lab.core.errors import one_line
from tui_lab.ui.messages import ModelChanged
from tui_lab.ui.panes.train.run_driver import RunDriver
from tui_lab.ui.panes.train.run_follow import resting_step
from tui_lab.ui.panes.train.train_parts import TrainParts
from tui_lab.ui.panes.train.train_state import Phase

DONE_TITLES: dict[str, tuple[str, SeverityLevel]] = {
    "finished": ("Run finished", "information"),
    "target": ("Target reached", "information"),
    "stopped": ("Training stopped", "information"),
    "time": ("Time limit reached", "information"),
    "nan": ("Training stopped: NaN", "error"),
    "error": ("Training failed", "error"),
}


class RunReports(TrainParts):
    """Handlers for the run's events and the training worker's end."""

    def on_run_driver_evaluated(self, message: RunDriver.Evaluated) -> None:
        """Keep the newest evaluation."""
        message.stop()
        self.last_eval = message.event
        if message.event.exact_match is not None:
            self.best = max(self.best or 0.0, message.event.exact_match)
        self._figures_dirty = True

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
        title, severity = DONE_TITLES.get(event.reason, ("Run ended", "information"))
        self.notify(
            event.message, title=title, severity=severity, timeout=8 if severity == "error" else 5
        )
        self.post_message(ModelChanged(self.run))
        self._prewarm()  # for the next run

    def on_run_driver_run_ready(self, message: RunDriver.RunReady) -> None:
        """A run (new or restored) exists: remember it and offer its model to Decode."""
        message.stop()
        run = message.run
        if run is not self.driver.live_run:
            return
        self.run = run
        self.run_dir = run.out_dir
        self.device = run.device_name
        self._config_dirty = False
        if message.resumed:
            self.best = run.best_accuracy
            opened_step, opened_eval = self._opened_figures  # of a folder just opened
            self._opened_figures = (None, None)
            last = opened_step or self.last_step
            if run.last_step is None and run.step and last is not None:
                # Not trained since it was restored: its last record, at rest.
                self.last_step = resting_step(last, run.step, run.total_steps, run.elapsed)
            self.last_eval = opened_eval or self.last_eval
        if self.train_state.built(wait=message.resumed and not self._starting):
            self._changed()
        self.post_message(ModelChanged(run))
        self._update_status()

    def on_run_driver_run_failed(self, message: RunDriver.RunFailed) -> None:
        """Building or restoring failed: show why; nothing else changes."""
        message.stop()
        if self.train_state.build_failed(has_run=self.run is not None):
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
        if self.train_state.crash(has_run=self.run is not None):
            self._changed()
        self.notify(
            one_line(error) if error else "training failed",
            title="Training failed",
            severity="error",
        )
