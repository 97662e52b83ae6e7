"""What the Train pane's mixins (``RunReports``, ``RunFolders``) use of the pane, declared once.

``TrainPane`` sets every attribute in its ``__init__`` and defines every
method; this base only says what they are, so the mixins are checked against
it instead of reaching for names the type checker cannot see.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui_lab.core.config.lab_config import LabConfig
from tui_lab.core.runs.events import EvalEvent, StepEvent
from tui_lab.ui.panes.train.run_driver import RunDriver
from tui_lab.ui.panes.train.run_follow import RunFollower
from tui_lab.ui.panes.train.run_history import RunHistory
from tui_lab.ui.panes.train.train_state import TrainState
from tui_lab.ui.state.host import Hosted

if TYPE_CHECKING:
    from tui_lab.core.training.remote import RemoteRun


class TrainParts(Hosted):
    """The Train pane's state and the steps its mixins take (defined by ``TrainPane``)."""

    config: LabConfig
    runs_root: Path
    history: RunHistory
    train_state: TrainState
    driver: RunDriver
    run: RemoteRun | Any  # a RemoteRun (a test may give a stand-in)
    run_dir: Path | None
    device: str
    last_step: StepEvent | None
    last_eval: EvalEvent | None
    best: float | None
    _figures_dirty: bool
    _config_dirty: bool
    _starting: bool
    _follower: RunFollower | None = None
    _pending_open: Path | None = None  # a --run folder given before torch had loaded
    _opened_figures: tuple[StepEvent | None, EvalEvent | None] = (None, None)

    def _changed(self) -> None:
        """The state moved: redraw the title, figures and status bar."""
        raise NotImplementedError

    def _update_status(self) -> None:
        """Redraw the pane's title line."""
        raise NotImplementedError

    def _redraw(self, force: bool = False) -> None:
        """Redraw the charts and figures that changed."""
        raise NotImplementedError

    def _take_newest_step(self) -> None:
        """Pick up the step the event thread recorded last."""
        raise NotImplementedError

    def _prewarm(self) -> None:
        """Have a training process ready for the next start."""
        raise NotImplementedError

    def _clear_run(self) -> None:
        """Forget the figures and curves shown."""
        raise NotImplementedError

    def _launch(
        self,
        *,
        config: LabConfig | None = None,
        resume_dir: Path | None = None,
        existing: Any = None,
        start: bool = True,
    ) -> None:
        """Start the worker on a new run, a restored one, or the built run that waits."""
        raise NotImplementedError

    def stop_training(self) -> None:
        """Ask a live loop to stop."""
        raise NotImplementedError
