"""The lab's quit latency while it trains: from ``q`` to the training loop stopped and saved.

Was a timed assertion in the UI tests (``< 5 s``, "typically well under 1 s"); a
time depends on the machine, so it is measured here and the test checks only
that quitting stops and saves the run. The lab opens on the shipped copy
preset (pilot, 120x40) with its steps set out of reach, trains a few steps
in the Train pane, then ``q`` is pressed; the clock stops when the Train
pane's worker has returned (the run's process stopped after its step and
saved its checkpoint). Goal: p95 within 1 s.

    python -m bench.ui_quit [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import Row, Section

GOAL_S = 1.0


async def _one_quit(root: Path) -> float:
    """Seconds from ``q`` to the stopped training loop, for one lab."""
    from tui_lab.ui.app import LabApp
    from tui_lab.ui.panes.train.train_pane import TrainPane

    app = LabApp(preset="copy", runs_dir=str(root))
    async with app.run_test(size=(120, 40)) as pilot:
        while app.core is None:
            await pilot.pause(0.05)
        pane = app.query_one(TrainPane)
        pane.config_changed(app.config.with_values({"train.steps": 1_000_000}))
        await pilot.press("2", "space")
        while not (pane.state == "running" and len(pane.history) >= 3):
            await pilot.pause(0.05)
        started = time.perf_counter()
        await pilot.press("q")
    pane.loop_finished.wait(60)
    return time.perf_counter() - started


def ui_quit(quick: bool) -> Section:
    """Quit the lab mid-run a few times; the p50/p95 of q to a saved, stopped run."""
    sec = Section("ui_quit", "Lab: q while training, to the run stopped and saved")
    rounds = 3 if quick else 8
    with tempfile.TemporaryDirectory() as tmp:
        times = [asyncio.run(_one_quit(Path(tmp) / f"r{i}")) for i in range(rounds)]
    times.sort()
    p50 = statistics.median(times)
    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
    sec.values = {"p50_s": p50, "p95_s": p95, "rounds": rounds}
    sec.rows.append(Row(
        "q while training → run stopped and saved (p95)", f"{p95:.2f} s", f"≤ {GOAL_S:.0f} s",
        p95 <= GOAL_S, f"p50 {p50:.2f} s over {rounds} quits; copy preset, {os.cpu_count()} cores",
    ))
    return sec


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.ui_quit")
    parser.add_argument("--quick", action="store_true", help="three quits instead of eight")
    args = parser.parse_args()
    print(ui_quit(args.quick).values)
