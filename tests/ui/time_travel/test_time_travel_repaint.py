"""A time-travel step repaints in one go: the heatmap is on show in the first frame after the decode,
the strip keeps its two lines, and the snapshot weights are read from disk once."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.widgets import Input

from tests.conftest import tiny_config
from tests.ui.helpers import RUN_RESTORE_S, ready, tiny_app, type_text, wait_until
from tui_lab.core.runs.curves import Curve, RunCurves
from tui_lab.ui.panes.attention.attention_pane import AttentionPane
from tui_lab.ui.panes.decode.decode_pane import DecodePane
from tui_lab.ui.panes.train.train_pane import TrainPane
from tui_lab.ui.state.travel import TimeTravel
from tui_lab.ui.widgets.snapshot_strip import KEYS_HINT, SHORT_HINT, SnapshotStrip


class StripApp(App[None]):
    def compose(self) -> ComposeResult:
        yield SnapshotStrip()


@pytest.mark.parametrize("width", [60, 120])
async def test_the_strip_is_two_lines_whatever_it_says(width: int) -> None:
    curves = RunCurves("r", Curve(), Curve(), Curve())
    for step in range(1, 2001):
        curves.train_loss.steps.append(step)
        curves.train_loss.values.append(4.0 / step**0.5)
    curves.exact_match.steps.extend([1000, 2000])
    curves.exact_match.values.extend([0.5, 0.97])
    state = TimeTravel()
    state.set_run(Path("r"), [1, 2, 4, 1024, 2000])
    app = StripApp()
    async with app.run_test(size=(width, 10)) as pilot:
        strip = app.query_one(SnapshotStrip)
        for index in (None, 3, 4):  # latest; with "(eval at step 1,000)"; an eval step
            state.index = index
            strip.show(state, curves, 2000)
            await pilot.pause()
            assert strip.display and strip.size.height == 2
            first, second = str(strip.render()).split("\n")
            assert second.startswith("loss ") and len(second) <= strip.size.width
            if index == 3 and width == 120:  # the long line: the short hint, cut, never wrapped
                assert "(eval at step 1,000)" in first
                assert SHORT_HINT in first and KEYS_HINT not in first
            if index is None:  # a short line keeps the whole hint where it fits
                assert (KEYS_HINT if width == 120 else SHORT_HINT) in first


@pytest.fixture(scope="module")
def history_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tui_lab.core.training.train import TrainingRun

    out = tmp_path_factory.mktemp("repaint") / "hist-run"
    TrainingRun(tiny_config(), out).run()
    return out


async def test_a_step_paints_its_heatmap_and_reads_each_snapshot_once(
    history_source: Path, lab_folders: Path
) -> None:
    shutil.copytree(history_source, lab_folders / "runs" / "hist-run")
    app = tiny_app(run_dir=str(Path("runs") / "hist-run"))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await wait_until(pilot, lambda: app.query_one(TrainPane).state == "ready", RUN_RESTORE_S, "the run")
        await wait_until(pilot, lambda: app.query_one(DecodePane).run is not None, 30)
        await pilot.press("3")
        app.query_one("#decode-input", Input).value = ""
        await type_text(pilot, "3141")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.last_decode is not None, 30, "the decode")
        await pilot.press("4")
        pane = app.query_one(AttentionPane)
        travel = app.travel
        for key in ("left_square_bracket", "left_square_bracket", "right_square_bracket"):
            before = travel.painted
            await pilot.press(key)
            await wait_until(
                pilot,
                lambda before=before: travel.painted is not before
                and travel.painted[0] is pane.result,
                30,
                f"{key} painted",
            )
            # Painted with the snapshot's own decode, which the app then keeps as the last one.
            assert pane.result is travel.shown_result
            await wait_until(pilot, lambda: app.last_decode.result is pane.result, 10)
        # Three steps over two snapshots: the second visit came from memory.
        assert (travel.snapshots.misses, travel.snapshots.hits) == (2, 1)
