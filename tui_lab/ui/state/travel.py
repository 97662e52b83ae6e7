"""Time travel through a run's history snapshots: the state Attention and Decode share.

Textual-free. ``TimeTravel`` is the snapshot list and where the lab stands in
it (``index`` None: the live model, "latest"); ``Travel`` adds what the panes'
workers share: a template copy of the model per run folder (never the Train
pane's live model) that each snapshot's own copy is made from, the snapshots
already loaded (``core.runs.snapshots.SnapshotCache``: each file read and checked
once), the run's loss and exact-match curves, and the atlas's score curves
(computed once per folder).
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MOVES = ("prev", "next", "first", "last")


@dataclass
class TimeTravel:
    """A run folder's snapshot steps (ascending) and the one on show (``index`` None: latest)."""

    run_dir: Path | None = None
    steps: list[int] = field(default_factory=list)
    index: int | None = None
    playing: bool = False

    def set_run(self, run_dir: Path | None, steps: list[int]) -> None:
        """Follow ``run_dir``'s snapshots; another folder (or a shorter list) goes back to latest."""
        if run_dir != self.run_dir or (self.index is not None and self.index >= len(steps)):
            self.index = None
            self.playing = False
        self.run_dir, self.steps = run_dir, list(steps)

    @property
    def step(self) -> int | None:
        """The snapshot step on show (None: the live model)."""
        return None if self.index is None else self.steps[self.index]

    def target(self, move: str) -> int | None:
        """The index ``move`` leads to: ``]`` past the last snapshot is the live model again."""
        n = len(self.steps)
        if not n:
            return None
        if move == "first":
            return 0
        if move == "last":
            return n - 1
        if move == "prev":
            return n - 1 if self.index is None else max(0, self.index - 1)
        if move == "next":
            return None if self.index is None or self.index >= n - 1 else self.index + 1
        raise ValueError(f"unknown move {move!r} (one of {', '.join(MOVES)})")

    def play_start(self) -> int | None:
        """Where playing starts: the next snapshot, or the first when on latest or the last."""
        if not self.steps:
            return None
        if self.index is None or self.index >= len(self.steps) - 1:
            return 0
        return self.index + 1

    def play_next(self) -> int | None:
        """The next index while playing; None (and playing stops) at the last snapshot."""
        if self.index is None or self.index >= len(self.steps) - 1:
            self.playing = False
            return None
        return self.index + 1

    def describe(self, total_steps: int | None) -> str:
        """Which weights are on show: "step 256 of 2000 · snapshot 9/26", or "latest"."""
        if self.index is None:
            return f"latest · {len(self.steps)} snapshots" if self.steps else "latest"
        of = f" of {total_steps:,}" if total_steps else ""
        return f"step {self.steps[self.index]:,}{of} · snapshot {self.index + 1}/{len(self.steps)}"


def sparkline(
    values: list[float], width: int, lo: float | None = None, hi: float | None = None
) -> str:
    """``values`` resampled to ``width`` characters of ▁..█ (``lo``..``hi``, default their range)."""
    bars = "▁▂▃▄▅▆▇█"
    if not values or width <= 0:
        return ""
    n = len(values)
    picked = (
        values if n <= width else [values[i * n // width] for i in range(width - 1)] + [values[-1]]
    )
    finite = [v for v in picked if v == v]
    lo = lo if lo is not None else (min(finite) if finite else 0.0)
    hi = hi if hi is not None else (max(finite) if finite else 1.0)
    span = hi - lo or 1.0
    return "".join(
        " " if v != v else bars[max(0, min(7, int((v - lo) / span * 7 + 0.5)))] for v in picked
    )


def value_at(steps: list[int], values: list[float], step: int) -> tuple[int, float] | None:
    """The last (step, value) at or before ``step`` (None if there is none)."""
    best = None
    for s, v in zip(steps, values, strict=False):
        if s > step:
            break
        best = (s, v)
    return best


class Travel:
    """What the panes' time-travel workers share in one lab (the app holds one: ``host.state.travel``)."""

    def __init__(self) -> None:
        self.state = TimeTravel()
        self.lock = threading.Lock()  # around the template model
        self._model: Any = None  # a copy of the live model: what each snapshot's copy starts from
        self._model_for: Path | None = None
        self.snapshots: Any = None  # a SnapshotCache (made in the first worker: torch is loaded)
        self.curves: dict[Path, Any] = {}  # run folder -> RunCurves (loss, exact match)
        self.score_curves: dict[Path, Any] = {}  # run folder -> ScoreCurves (complete)
        self.shown_result: Any = None  # the decode time travel put on show
        self.painted: tuple[Any, float] | None = None  # (shown_result, perf_counter) once painted
        self.repaint_ms: float | None = None  # the last step's key-to-repaint time (bench)

    def snapshot_model(self, run_dir: Path, step: int, live_model: Any) -> Any:
        """A model of its own with ``step``'s weights (thread): a later step never changes it."""
        from tui_lab.core.runs.snapshots import SnapshotCache

        with self.lock:
            if self.snapshots is None:  # each snapshot read and checked once, then from memory
                self.snapshots = SnapshotCache()
            if self._model is None or self._model_for != run_dir:
                self._model = copy.deepcopy(live_model)
                self._model_for = run_dir
            model = copy.deepcopy(self._model)
        self.snapshots.load(run_dir, step, model)
        return model

    def read_curves(self, run_dir: Path) -> Any:
        """The run's loss and exact-match curves (read again when metrics.jsonl changed)."""
        from tui_lab.core.runs.curves import read_curves

        metrics = run_dir / "metrics.jsonl"
        try:
            key = metrics.stat().st_mtime_ns, metrics.stat().st_size
        except OSError:
            key = None
        cached = self.curves.get(run_dir)
        if cached is None or cached[0] != key:
            cached = (key, read_curves(run_dir))
            self.curves[run_dir] = cached
        return cached[1]
