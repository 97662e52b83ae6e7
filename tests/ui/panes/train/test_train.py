"""Pilot tests for the Train pane: a real (tiny) run in the thread worker."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import ProgressBar

from tests.ui.helpers import RUN_RESTORE_S, SIZE, plain, ready, tiny_app, wait_until
from tui_lab.core.runs.events import EvalEvent, StepEvent
from tui_lab.ui.panes.decode.decode_pane import DecodePane
from tui_lab.ui.panes.train.loss_chart import RunCharts
from tui_lab.ui.panes.train.metrics_panel import MetricsPanel
from tui_lab.ui.panes.train.train_pane import TrainPane
from tui_lab.ui.panes.train.train_workers import RunDriver
from tui_lab.ui.widgets.status_bar import StatusBar


async def start_training(pilot, steps: int | None = None) -> TrainPane:  # type: ignore[no-untyped-def]
    app = pilot.app
    if steps is not None:
        app.query_one(TrainPane).config_changed(app.config.with_values({"train.steps": steps}))
    await pilot.press("2")
    await pilot.press("space")
    return app.query_one(TrainPane)


async def test_train_updates_metrics_chart_and_progress() -> None:
    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = await start_training(pilot)
        await wait_until(pilot, lambda: pane.state == "done", 60, "the run to finish")
        await wait_until(  # the redraw tick after the run's end
            pilot, lambda: "finished" in plain(app.query_one(MetricsPanel)), 10, "the last redraw"
        )
        assert pane.reason == "finished"
        data = pane.history.snapshot()
        assert data.steps[-1] == 40 and len(data.steps) == 40
        assert data.eval_steps == [20, 40]
        assert pane.query_one(RunCharts).drawn == pane.history.version  # the chart drew the latest data
        figures = plain(app.query_one(MetricsPanel))
        assert "40 / 40" in figures and "finished" in figures
        assert app.query_one(ProgressBar).progress == 40
        run_dir = pane.run_dir
        assert run_dir is not None and Path(run_dir, "model.safetensors").is_file()
        assert Path(run_dir).parent == Path("runs")
        # The trained model is offered to the Decode pane.
        assert app.query_one(DecodePane).run is pane.run


async def test_pause_resume_stop() -> None:
    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = await start_training(pilot, steps=100_000)
        await wait_until(
            pilot, lambda: pane.state == "running" and len(pane.history) >= 3, 60, "a few steps"
        )
        await pilot.press("space")
        assert pane.state == "paused"
        assert "paused" in plain(app.query_one(StatusBar))  # the app's bar follows the pane
        await pilot.pause(0.3)
        paused_at = len(pane.history)
        await pilot.pause(0.6)
        assert len(pane.history) <= paused_at + 1  # at most the step that was under way
        await pilot.press("space")
        assert pane.state == "running"
        await wait_until(pilot, lambda: len(pane.history) > paused_at + 2, 30, "steps after resume")
        await pilot.press("s")
        await wait_until(pilot, lambda: pane.state == "done", 30, "the stop")
        assert pane.reason == "stopped"
        # The loop's worker sets its event as it returns, just after the run posted Done.
        await wait_until(pilot, pane.loop_finished.is_set, 10, "the training loop's return")


async def test_quit_during_training_stops_the_run_and_saves_it() -> None:
    """q while training: the loop stops (not left running to its 100,000 steps) and saves.

    How fast it stops is measured by bench/ui_quit.py, not asserted here."""
    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = await start_training(pilot, steps=100_000)
        await wait_until(
            pilot, lambda: pane.state == "running" and len(pane.history) >= 3, 60, "a few steps"
        )
        run = pane.run
        await pilot.press("q")
    # The app has exited; the loop noticed the stop and saved its last checkpoint.
    assert pane.loop_finished.wait(60)  # a hang guard, not a timing
    from tui_lab.core.runs.folder import load_run

    loaded = load_run(run.out_dir)
    assert 3 <= loaded.state["step"] < 100_000
    assert loaded.state["end"]["reason"] == "stopped"  # it says it was stopped, not that it ended


async def test_reset_forgets_the_run_and_log_scale_toggles() -> None:
    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = await start_training(pilot)
        await wait_until(pilot, lambda: pane.state == "done", 60, "the run to finish")
        await pilot.press("l")
        assert pane.log_scale
        await pilot.press("l")
        assert not pane.log_scale
        await pilot.press("r")
        await pilot.pause()
        assert pane.state == "idle" and pane.run is None and len(pane.history) == 0
        assert app.query_one(DecodePane).run is None


async def test_open_run_shows_curves_and_continues(trained_run: Path) -> None:
    app = tiny_app(run_dir=str(trained_run))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = app.query_one(TrainPane)
        await wait_until(pilot, lambda: pane.state == "ready", RUN_RESTORE_S, "the run to load")
        assert pane.history.snapshot().steps[-1] == 30
        assert pane.run.step == 30
        # The figures come from the run's records, read back as the events it emitted.
        assert isinstance(pane.last_step, StepEvent) and pane.last_step.step == 30
        assert isinstance(pane.last_eval, EvalEvent) and pane.last_eval.step == 20
        # Named after the preset it was trained from, as the trainer names it (not the folder).
        assert app.config.name == "tiny"
        await pilot.press("2")
        await pilot.press("space")
        await wait_until(pilot, lambda: pane.state == "done", 60, "the rest of the run")
        assert pane.run.step == 40
        assert pane.history.snapshot().steps[-1] == 40


async def test_nan_notifies_an_error() -> None:
    from types import SimpleNamespace

    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        pane = app.query_one(TrainPane)
        pane.post_message(
            RunDriver.Done(SimpleNamespace(reason="nan", message="loss became nan at step 3", step=3))
        )
        await pilot.pause()
        assert pane.state == "done" and pane.reason == "nan"
        assert any(n.severity == "error" and "nan" in n.message for n in app._notifications)
