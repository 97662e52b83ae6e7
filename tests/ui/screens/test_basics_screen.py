"""The basics screen: reached with b from any pane, each view by its key, closed with escape;
it draws the lab's config (untrained) or the run Decode uses, and lists itself in help and palette."""

from __future__ import annotations

import math
from pathlib import Path

from textual.widgets import ContentSwitcher, Static

from tests.ui.helpers import SIZE, ready, tiny_app, wait_until
from tui_lab.ui.screens.basics.basics_screen import BasicsScreen
from tui_lab.ui.widgets.heatmap import Heatmap


async def _open(pilot, *keys: str) -> BasicsScreen:  # type: ignore[no-untyped-def]
    await pilot.press(*keys, "b")
    screen = pilot.app.screen
    assert isinstance(screen, BasicsScreen)
    await wait_until(pilot, lambda: screen.data is not None, 60, "the pictures")
    await pilot.pause()
    return screen


async def test_every_view_by_keyboard_on_the_lab_config() -> None:
    app = tiny_app()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        screen = await _open(pilot, "5")  # from the Params pane
        data = screen.data
        assert data is not None and not data.errors
        assert "untrained" in data.label
        switcher = screen.query_one(ContentSwitcher)
        assert switcher.current == "positions"
        table = screen.query_one("#pos-table", Heatmap)  # a ValueHeatmap
        # tiny.yaml: sinusoidal, d_model 16: the heatmap is 16 positions x 16 dims, row 0 = sin 0, cos 0
        assert len(table.rows) == 16 and len(table.cols) == 16
        assert table.weights[0][0] == 0.5 and table.weights[0][1] == 1.0  # (sin 0 + 1) / 2, (cos 0 + 1) / 2
        await pilot.press("down", "right")  # the cursor's readout is the true number: PE[1, 1] = cos(1)
        await pilot.pause()
        readout = str(screen.query_one("#pos-value", Static).render())
        assert readout == f"position 1: PE[1, 1] = {math.cos(1):.4f}"
        for key, view in (("m", "masks"), ("s", "scaling"), ("r", "schedule"), ("p", "positions")):
            await pilot.press(key)
            assert switcher.current == view
        causal = screen.query_one("#mask-1", Heatmap).weights
        assert causal == [[1.0 if j <= i else 0.0 for j in range(len(causal))] for i in range(len(causal))]
        await pilot.press("escape")
        assert not isinstance(app.screen, BasicsScreen)
        assert app.active_pane == "params"


async def test_the_run_decode_uses(trained_run: Path) -> None:
    app = tiny_app(run_dir=trained_run)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await wait_until(pilot, lambda: app.current_run is not None, 60, "the run's model")
        screen = await _open(pilot)
        assert screen.data is not None and "at step 30" in screen.data.label
        await pilot.press("m")
        assert screen.query_one(ContentSwitcher).current == "masks"


def test_help_and_palette_list_it() -> None:
    from tui_lab.ui.app import LabApp
    from tui_lab.ui.palette import lab_commands

    app = LabApp(preset=None, load_core=False)
    sections = dict(app.help_sections())
    assert "Basics" in dict(sections["Everywhere"]).get("b", "")
    assert set(dict(sections["b Basics (over any pane)"])) >= {"p", "m", "s", "r"}
    titles = [c.title for c in lab_commands(app, [], {}, app.run_pane_action)]
    assert {"Basics", "Basics: Positions", "Basics: Masks", "Basics: Scaling", "Basics: Schedule"} <= set(titles)


async def test_the_masks_of_an_encoder_only_model(mlm_run: Path) -> None:
    """Its one mask hides padding (keys after the query are read), a decoder's causal ones
    beside it; the weights row is its first layer's own attention under that mask."""
    import torch

    from tests.ui.conftest import TINY_MLM
    from tui_lab.core.model.capture import capture_attention
    from tui_lab.core.opening.from_run import load_for_inference

    app = tiny_app(run_dir=str(mlm_run), preset=str(TINY_MLM))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await wait_until(pilot, lambda: app.current_run is not None, 60, "the run's model")
        screen = await _open(pilot)
        await pilot.press("m")
        assert screen.query_one(ContentSwitcher).current == "masks"
        data = screen.data
        assert data is not None and "masks" not in data.errors
        m = data.masks
        assert m is not None and m.module == "encoder.0.self"
        n, t = m.batch.lengths[m.row], len(m.labels)
        assert n < t  # the row shown is padded
        padding = screen.query_one("#mask-0", Heatmap).weights
        assert padding == [[1.0 if j < n else 0.0 for j in range(t)] for _ in range(t)]
        causal = screen.query_one("#mask-1", Heatmap).weights
        assert causal == [[1.0 if j <= i else 0.0 for j in range(t)] for i in range(t)]
        titles = [str(screen.query_one(f"#mask-title-{i}", Static).render()) for i in range(3)]
        assert titles == ["encoder (this model): padding only", "a decoder's causal",
                          "a decoder's padding & causal"]
        caption = str(screen.query_one("#mask-caption", Static).render())
        assert "its one mask hides padding" in caption
        # The row after masking is what the model itself computes on the batch.
        loaded = load_for_inference(mlm_run)
        with torch.no_grad(), capture_attention(loaded.model) as store:
            loaded.model.eval()(m.batch.tokens)
        own = store.matrices()["encoder.0.self"][m.row, 0, m.query]  # (T,)
        assert torch.allclose(m.after, own, atol=1e-5)
        assert float(m.after[n:].abs().sum()) == 0.0 and float(m.after[m.query + 1 : n].sum()) > 0
