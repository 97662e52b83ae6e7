"""The Train pane on a Muon run: c cycles the chart beside the figures through loss and
the groups' learning rate, gradient norm and update ratio; the status line shows the
speed and MFU; the same series come back when the run folder is opened again."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ui.helpers import SIZE, plain, wait_until
from tui_lab.core.runs.events import OptimizerEvent
from tui_lab.ui.app import LabApp
from tui_lab.ui.panes.train.group_chart import GroupChart
from tui_lab.ui.panes.train.loss_chart import LossChart, RunCharts
from tui_lab.ui.panes.train.optimizer_view import (
    GroupSeries,
    GroupSnapshot,
    lines,
    next_view,
    speed_text,
)
from tui_lab.ui.panes.train.train_pane import TrainPane

PRESET = """\
description: a tiny Muon run
model: {arch: decoder-only, n_encoder_layers: 0, n_decoder_layers: 1, d_model: 16, n_heads: 2,
        d_ff: 32, positional: learned, max_len: 16, tie_embeddings: false}
task: {name: copy, min_len: 1, max_len: 4}
train: {optimizer: muon, steps: 6, eval_every: 6, eval_examples: 8, device: cpu, threads: 1, history: false}
"""


def test_views_cycle_and_each_group_is_a_line() -> None:
    assert [next_view(v) for v in ("loss", "lr", "grad_norm", "update_ratio")] == [
        "lr", "grad_norm", "update_ratio", "loss"]
    series = GroupSeries()
    for step in (1, 2, 3, 2):  # a resumed run repeats step 2: the later one wins
        series.add(OptimizerEvent(step, {"muon": {"lr": 0.02 * step}, "embed": {"lr": 0.001}}, 1500.0, 0.012))
    snap = series.snapshot()
    assert snap.steps == [1, 2]
    (muon, _, xs, ys), (embed, _, _, ys2) = lines("lr", snap)
    assert (muon, embed, xs, ys, ys2) == ("muon", "embed", [1.0, 2.0], [0.02, 0.04], [0.001, 0.001])
    assert speed_text(1500.0, 0.012) == "1.5k tok/s · MFU 1.2%" and speed_text(None, None) == ""
    assert lines("lr", GroupSnapshot()) == []


@pytest.mark.parametrize("reopen", [False, True])
async def test_c_cycles_the_chart_and_the_status_shows_mfu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         reopen: bool) -> None:
    monkeypatch.setenv("TFX_LAB_CACHE", str(tmp_path / "cache"))
    preset = tmp_path / "tiny-muon.yaml"
    preset.write_text(PRESET)
    app = LabApp(preset=str(preset), runs_dir=str(tmp_path / "runs"), warm_hidden_panes=False)
    app.animation_level = "none"
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.core is not None, 240, "torch to load")
        await pilot.press("2")
        pane = app.query_one(TrainPane)
        await pilot.press("space")
        await wait_until(pilot, lambda: pane.state == "done", 60, "the run to finish")
        if reopen:  # the series read back from the folder's metrics
            pane.open_run_dir(pane.run_dir)
            await wait_until(pilot, lambda: pane.history.groups.snapshot().steps == list(range(1, 7)), 60,
                             "the opened run's records")
        await wait_until(pilot, lambda: "MFU" in plain(pane.query_one("#train-status")), 10, "the speed")
        charts = pane.query_one(RunCharts)
        group_chart = pane.query_one(GroupChart)
        assert charts.view == "loss" and not group_chart.display
        for view in ("lr", "grad_norm", "update_ratio"):
            await pilot.press("c")
            await pilot.pause()
            assert charts.view == view and group_chart.display and not pane.query_one(LossChart).display
            shown_view, data = group_chart._data
            assert shown_view == view and data.steps == list(range(1, 7))
            assert {"muon", "embed", "head", "no_decay"} <= set(data.groups[-1])
            assert "muon" in plain(group_chart) and "embed" in plain(group_chart)
        await pilot.press("c")
        assert charts.view == "loss" and pane.query_one(LossChart).display
