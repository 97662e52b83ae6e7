"""The Probes screen: opened with v from Attention on a run, it probes the task's variable at
every layer, the cursor reads the cells, t draws the history heatmap, escape goes back."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static

from tests.ui.helpers import SIZE, ready, tiny_app, wait_until
from tui_lab.core.runs.snapshots import list_snapshots
from tui_lab.ui.screens.probes_screen import ProbesScreen
from tui_lab.ui.widgets.heatmap import Heatmap


async def test_open_from_attention_move_and_see_the_history(learned_run: Path) -> None:
    app = tiny_app(run_dir=str(learned_run))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await wait_until(pilot, lambda: app.current_run is not None, 60, "the run's model")
        await pilot.press("4", "v")
        screen = app.screen
        assert isinstance(screen, ProbesScreen)
        await wait_until(pilot, lambda: screen.table is not None or not screen.busy, 60, "the probes")
        assert screen.table is not None, str(screen.query_one("#probes-status", Static).render())
        table = screen.query_one("#probes-table", Heatmap)
        # learned-copy: one stream of 2 decoder blocks read at layers 0-2; copy's source per answer position and all
        assert table.rows == ["0 pre", "1 pre", "2 post"]
        assert table.cols[-1] == "all" and all(c.startswith("answer ") for c in table.cols[:-1])
        assert "source" in str(screen.query_one("#probes-header", Static).render())
        await pilot.press("down", "down", "end")  # the last layer's pooled probe
        await pilot.pause()
        cell = str(screen.query_one("#probes-cell", Static).render())
        assert cell.startswith("layer 2 (") and ", all: accuracy" in cell and "control" in cell
        await pilot.press("d", "t")  # DAS off: probes only over the history
        await wait_until(pilot, lambda: screen.history is not None or not screen.busy, 120, "the history")
        assert screen.history is not None, str(screen.query_one("#probes-status", Static).render())
        history = screen.query_one("#probes-history", Heatmap)
        steps = list_snapshots(learned_run)
        assert len(history.cols) == min(10, len(steps)) and history.cols[-1] == str(steps[-1])
        assert len(history.rows) == 3
        assert "readable" in str(screen.query_one("#probes-status", Static).render())
        await pilot.press("t", "escape")  # escape first cancels the work under way, the screen stays
        assert isinstance(app.screen, ProbesScreen) and not screen.busy
        assert "cancelled" in str(screen.query_one("#probes-status", Static).render())
        await pilot.press("escape")
        assert not isinstance(app.screen, ProbesScreen)


async def test_s_switches_an_encoder_decoder_to_its_encoder_and_back(learned_run: Path) -> None:
    """learned-copy is an encoder-decoder: s probes the encoder's stream (a row per encoder layer,
    a column per input position of each answer slot), s again the decoder's."""
    from tui_lab.core.analysis.probes.slot_activations import capture, variable_slots
    from tui_lab.core.opening.model_in_hand import open_model
    from tui_lab.core.tasks.variables import find_variable

    app = tiny_app(run_dir=str(learned_run))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await wait_until(pilot, lambda: app.current_run is not None, 60, "the run's model")
        await pilot.press("4", "v")
        screen = app.screen
        assert isinstance(screen, ProbesScreen)
        await wait_until(pilot, lambda: not screen.busy, 60, "the decoder's probes")
        decoder_rows = list(screen.query_one("#probes-table", Heatmap).rows)
        await pilot.press("s")
        assert "in the encoder" in str(screen.query_one("#probes-header", Static).render())
        await wait_until(pilot, lambda: not screen.busy, 60, "the encoder's probes")
        assert screen.table is not None, str(screen.query_one("#probes-status", Static).render())
        # the hooks the core reads in the encoder, computed apart from the screen
        model = open_model(learned_run)
        data = capture(model, variable_slots(model, find_variable(model.task, "source"), 20, 0, "encoder"))
        assert screen.table.hooks == data.hooks and all(h.startswith("encoder.") for h in data.hooks)
        await pilot.press("s")
        assert "in the decoder" in str(screen.query_one("#probes-header", Static).render())
        await wait_until(pilot, lambda: not screen.busy, 60, "the decoder's probes again")
        assert list(screen.query_one("#probes-table", Heatmap).rows) == decoder_rows
