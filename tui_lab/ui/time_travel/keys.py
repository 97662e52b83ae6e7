"""Time-travel keys for Attention and Decode: step the last decode through the run's history.

``[`` ``]`` step to the previous/next snapshot, ``{`` ``}`` to the first/last,
``p`` plays through them (any key stops it). The same input is decoded again
on the snapshot's weights in a thread worker (loaded into the lab's own copy
of the model, never the Train pane's), and the result goes out as a
``Decoded`` message through the Decode pane, so both panes show it.
"""

from __future__ import annotations

from pathlib import Path
from time import perf_counter
from typing import Any

from textual import events, work
from textual.binding import Binding
from textual.message import Message

from tui_lab.core.errors import one_line
from tui_lab.ui.messages import Decoded
from tui_lab.ui.time_travel.travel import travel_for
from tui_lab.ui.widgets.head_atlas import HeadAtlas
from tui_lab.ui.widgets.snapshot_strip import SnapshotStrip

PLAY_SECONDS = 0.35  # between one snapshot's repaint and the next load while playing

TIME_TRAVEL_BINDINGS = [
    Binding("left_square_bracket", "snapshot('prev')", "Earlier snapshot", show=False),
    Binding("right_square_bracket", "snapshot('next')", "Later snapshot (then latest)", show=False),
    Binding("left_curly_bracket", "snapshot('first')", "First snapshot", show=False),
    Binding("right_curly_bracket", "snapshot('last')", "Last snapshot", show=False),
    Binding("p", "play_snapshots", "Play the history / stop", show=False),
]


class SnapshotShown(Message):
    """A snapshot's decode is ready (``result`` None: ``error`` says why)."""

    def __init__(
        self,
        index: int | None,
        result: Any,
        model: Any,
        task: Any,
        options: Any,
        curves: Any,
        started: float,
        error: str | None = None,
    ) -> None:
        super().__init__()
        self.index, self.result, self.model, self.task = index, result, model, task
        self.options, self.curves, self.started, self.error = options, curves, started, error


class TimeTravelKeys:
    """Mixed into a pane: the time-travel actions, their worker, the strip and the atlas hook."""

    last_repaint_ms: float | None = None  # the last step's load-decode-repaint time (bench)

    def _run_dir(self) -> Path | None:
        train = self.app.pane("train")  # type: ignore[attr-defined]
        folder = getattr(train, "run_dir", None) or getattr(self.app.current_run, "out_dir", None)  # type: ignore[attr-defined]
        return Path(folder) if folder else None

    def action_snapshot(self, move: str) -> None:
        """Show the last decode on an earlier/later/first/last history snapshot."""
        travel = travel_for(self.app)  # type: ignore[attr-defined]
        travel.state.playing = False
        if self._refresh_steps():
            self._go(travel.state.target(move))

    def action_play_snapshots(self) -> None:
        """Play the decode through every history snapshot (p again, or any key, stops)."""
        state = travel_for(self.app).state  # type: ignore[attr-defined]
        if state.playing:
            state.playing = False
            self.show_strips()
            return
        if self._refresh_steps():
            state.playing = True
            self._go(state.play_start())

    def _refresh_steps(self) -> bool:
        """Read the run's snapshot list; False (and a notification) when time travel cannot go."""
        app: Any = self.app  # type: ignore[attr-defined]
        run_dir = self._run_dir()
        if app.core is None or app.current_run is None or run_dir is None:
            app.notify("train or open a run first (2)", severity="warning", timeout=3)
            return False
        from tui_lab.core.runs.snapshots import list_snapshots

        travel = travel_for(app)
        travel.state.set_run(run_dir, list_snapshots(run_dir))
        if not travel.state.steps:
            app.notify("this run has no history snapshots", severity="warning", timeout=3)
            return False
        if app.last_decode is None:
            app.notify("decode an input first (3, type, Enter)", severity="warning", timeout=3)
            return False
        return True

    def _go(self, index: int | None) -> None:
        app: Any = self.app  # type: ignore[attr-defined]
        last = app.last_decode
        state = travel_for(app).state
        step = None if index is None else state.steps[index]
        self._snapshot_worker(
            app.current_run,
            state.run_dir,
            index,
            step,
            last.result.input,
            dict(last.options or {}),
            app.training_active,
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
        import copy

        from tui_lab.core.decoding.decode import generate

        travel = travel_for(self.app)  # type: ignore[attr-defined]
        try:
            if step is None:  # back to the live model, as the Decode pane would use it
                model = copy.deepcopy(run.model) if training else run.model
                private = training
            else:
                # A copy of the travel model: heads switched off here never stick to it.
                model, private = travel.snapshot_model(run_dir, step, run.model), True
            decode = self.app.pane("decode")  # type: ignore[attr-defined]
            ablated = ""
            if decode is not None:  # the heads switched off in Attention stay off in the past too
                model, ablated = decode.ablation.apply(model, run, copied=private)
            result = generate(model, run.task, text, **options)
            if ablated:
                decode.ablation.mark(result, ablated)
            curves = travel.read_curves(run_dir)
        except Exception as exc:  # noqa: BLE001 - one line, never a crash
            failed = SnapshotShown(index, None, None, None, None, None, started, one_line(exc))
            self.post_message(failed)  # type: ignore[attr-defined]
            return
        self.post_message(SnapshotShown(index, result, model, run.task, options, curves, started))  # type: ignore[attr-defined]

    def on_snapshot_shown(self, message: SnapshotShown) -> None:
        """Put the snapshot's decode on show in both panes, redraw the strips, play on."""
        message.stop()
        app: Any = self.app  # type: ignore[attr-defined]
        travel = travel_for(app)
        if message.error:
            travel.state.playing = False
            app.notify(f"time travel: {message.error}", severity="error", timeout=4)
            self.show_strips()
            return
        travel.state.index = message.index
        travel.shown_result = message.result
        decoded = Decoded(
            message.result, model=message.model, task=message.task, options=message.options
        )
        # Attention first, here, so the next frame holds the new heatmap; the message then goes
        # through the Decode pane's handlers (output, top-k) and the app's (last decode; the
        # heatmap again, which Attention skips: it is on show already).
        attention = app.pane("attention")
        if attention is not None:
            attention.set_result(message.result, message.model, message.task, message.options)
        (app.pane("decode") or self).post_message(decoded)
        self.show_strips(message.curves)
        self.call_after_refresh(self._repainted, message.started, message.result)  # type: ignore[attr-defined]
        if travel.state.playing:
            nxt = travel.state.play_next()
            if nxt is None:
                self.show_strips(message.curves)
            else:
                self.set_timer(PLAY_SECONDS, lambda: self._play_on(nxt))  # type: ignore[attr-defined]

    def _play_on(self, index: int) -> None:
        if travel_for(self.app).state.playing:  # type: ignore[attr-defined]
            self._go(index)

    def _repainted(self, started: float, result: Any) -> None:
        now = perf_counter()
        TimeTravelKeys.last_repaint_ms = (now - started) * 1000
        travel_for(self.app).painted = (result, now)  # type: ignore[attr-defined]

    def on_key(self, event: events.Key) -> None:
        """Any key but p stops playing (and then does what it does)."""
        state = travel_for(self.app).state  # type: ignore[attr-defined]
        if state.playing and event.key != "p":
            state.playing = False
            self.show_strips()

    def on_decoded(self, message: Decoded) -> None:
        """A decode of the user's own (on the live model) puts the strips back on latest."""
        travel = travel_for(self.app)  # type: ignore[attr-defined]
        if message.result is not travel.shown_result and travel.state.index is not None:
            travel.state.index = None
            travel.state.playing = False
            self.show_strips()

    def show_strips(self, curves: Any = None) -> None:
        """Redraw the strip of Decode and of Attention (and the atlas) for the state on show."""
        app: Any = self.app  # type: ignore[attr-defined]
        travel = travel_for(app)
        state = travel.state
        if curves is None and state.run_dir is not None:
            curves = travel.curves.get(state.run_dir, (None, None))[1]
        total = getattr(app.current_run, "total_steps", None)
        for pane_id in ("decode", "attention"):
            pane = app.pane(pane_id)
            if pane is not None:
                for strip in pane.query(SnapshotStrip):
                    strip.show(state, curves, total)

    def show_atlas(self) -> None:
        """In the overview, show the atlas of the model on show (its scores are worked out once)."""
        pane: Any = self
        atlas = pane.query_one(HeadAtlas)
        atlas.display = bool(pane.overview and pane.result is not None)
        if not atlas.display:
            return
        names = list(pane.result.attention)
        arch = "encoder-decoder" if any(n.startswith("encoder.") for n in names) else "decoder-only"
        state = travel_for(pane.app).state
        run_dir = self._run_dir()
        from tui_lab.core.runs.snapshots import list_snapshots

        history = run_dir if run_dir is not None and list_snapshots(run_dir) else None
        step = state.step if pane.result is travel_for(pane.app).shown_result else None
        atlas.follow(pane.model, pane.lab_task, arch, history, step)
