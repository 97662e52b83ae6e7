"""Fill-mask in the lab, by keyboard, on a tiny encoder-only run the fixture trained:
Decode fills the typed masks; Attention, its all-heads view, the atlas, time travel
and ablation take the fill-mask decode the way they take a greedy one.

The weights are this machine's: every number is compared with the core's own
answer on the same weights, never with a fixed value.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, Static

from tests.ui.conftest import TINY_MLM
from tests.ui.helpers import SIZE, decode, open_trained, plain, tiny_app, wait_until
from tui_lab.ui.panes.attention.attention_pane import AttentionPane
from tui_lab.ui.widgets.head_atlas import HeadAtlas
from tui_lab.ui.widgets.head_grid import HeadGrid
from tui_lab.ui.widgets.heatmap import Heatmap
from tui_lab.ui.widgets.text_table import TextTable

ENCODER_PATTERNS = {"self", "previous", "next", "first", "separator", "broad"}


def mlm_app(run: Path):  # type: ignore[no-untyped-def]
    return tiny_app(run_dir=str(run), preset=str(TINY_MLM))


def core_fill(run: Path, text: str):  # type: ignore[no-untyped-def]
    """The core's fill-mask of ``text`` on the run's saved weights, apart from the lab."""
    from tui_lab.core.decoding.fill_mask import fill_mask
    from tui_lab.core.opening.from_run import load_for_inference

    loaded = load_for_inference(run)
    return fill_mask(loaded.model, loaded.task, text, top_k=5)


async def test_fill_mask_by_keyboard(mlm_run: Path) -> None:
    app = mlm_app(mlm_run)
    async with app.run_test(size=SIZE) as pilot:
        await open_trained(pilot)
        await pilot.press("3")
        hint = plain(app.query_one("#decode-output", Static))
        assert "fills masks" in hint and "with _ where" in hint
        pane = await decode(pilot, "th_ cat s_t")
        assert plain(pane.query_one("#decode-error", Static)).strip() == ""
        expected = core_fill(mlm_run, "th_ cat s_t")
        result = pane.result
        assert [m.position for m in result.masks] == [2, 9]
        assert [[t for t, _ in m.top] for m in result.masks] == [[t for t, _ in m.top] for m in expected.masks]
        assert result.output == expected.output and "_" not in result.output
        lines = plain(pane.query_one("#decode-output", Static)).splitlines()
        assert lines[0].split(None, 1) == ["input", "th_ cat s_t"]
        assert lines[1].split(None, 1) == ["output", expected.output]
        assert lines[2].startswith("2 masks")
        # One row per mask in text order: _n, the filler it took, its five fillers.
        rows = [r.split() for r in pane.query_one("#decode-steps", TextTable).text.splitlines()]
        mask_rows = [r for r in rows if r and r[0].startswith("_")]
        assert [r[0] for r in mask_rows] == ["_1", "_2"]
        taken = {s.position: s.token for s in expected.steps}
        for row, mask in zip(mask_rows, expected.masks, strict=True):
            assert row[1].startswith(taken[mask.position].replace(" ", "␣"))
            assert len(row) == 1 + 2 * 6  # the filler taken and five candidates, each "piece pct%"
        # The fills in the order they were made (most confident first), each with its text.
        fills = plain(pane.query_one("#decode-fills", Static)).splitlines()
        assert fills[0].startswith("fill steps")
        order = {m.position: i for i, m in enumerate(expected.masks, start=1)}
        for line, step in zip(fills[1:], expected.steps, strict=True):
            assert f"_{order[step.position]} @ {step.position} ←" in line and line.endswith(step.text)
        # Attention has it: bidirectional heads, no causal triangle.
        await pilot.press("4")
        attention = app.query_one(AttentionPane)
        assert attention.capture_name == "encoder.0.self" and attention.result is result
        heatmap = attention.query_one(Heatmap)
        assert heatmap.rows == heatmap.cols == result.labels and "⟨mask⟩" in heatmap.rows
        above = [heatmap.weights[i][j] for i in range(len(heatmap.rows)) for j in range(i + 1, len(heatmap.cols))]
        assert all(w > 0 for w in above)  # a key after its query is read: no causal triangle
        header = plain(attention.query_one("#attn-header", Static))
        assert "encoder self" in header and "decoder" not in header


async def test_text_without_a_mask_is_one_line(mlm_run: Path) -> None:
    app = mlm_app(mlm_run)
    async with app.run_test(size=SIZE) as pilot:
        await open_trained(pilot)
        pane = await decode(pilot, "the cat")
        message = plain(pane.query_one("#decode-error", Static)).strip()
        assert message.startswith("↳ no mask in the input: write _ where") and "\n" not in message
        assert app.focused is pane.query_one("#decode-input", Input)
        assert pane.result is None


async def test_all_heads_atlas_time_travel_and_ablation(mlm_run: Path) -> None:
    app = mlm_app(mlm_run)
    async with app.run_test(size=SIZE) as pilot:
        await open_trained(pilot)
        pane = await decode(pilot, "th_ cat")
        await pilot.press("4", "a")  # all heads, bertviz's model view: every head of the layer
        attention = app.query_one(AttentionPane)
        assert attention.query_one(HeadGrid).display and "all 2 heads" in plain(attention.query_one(HeadGrid))
        atlas = attention.query_one(HeadAtlas)
        await wait_until(pilot, lambda: atlas.heads is not None or atlas.error is not None, 60, "the atlas")
        assert atlas.error is None
        assert sorted(h.label for h in atlas.heads) == [f"encoder.{L}.self:{h}" for L in (0, 1) for h in (0, 1)]
        assert {h.best for h in atlas.heads} <= ENCODER_PATTERNS  # an encoder's patterns, scored on text
        assert any(line.startswith("probe text (") for line in atlas.probe_lines)
        await pilot.press("l")
        assert attention.capture_name == "encoder.1.self"
        await pilot.press("w")  # the walkthrough of one row of the fill's attention
        from tui_lab.ui.widgets.walkthrough_view import WalkthroughView

        walk_view = attention.query_one(WalkthroughView)
        await wait_until(pilot, lambda: attention.projections is not None, 30, "q, k and v")
        await pilot.pause()
        row = attention.query_one(Heatmap).cursor[0]
        weights = attention.result.attention["encoder.1.self"][attention.head_index, row].tolist()
        from tui_lab.core.analysis.basics.walkthrough import walk

        walked = walk(attention.projections["encoder.1.self"], attention.result, "encoder.1.self",
                      attention.head_index, row)
        assert walked.weights == pytest.approx(weights, abs=1e-5) and not any(walked.masked)
        assert walk_view.display
        await pilot.press("w", "a")
        # Time travel: the same masks filled by a history snapshot's weights.
        await pilot.press("{")
        travel = app.travel
        await wait_until(pilot, lambda: travel.shown_result is not None, 30, "the first snapshot")
        first = travel.shown_result
        assert hasattr(first, "masks") and attention.result is first and first.input == "th_ cat"
        await pilot.press("}")
        await wait_until(pilot, lambda: travel.shown_result is not first, 30, "the last snapshot")
        # A head switched off: the masks are filled again without it.
        await pilot.press("x")
        await wait_until(pilot, lambda: pane.result is not first and "ablated" in plain(
            attention.query_one("#attn-header", Static)), 30, "the ablated decode")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert hasattr(pane.result, "masks")
        assert "ablated: encoder.1.self:0" in plain(pane.query_one("#decode-output", Static))


async def test_the_logit_lens_of_a_fill(mlm_run: Path) -> None:
    """v on a fill-mask decode: each encoder layer's top filler at each mask, the core's lens
    of the same weights; the last layer's row is the fill's own first choice."""
    from tui_lab.core.analysis.lenses.logit_lens import fill_lens
    from tui_lab.core.opening.from_run import load_for_inference
    from tui_lab.ui.widgets.lens_table import LensView

    app = mlm_app(mlm_run)
    async with app.run_test(size=SIZE) as pilot:
        await open_trained(pilot)
        pane = await decode(pilot, "the c_t sat")
        pane.focus()
        await pilot.press("v")
        view = pane.query_one("#decode-lens", LensView)
        await wait_until(pilot, lambda: "encoder.0" in view.text, 30, "the lens")
        loaded = load_for_inference(mlm_run)
        lens = fill_lens(loaded.model, loaded.task, pane.result)
        assert lens.steps == ["_1@5"] and len(lens.rows) == len(lens.layers)
        assert lens.rows[-1][0].token == pane.result.masks[0].top[0][0]
        for layer, row in zip(lens.layers, lens.rows, strict=True):
            assert layer in view.text and row[0].token.strip() in view.text
