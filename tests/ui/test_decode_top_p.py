"""Pilot test: the Decode pane's top-p control reaches the sampler; a bad value is flagged inline."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input, Static

from tests.ui.helpers import SIZE, plain, tiny_app
from tests.ui.test_decode_attention import decode, open_trained
from tui_lab.ui.panes.decode.decode_pane import DecodePane


async def test_top_p_cut_is_used_and_bad_values_are_flagged(trained_run: Path) -> None:
    app = tiny_app(run_dir=str(trained_run))
    async with app.run_test(size=SIZE) as pilot:
        await open_trained(pilot)
        await pilot.press("3")
        pane = app.query_one(DecodePane)
        await pilot.press("ctrl+t")  # sampling on
        pane.query_one("#temperature", Input).value = "1"
        pane.query_one("#top-p", Input).value = "0.5"
        await decode(pilot, "3141")
        assert pane.result is not None and pane.result.steps
        for step in pane.result.steps:
            assert step.kept and step.kept[0]  # the most likely token always survives
            if step.top[0][1] >= 0.5:  # it alone reaches p: nothing else may be drawn
                assert step.n_kept == 1 and step.token == step.top[0][0]
        pane.query_one("#top-p", Input).value = "2"
        await decode(pilot, "3141")
        assert "top-p in (0, 1]" in plain(pane.query_one("#decode-error", Static))
