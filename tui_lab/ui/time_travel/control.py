"""Time travel for Attention and Decode: step the last decode through the run's history.

``TimeTravelControl`` is a widget that draws nothing: each pane that travels
mounts one and hands it its keys (``[`` ``]`` step to the previous/next
snapshot, ``{`` ``}`` to the first/last, ``p`` plays through them, any key
stops it). The same input is decoded again on the snapshot's weights in a
thread worker (loaded into the lab's own copy of the model, never the Train
pane's); its own ``SnapshotShown`` message brings the result back, and it goes
on to the app as a ``SnapshotDecoded`` message, which it hands to both panes.
The state it moves is ``state/travel.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from time import perf_counter
from typing import Any

from textual import work
from textual.message import Message

from tui_lab.core.errors import one_line
from tui_lab.core.opening.model_handle import opened_from_files
from tui_lab.ui.messages import Decoded, SnapshotDecoded, TravelMoved
from tui_lab.ui.state.host import Hosted
from tui_lab.ui.state.lab_state import LabState

PLAY_SECONDS = 0.35  # between one snapshot's repaint and the next load while playing


def travel_run_dir(state: LabState) -> Path | None:
    """The folder of the run whose model the lab decodes with (its history is travelled):
    a run in training's or resumed (``out_dir``), or a run opened for reading (``run_dir``)."""
    run = state.current_run
    folder = getattr(run, "out_dir", None) or getattr(run, "run_dir", None)
    return Path(folder) if folder else None


class TimeTravelControl(Hosted):
    """The time-travel steps of one pane and their worker (state: ``host.state.travel``)."""

    DEFAULT_CSS = "TimeTravelControl { display: none; }"

    @dataclass
    class SnapshotShown(Message):
        """A snapshot's decode is ready (``result`` None: ``error`` says why)."""

        index: int | None
        result: Any
        model: Any
        task: Any
        options: Any
        curves: Any
        started: float
        error: str | None = None

    def step(self, move: str) -> None:
        """Show the last decode on an earlier/later/first/last history snapshot."""
        travel = self.host.state.travel
        travel.state.playing = False
        if self._refresh_steps():
            self._go(travel.state.target(move))

    def play(self) -> None:
        """Play the decode through every history snapshot (p again, or any key, stops)."""
        state = self.host.state.travel.state
        if state.playing:
            state.playing = False
            self.post_message(TravelMoved())
            return
        if self._refresh_steps():
            state.playing = True
            self._go(state.play_start())

    def _refresh_steps(self) -> bool:
        """Read the run's snapshot list; False (and a notification) when time travel cannot go."""
        host = self.host
        run_dir = travel_run_dir(host.state)
        if opened_from_files(host.state.current_run):
            self.notify("a model opened from files has no training history", severity="warning", timeout=3)
            return False
        if host.state.core is None or host.state.current_run is None or run_dir is None:
            self.notify("train or open a run first (2)", severity="warning", timeout=3)
            return False
        from tui_lab.core.runs.snapshots import list_snapshots

        host.state.travel.state.set_run(run_dir, list_snapshots(run_dir))
        if not host.state.travel.state.steps:
            self.notify("this run has no history snapshots", severity="warning", timeout=3)
            return False
        if host.state.last_decode is None:
            self.notify("decode an input first (3, type, Enter)", severity="warning", timeout=3)
            return False
        return True

    def _go(self, index: int | None) -> None:
        host = self.host
        last = host.state.last_decode
        state = host.state.travel.state
        if last is None or state.run_dir is None:
            return
        step = None if index is None else state.steps[index]
        self._snapshot_worker(
            host.state.current_run,
            state.run_dir,
            index,
            step,
            last.result.input,
            dict(last.options or {}),
            host.training_active,
            perf_counter(),
        )

    @work(thread=True, exclusive=True, exit_on_error=False, group="time-travel")
    def _snapshot_worker(
        self,
        run: Any,
        run_dir: Path,
        index: int | None,
        step: int | None,
        text: str,
        options: dict[str, Any],
        training: bool,
        started: float,
    ) -> None:
        """Load ``step``'s weights into the lab's copy and decode ``text`` again (thread)."""
        from tui_lab.ui.state.decoding import decode_text
        from tui_lab.ui.state.model_copies import model_to_read

        travel, ablation = self.host.state.travel, self.host.state.ablation
        try:
            if step is None:  # back to the live model, as the Decode pane would use it
                model, private = model_to_read(run, training)
            else:
                # A copy of the travel model: heads switched off here never stick to it.
                model, private = travel.snapshot_model(run_dir, step, run.model), True
            # The heads switched off in Attention stay off in the past too.
            model, ablated = ablation.apply(model, run, copied=private, text=text)
            result = decode_text(model, run.task, text, options)  # fill-mask on an encoder
            if ablated:
                ablation.mark(result, ablated)
            curves = travel.read_curves(run_dir)
        except Exception as exc:  # noqa: BLE001 - one line, never a crash
            self.post_message(
                self.SnapshotShown(index, None, None, None, None, None, started, one_line(exc))
            )
            return
        self.post_message(self.SnapshotShown(index, result, model, run.task, options, curves, started))

    def on_time_travel_control_snapshot_shown(
        self, message: TimeTravelControl.SnapshotShown
    ) -> None:
        """Hand the snapshot's decode to the app (both panes show it), redraw the strips, play on."""
        message.stop()
        travel = self.host.state.travel
        if message.error:
            travel.state.playing = False
            self.notify(f"time travel: {message.error}", severity="error", timeout=4)
            self.post_message(TravelMoved())
            return
        travel.state.index = message.index
        travel.shown_result = message.result
        decoded = Decoded(
            message.result, model=message.model, task=message.task, options=message.options
        )
        self.post_message(SnapshotDecoded(decoded, message.started))
        self.post_message(TravelMoved(message.curves))
        if travel.state.playing:
            nxt = travel.state.play_next()
            if nxt is None:
                self.post_message(TravelMoved(message.curves))
            else:
                self.set_timer(PLAY_SECONDS, lambda: self._play_on(nxt))

    def _play_on(self, index: int) -> None:
        if self.host.state.travel.state.playing:
            self._go(index)

    def key_pressed(self, key: str) -> None:
        """Any key but p stops playing (and then does what it does)."""
        state = self.host.state.travel.state
        if state.playing and key != "p":
            state.playing = False
            self.post_message(TravelMoved())

    def decoded(self, result: object) -> None:
        """A decode of the user's own (on the live model) puts the strips back on latest."""
        travel = self.host.state.travel
        if result is not travel.shown_result and travel.state.index is not None:
            travel.state.index = None
            travel.state.playing = False
            self.post_message(TravelMoved())
