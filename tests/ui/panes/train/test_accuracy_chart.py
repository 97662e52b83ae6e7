"""The Train pane on a full-batch modular-addition run: both accuracies on one chart; f, the spectrum."""

from __future__ import annotations

from pathlib import Path

from tests.ui.helpers import SIZE, plain, wait_until
from tui_lab.ui.app import LabApp
from tui_lab.ui.panes.train.accuracy_chart import AccuracyChart
from tui_lab.ui.panes.train.train_pane import TrainPane
from tui_lab.ui.screens.fourier_screen import FourierScreen
from tui_lab.ui.widgets.fourier_view import FourierView

PRESET = """\
description: a tiny grokking run
model: {arch: decoder-only, n_encoder_layers: 0, n_decoder_layers: 1, d_model: 16, n_heads: 2,
        d_ff: 32, positional: learned, max_len: 4}
task: {name: modular-addition, p: 11}
train: {full_batch: true, steps: 6, eval_every: 2, device: cpu, threads: 1, lr: 1.0e-2}
"""


async def test_full_batch_run_charts_train_and_held_out_accuracy_and_f_shows_the_spectrum(tmp_path: Path) -> None:
    preset = tmp_path / "tiny-modular.yaml"
    preset.write_text(PRESET)
    app = LabApp(preset=str(preset))
    app.animation_level = "none"
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.core is not None, 240, "torch to load")  # a busy machine
        await pilot.press("2")
        pane = app.query_one(TrainPane)
        chart = pane.query_one(AccuracyChart)
        await wait_until(pilot, lambda: chart.display, 5, "the accuracy chart (on for full batch)")
        await pilot.press("space")
        await wait_until(pilot, lambda: pane.state == "done", 60, "the run to finish")
        await wait_until(pilot, lambda: chart._data is not None and len(chart._data.eval_steps) == 3, 10,
                         "the chart's last redraw")
        data = chart._data
        assert len(data.train_accuracy) == 6 and all(0.0 <= a <= 1.0 for a in data.train_accuracy)
        assert data.eval_steps == [2, 4, 6] and all(w is not None and w > 0 for w in data.weight_norm)
        await pilot.pause()
        shown = plain(chart)
        assert "train acc" in shown and "held-out acc" in shown and "weight norm" in shown
        await pilot.press("f")
        await wait_until(pilot, lambda: isinstance(app.screen, FourierScreen), 5, "the Fourier screen")
        view = app.screen.query_one(FourierView)
        await wait_until(pilot, lambda: "top-8 share" in plain(view), 20, "the spectrum")
        assert "p = 11" in plain(view) and "latest" in plain(view)
        await pilot.press("left_curly_bracket")  # the first snapshot: step 1
        await wait_until(pilot, lambda: "step 1 of 6" in plain(view), 20, "the first snapshot's spectrum")
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, FourierScreen), 5, "back to Train")
