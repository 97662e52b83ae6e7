"""Pilot tests for the logit lens in the Decode pane (v)."""

from __future__ import annotations

from pathlib import Path

from tests.ui.helpers import SIZE, decode, open_trained, tiny_app, wait_until
from tui_lab.ui.widgets.lens_table import LensView


async def test_v_shows_one_row_per_layer_and_the_last_layer_says_the_output(
    trained_run: Path,
) -> None:
    app = tiny_app(run_dir=str(trained_run))
    async with app.run_test(size=SIZE) as pilot:
        await open_trained(pilot)
        pane = await decode(pilot, "3141")
        view = pane.query_one("#decode-lens", LensView)
        assert not view.display
        await pilot.press("v")
        assert view.display and pane.lens_shown
        await wait_until(pilot, lambda: "decoder.0" in view.text, 30, "the lens")
        lines = [line.split() for line in view.text.splitlines()]
        rows = [w for w in lines if w and w[0].startswith("decoder.")]
        n_layers = pane.run.config.model.n_decoder_layers
        assert [w[0] for w in rows] == [f"decoder.{i}" for i in range(n_layers)]

        # The same lens from the core: the last layer's top tokens are the decoded tokens.
        from tui_lab.core.analysis.lenses.logit_lens import logit_lens

        lens = logit_lens(pane.run.model, pane.run.task, pane.result)
        assert len(lens.rows) == n_layers
        assert [c.token for c in lens.rows[-1]] == [s.token for s in pane.result.steps]
        for cell, step in zip(lens.rows[-1], pane.result.steps, strict=True):
            assert abs(cell.prob - step.prob) < 1e-4
        # The table shows each of them in the last layer's row, step by step.
        last = rows[-1][1:]
        assert [last[2 * i] for i in range(len(pane.result.steps))] == [
            s.token for s in pane.result.steps
        ]

        # A new decode refreshes the lens; v hides it.
        first = pane.result
        await decode(pilot, "27")
        assert pane.result is not first

        def last_row() -> list[str]:
            rows = [w for w in map(str.split, view.text.splitlines()) if w[:1] == ["decoder.0"]]
            return rows[-1][1:] if rows else []

        await wait_until(pilot, lambda: len(last_row()) == 2 * len(pane.result.steps), 30)
        await pilot.press("v")
        assert not view.display and not pane.lens_shown
