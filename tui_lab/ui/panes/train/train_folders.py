"""The Train pane's run folders: open one to show and continue (o, ``--run``), follow one (watch).

A mixin of ``TrainPane`` (``TrainParts`` declares what of the pane it uses:
``history``, ``train_state``, ``run_dir``, ``_launch``...): the pane keeps the
live-run side, this file the side that starts from a folder on disk. Reading
the folder's metrics back as events is ``run_follow.py``.
"""

from __future__ import annotations

from pathlib import Path

from tui_lab.core.errors import one_line
from tui_lab.ui.messages import RunConfigOpened
from tui_lab.ui.panes.train.run_follow import RunFollower, events_of, latest, read_metrics
from tui_lab.ui.panes.train.train_parts import TrainParts

FOLLOW_SECONDS = 1.0  # a followed run folder is read again every second


class RunFolders(TrainParts):
    """Open a run folder into the Train pane, or follow one another process trains."""

    def action_open_run(self) -> None:
        """Pick a run folder to show and continue."""
        from tui_lab.ui.screens.open_run import OpenRunScreen

        if not self.train_state.can_open:
            self.notify("stop training first (s)", severity="warning")
            return

        def chosen(path: Path | None) -> None:
            if path is not None:
                self.open_run_dir(path)

        self.app.push_screen(OpenRunScreen(self.runs_root), chosen)

    def open_run_dir(self, path: Path) -> None:
        """Show a run folder's curves and restore its model; space continues it."""
        if self.host.state.core is None:
            self._pending_open = self.run_dir = Path(path)
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
        self._opened_figures = latest(events)
        self.run_dir = Path(path)
        self.post_message(RunConfigOpened(loaded.preset_config))  # the lab's config from now on
        self._launch(resume_dir=Path(path), start=False)
        self._redraw(force=True)

    def follow(self, path: Path) -> None:
        """Watch a run another process writes: reload its metrics every second."""
        if not self.train_state.follow():
            return
        self.run_dir = Path(path)
        self._follower = RunFollower(self.run_dir)
        self.set_interval(FOLLOW_SECONDS, self._follow_tick)
        self._changed()

    def _follow_tick(self) -> None:
        """Timer: show what the other process has written since the last tick (if anything)."""
        if self.host.state.core is None or self._follower is None:
            return
        ended = self._follower.ended() or ""
        if ended != self.train_state.reason:  # the other process finished (or resumed) the run
            self.train_state.reason = ended
            self._changed()
        events = self._follower.poll()
        if events is None:
            return  # nothing new (or a half-written file: next tick)
        self.history.clear()
        self.history.load_events(events)
        step, evaluation = latest(events)
        self.last_step = step or self.last_step
        self.last_eval = evaluation or self.last_eval
        self._figures_dirty = True
