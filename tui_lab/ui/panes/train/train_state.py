"""Where the lab's training stands: a phase, the reason a run ended, the legal moves.

The Train pane draws this object and asks it before acting; the status bar and
the Decode pane read it through the app. It imports nothing from Textual (a
test checks), so its transitions are unit-tested without an app.

A transition that makes no sense where the lab stands (pause when nothing
runs, resume when nothing is paused) is refused: the method returns False and
nothing changes, so a key pressed twice, or a message that arrives late,
cannot put the lab in a state its processes are not in.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum


class Phase(str, Enum):
    """The lab's training phases (a ``str``: ``Phase.DONE == "done"``)."""

    LOADING = "loading"  # torch is still being imported
    IDLE = "idle"  # no run: space builds one
    BUILDING = "building"  # a run is being built or restored in its process
    READY = "ready"  # a restored run waits: space continues it
    RUNNING = "running"
    PAUSED = "paused"
    STOPPING = "stopping"  # asked to stop; the run saves, then says it is done
    DONE = "done"  # the loop ended; ``reason`` says why
    FOLLOWING = "following"  # another process trains; the lab only watches


#: Why a run ended (the core's ``DoneEvent.reason``) and, for a user stop, a time
#: limit or an error, whether the run can be continued from its last checkpoint.
RESUMABLE_REASONS = ("stopped", "time", "error")

#: What the keys do in each phase; ``{toggle}``, ``{stop}`` and ``{reset}`` are the keys of
#: ``train.toggle``, ``train.stop`` and ``train.reset`` (as a user's keymap has them).
HINTS = {
    Phase.LOADING: "loading torch…",
    Phase.IDLE: "press {toggle} to train",
    Phase.BUILDING: "building the model…",
    Phase.READY: "press {toggle} to continue training",
    Phase.RUNNING: "{toggle} pause · {stop} stop",
    Phase.PAUSED: "{toggle} resume · {stop} stop",
    Phase.STOPPING: "stopping…",
    Phase.DONE: "{toggle} to train again · {reset} reset",
    Phase.FOLLOWING: "following a run another process writes",
}
DEFAULT_KEYS = {"toggle": "space", "stop": "s", "reset": "r"}

#: The word the app's status bar shows while a loop is live (nothing otherwise).
STATUS_WORDS = {Phase.RUNNING: "training", Phase.PAUSED: "paused", Phase.STOPPING: "stopping"}


class TrainState:
    """The phase the lab's training is in and the moves it allows from there."""

    def __init__(self, phase: Phase = Phase.LOADING) -> None:
        self.phase = phase
        self.reason = ""  # why the last run ended (DoneEvent.reason); "" while none has

    def __repr__(self) -> str:
        return f"TrainState({self.phase.value!r}, reason={self.reason!r})"

    def _move(self, allowed_from: tuple[Phase, ...], to: Phase) -> bool:
        """Go to ``to`` if the lab stands in one of ``allowed_from``; False (and stay) if not."""
        if self.phase not in allowed_from:
            return False
        self.phase = to
        return True

    # ---- what the lab offers where it stands --------------------------------------------

    @property
    def active(self) -> bool:
        """True while a training process is busy with a run (building it or in its loop)."""
        return self.phase in (Phase.BUILDING, Phase.RUNNING, Phase.PAUSED, Phase.STOPPING)

    @property
    def hint(self) -> str:
        """What the keys do now, for the pane's title line (the default keys)."""
        return self.hint_with(DEFAULT_KEYS)

    def hint_with(self, keys: Mapping[str, str]) -> str:
        """What the keys do now, naming ``keys`` (``{"toggle": "t", "stop": "s", "reset": "r"}``)."""
        if self.phase is Phase.FOLLOWING and self.reason:
            return f"the followed run ended: {self.reason}"
        return HINTS[self.phase].format_map(keys)

    @property
    def status_word(self) -> str:
        """"training", "paused" or "stopping" while a loop is live, else ""."""
        return STATUS_WORDS.get(self.phase, "")

    @property
    def can_start(self) -> bool:
        """Space starts (or continues) a run."""
        return self.phase in (Phase.LOADING, Phase.IDLE, Phase.READY, Phase.DONE)

    @property
    def can_open(self) -> bool:
        """A run folder can be opened: no run is live and none is followed."""
        return self.phase in (Phase.LOADING, Phase.IDLE, Phase.READY, Phase.DONE)

    @property
    def can_stop(self) -> bool:
        """S has something to stop."""
        return self.phase in (Phase.BUILDING, Phase.RUNNING, Phase.PAUSED)

    @property
    def can_leave_run(self) -> bool:
        """Reset or open another run: not while a stop is under way or another process trains."""
        return self.phase not in (Phase.STOPPING, Phase.FOLLOWING)

    @property
    def resumable(self) -> bool:
        """The last run ended early (stopped, timed out, failed): it can go on from its checkpoint."""
        return self.phase is Phase.DONE and self.reason in RESUMABLE_REASONS

    def offers(self, action: str) -> bool | None:
        """Whether the pane's action applies now: True, None (shown greyed out) or False (hidden).

        Space is bound to start, pause and resume: exactly one of them is offered.
        """
        if action == "start":
            return self.can_start
        if action == "pause":
            return self.phase is Phase.RUNNING
        if action == "resume":
            return self.phase is Phase.PAUSED
        if action == "stop":
            return True if self.can_stop else None
        if action in ("reset", "open_run"):
            return True if self.can_leave_run else None
        return True

    # ---- transitions ------------------------------------------------------------------------

    def core_loaded(self) -> bool:
        """Torch is imported: training can start."""
        return self._move((Phase.LOADING,), Phase.IDLE)

    def build(self) -> bool:
        """A run starts being built or restored in its process (``reason`` stays till it is)."""
        return self._move((Phase.IDLE, Phase.READY, Phase.DONE), Phase.BUILDING)

    def built(self, wait: bool) -> bool:
        """The run exists: it waits for space (``wait``, an opened run) or trains at once."""
        if self._move((Phase.BUILDING,), Phase.READY if wait else Phase.RUNNING):
            self.reason = ""
            return True
        return False

    def build_failed(self, has_run: bool) -> bool:
        """Building or restoring failed: back to the run shown before (as it ended), or none."""
        return self._move((Phase.BUILDING,), Phase.DONE if has_run else Phase.IDLE)

    def start(self) -> bool:
        """A built run that waited (``READY``) starts training."""
        return self._move((Phase.READY,), Phase.RUNNING)

    def pause(self) -> bool:
        """The loop waits between steps."""
        return self._move((Phase.RUNNING,), Phase.PAUSED)

    def resume(self) -> bool:
        """A paused loop goes on."""
        return self._move((Phase.PAUSED,), Phase.RUNNING)

    def stop(self, loop_live: bool) -> bool:
        """Ask for a stop: a live loop goes to ``STOPPING``; a build not yet training to ``IDLE``."""
        if loop_live:
            return self._move((Phase.BUILDING, Phase.RUNNING, Phase.PAUSED), Phase.STOPPING)
        return self._move((Phase.BUILDING,), Phase.IDLE)

    def finish(self, reason: str) -> bool:
        """The loop ended (the core's ``DoneEvent``): ``DONE`` and why.

        Accepted from any phase a loop can be in, and from ``READY``/``IDLE``
        too: a run that dies before its first step reports that way. Not while
        following (another process's run) or before torch is loaded.
        """
        if self.phase in (Phase.LOADING, Phase.FOLLOWING):
            return False
        self.phase = Phase.DONE
        self.reason = reason
        return True

    def crash(self, has_run: bool) -> bool:
        """The training thread failed unexpectedly: the run (if any) ended in an error."""
        if self.phase in (Phase.LOADING, Phase.FOLLOWING):
            return False
        self.reason = "error"
        self.phase = Phase.DONE if has_run else Phase.IDLE
        return True

    def follow(self) -> bool:
        """Watch a run another process writes (for the rest of the session; ``reason`` is
        set when that run ends, and cleared if another process takes it up again)."""
        if self.active:
            return False
        self.phase = Phase.FOLLOWING
        self.reason = ""
        return True

    def reset(self, core_loaded: bool) -> bool:
        """Forget the run: ``IDLE`` (``LOADING`` while torch still loads)."""
        if self.phase is Phase.FOLLOWING:
            return False
        self.phase = Phase.IDLE if core_loaded else Phase.LOADING
        self.reason = ""
        return True
