"""``history_overhead``: copy-preset training with history snapshots on vs off (goal: <= 3%).

Both arms train the shipped copy preset for the same fixed number of steps
(no early stop at the target, so both do the same work), alternating on vs
off so load on a shared machine hits both alike. Two measures:

- ``ratio``: median over rounds of wall time on / wall time off, whole
  ``run()`` including evaluations, checkpoints and snapshot writes;
- ``save_share``: the time the "on" runs spent inside ``History.save``
  over their whole wall time: the overhead itself, far steadier than a
  ratio of two noisy runs.

300 steps plan 12 snapshots (1, 2, ..., 256 and 100, 200, 300): denser than
the full 1000-step copy run's 20, so this overstates the overhead.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from bench.common import Row, Section
from tui_lab.core.config.presets import load_preset
from tui_lab.core.runs import snapshots as history
from tui_lab.core.training.train import TrainingRun

GOAL = 0.03


def _train(out: Path | None, on: bool, steps: int) -> tuple[float, float, int]:
    """(wall seconds, seconds inside History.save, snapshots) of one copy run."""
    cfg = load_preset("copy").with_values({
        "train.steps": steps, "train.target_accuracy": None, "train.history": on, "train.device": "cpu",
    })
    spent = [0.0, 0]
    original = history.History.save

    def timed_save(self: history.History, step: int) -> None:
        t0 = time.perf_counter()
        original(self, step)
        spent[0] += time.perf_counter() - t0
        spent[1] += 1

    history.History.save = timed_save  # type: ignore[method-assign]
    try:
        t0 = time.perf_counter()
        TrainingRun(cfg, out).run()
        return time.perf_counter() - t0, spent[0], int(spent[1])
    finally:
        history.History.save = original  # type: ignore[method-assign]


def history_overhead(quick: bool) -> Section:
    section = Section("history_overhead", "History snapshots: copy training with history on vs off")
    steps, rounds = (300, 2) if quick else (300, 4)
    ratios: list[float] = []
    shares: list[float] = []
    snapshots = 0
    with tempfile.TemporaryDirectory(prefix="tfx-bench-history-") as tmp:
        for r in range(rounds):
            order = (True, False) if r % 2 == 0 else (False, True)
            wall: dict[bool, float] = {}
            for on in order:
                seconds, saving, snapshots_made = _train(Path(tmp) / f"{r}-{on}", on, steps)
                wall[on] = seconds
                if on:
                    shares.append(saving / seconds)
                    snapshots = snapshots_made
            ratios.append(wall[True] / wall[False])
    ratio, share = statistics.median(ratios), statistics.median(shares)
    section.values = {"steps": steps, "rounds": rounds, "snapshots": snapshots, "ratio": ratio,
                      "ratios": ratios, "save_share": share}
    section.rows = [
        Row("copy training time, history on / off", f"{ratio:.3f}x",
            f"<= {1 + GOAL:.2f}x", ratio <= 1 + GOAL, f"median of {rounds} rounds, {steps} steps each"),
        Row("time spent writing snapshots", f"{share:.2%}", f"<= {GOAL:.0%}", share <= GOAL,
            f"{snapshots} snapshots per run"),
    ]
    return section
