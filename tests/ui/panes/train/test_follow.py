"""The lab follows a run that another process is writing (`tfx-lab watch`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.ui.helpers import SIZE, ready, tiny_app, wait_until
from tui_lab.core.runs.events import EvalEvent, StepEvent
from tui_lab.ui.panes.train.train_pane import TrainPane

ROOT = Path(__file__).resolve().parents[4]


async def test_follow_updates_live_while_another_process_trains(trained_run: Path) -> None:
    app = tiny_app(run_dir=str(trained_run), follow=True)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = app.query_one(TrainPane)
        await wait_until(pilot, lambda: len(pane.history) == 30, 10, "the first 30 steps")
        # Another process continues the same run folder from step 30 to its last step (40).
        writer = subprocess.Popen(
            [sys.executable, "-m", "tui_lab.cli", "train", "--resume", str(trained_run), "--json"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            await wait_until(pilot, lambda: len(pane.history) >= 40, 120, "steps 31-40 from the writer")
        finally:
            assert writer.wait(timeout=120) == 0, writer.stderr.read() if writer.stderr else ""
        assert pane.state == "following"  # the lab watched; it did not take the training over
        assert pane.history.snapshot().steps == list(range(1, 41))
        await wait_until(  # the next read of the folder
            pilot,
            lambda: getattr(pane.last_step, "step", None) == 40
            and getattr(pane.last_eval, "step", None) == 40,
            10,
            "the last step and evaluation shown",
        )
        assert isinstance(pane.last_step, StepEvent) and isinstance(pane.last_eval, EvalEvent)
        # The writer finished the run: state.json says so, and the lab shows it.
        await wait_until(pilot, lambda: pane.train_state.reason == "finished", 10, "the run's end")
        assert pane.state == "following"
        assert "the followed run ended: finished" in str(app.query_one("#train-status").render())
