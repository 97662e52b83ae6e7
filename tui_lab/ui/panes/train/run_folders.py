"""The Train pane's run folders: open one to show and continue (``o``, ``--run``), or follow
one another process writes (``--follow``).

``RunFolders`` is a mixin of ``TrainPane`` (Textual finds ``on_run_watch_changed`` along
the pane's class hierarchy): an opened folder's records are read back as events
(run_follow.py) and its run restored by the training worker; a followed one is
watched by a ``RunWatch`` (run_watch.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tui_lab.core.errors import one_line
from tui_lab.ui.messages import RunConfigOpened
from tui_lab.ui.panes.train.run_follow import events_of, latest, read_metrics
from tui_lab.ui.panes.train.run_history import RunHistory
from tui_lab.ui.panes.train.run_watch import RunWatch
from tui_lab.ui.panes.train.train_state import TrainState
from tui_lab.ui.panes.train.train_view import ShownRun

if TYPE_CHECKING:
    from tui_lab.ui.state.host import Pane

    _Base = Pane
else:
    _Base = object  # mixed into TrainPane, a pane: no second Widget in its hierarchy


class RunFolders(_Base):
    """Opens and follows run folders (for ``TrainPane``)."""

    shown: ShownRun
    train_state: TrainState
    history: RunHistory
    runs_root: Path
    _pending_open: Path | None
    _watch: RunWatch | None

    if TYPE_CHECKING:  # the pane's own, which these call

        def key(self, binding_id: str) -> str: ...
        def _changed(self) -> None: ...
        def _update_status(self) -> None: ...
        def _clear_run(self) -> None: ...
        def _redraw(self, force: bool = False) -> None: ...
        def stop_training(self) -> None: ...
        def _launch(self, *, resume_dir: Path | None = None, start: bool = True) -> None: ...

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
