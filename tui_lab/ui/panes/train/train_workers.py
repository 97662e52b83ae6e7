"""The Train pane's link to its training processes: build or restore a run, train it, retire it.

``drive`` is the body of the pane's thread worker and the event callback runs
on the run's reader thread; both reach the UI only through ``post`` (Textual's
``post_message`` is thread-safe). Each launch of a new run gets a new
*generation*: events and results of a run the user has reset away are dropped,
so a late message can never redraw the pane with a run it no longer shows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from textual.message import Message

from tui_lab.core.config.lab_config import LabConfig
from tui_lab.core.errors import one_line
from tui_lab.core.runs.events import (
    CheckpointEvent,
    DoneEvent,
    EvalEvent,
    Event,
    LogEvent,
    OptimizerEvent,
    StepEvent,
)
from tui_lab.ui.panes.train.run_history import RunHistory

if TYPE_CHECKING:  # torch-backed: loaded by the time a run is built
    from tui_lab.core.training.remote import RemoteRun

Post = Callable[[Message], object]  # the pane's post_message: thread-safe


class Launch(TypedDict):
    """What one launch builds, restores or continues (``RunDriver.drive``'s arguments)."""

    config: LabConfig | None
    resume_dir: Path | None
    existing: RemoteRun | None
    start: bool
    finetune: dict[str, object] | None  # passed on to ``RemoteRun`` (``open_finetune``'s arguments)


class RunDriver:
    """Which run is live, and the thread-side work of building, training and closing runs.

    What it posts (to the Train pane, which handles them)
    are its nested messages: one per evaluation, checkpoint, log line and end
    of the loop, and one when a run is built (or could not be).
    """

    @dataclass
    class Evaluated(Message):
        """An evaluation finished (an ``EvalEvent``)."""

        event: EvalEvent

    @dataclass
    class CheckpointSaved(Message):
        """A checkpoint was written (a ``CheckpointEvent``)."""

        event: CheckpointEvent

    @dataclass
    class Logged(Message):
        """A log line from the run (a ``LogEvent``)."""

        event: LogEvent

    @dataclass
    class Done(Message):
        """The training loop ended (a ``DoneEvent``)."""

        event: DoneEvent

    @dataclass
    class RunReady(Message):
        """A run was built (or restored) in the worker and holds a model."""

        run: RemoteRun
        resumed: bool = False

    @dataclass
    class RunFailed(Message):
        """Building or restoring a run failed; ``message`` is one line for the user.
        ``resume_dir``: the run folder that could not be restored (its model may still open
        for reading: a folder without its optimizer state, say)."""

        message: str
        resume_dir: Path | None = None

    def __init__(self, post: Post, history: RunHistory, runs_root: Path) -> None:
        self.post = post
        self.history = history
        self.runs_root = runs_root
        self.generation = 0
        self.live_run: RemoteRun | None = None  # the RemoteRun whose process the pane drives
        self.loop_finished = threading.Event()
        self.loop_finished.set()
        self.stop_requested = threading.Event()
        # The newest StepEvent, set on the event thread for every step; the pane's
        # redraw timer picks it up (a message per step would wake the UI 50 times a second).
        self.newest_step: StepEvent | None = None

    @property
    def loop_live(self) -> bool:
        """A run's loop (or its build) is under way and has not returned yet."""
        return self.live_run is not None and not self.loop_finished.is_set()

    def on_event_for(self, generation: int) -> Callable[[Event], None]:
        """The run's ``on_event``: records steps, posts everything else (reader thread)."""

        def on_event(event: Event) -> None:
            """One event of the run (reader thread)."""
            if generation != self.generation:
                return  # a run the user has reset away
            if isinstance(event, StepEvent):
                self.history.add_step(event.step, event.loss, event.lr, event.train_accuracy, event.weight_norm)
                self.newest_step = event
            elif isinstance(event, OptimizerEvent):  # drawn by the redraw timer, as steps are
                self.history.add_groups(event)
            elif isinstance(event, EvalEvent):
                self.history.add_eval(event.step, event.val_loss, event.exact_match)
                self.post(self.Evaluated(event))
            elif isinstance(event, CheckpointEvent):
                self.post(self.CheckpointSaved(event))
            elif isinstance(event, LogEvent):
                self.post(self.Logged(event))
            elif isinstance(event, DoneEvent):
                self.post(self.Done(event))

        return on_event

    def begin(self, existing: RemoteRun | None, retiring: RemoteRun | None) -> threading.Event:
        """Set up a launch; returns the event its worker sets when it returns.

        A fresh event per launch: the worker of a run that just ended may still
        be returning, and setting a shared event would make s ignore the new run.
        A new run (``existing`` None) also starts a new generation and retires
        the runs shown so far.
        """
        self.stop_requested = threading.Event()
        self.loop_finished = threading.Event()
        if existing is None:
            self.forget(retiring)
        else:
            self.live_run = existing
        return self.loop_finished

    def forget(self, *runs: RemoteRun | None) -> None:
        """Drop the live run and ``runs``: their processes save and end; their events are ignored."""
        retire(self.live_run, *runs)
        self.generation += 1
        self.live_run = None
        self.newest_step = None

    def stop(self) -> bool:
        """Ask a live loop to stop after its current step; True if one was live."""
        self.stop_requested.set()
        if self.loop_live and self.live_run is not None:  # loop_live: there is a live run
            self.live_run.stop()
            return True
        return False

    def drive(
        self,
        generation: int,
        config: LabConfig | None,
        resume_dir: Path | None,
        existing: RemoteRun | None,
        start: bool,
        finished: threading.Event,
        finetune: dict[str, object] | None = None,
    ) -> None:
        """Build or restore a run if needed, then train it until it stops (worker thread)."""
        try:
            run = existing
            if run is None:
                run = self._build(generation, config, resume_dir, finetune)
                if run is None:
                    return
            if start and generation == self.generation and not self.stop_requested.is_set():
                run.run()
        finally:
            finished.set()  # this launch's event: a stale worker must not end a newer loop

    def _build(
        self, generation: int, config: LabConfig | None, resume_dir: Path | None,
        finetune: dict[str, object] | None = None,
    ) -> RemoteRun | None:
        """A new RemoteRun, or None when it failed (said with RunFailed) or is no longer wanted."""
        # torch-backed: loaded already (the lab trains only once the core is in)
        from tui_lab.core.runs.folder import new_run_dir
        from tui_lab.core.training.remote import RemoteRun

        callback = self.on_event_for(generation)
        try:
            if resume_dir is not None:
                run = RemoteRun(callback, resume_dir=resume_dir)
            elif finetune is not None:  # the opened model, on a text
                from tui_lab.core.training.finetune import run_name

                folder = new_run_dir(self.runs_root, run_name(str(finetune["source"])))
                run = RemoteRun(callback, out_dir=folder, finetune=finetune)
            else:
                assert config is not None
                folder = new_run_dir(self.runs_root, config.name)
                run = RemoteRun(callback, config=config, out_dir=folder)
        except Exception as exc:  # a bad folder or device: one line, the app keeps going
            self.post(self.RunFailed(one_line(exc), resume_dir))
            return None
        if generation != self.generation:
            run.close()  # reset while it was being built
            return None
        self.live_run = run
        self.post(self.RunReady(run, resumed=resume_dir is not None))
        return run


def retire(*runs: RemoteRun | None) -> None:
    """Let runs the pane no longer shows stop, save and end their processes (in threads)."""
    for run in {id(r): r for r in runs if r is not None}.values():
        threading.Thread(target=run.close, name="retire-run", daemon=True).start()
