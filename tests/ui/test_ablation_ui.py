"""Pilot tests for head ablation in the lab: x/m/X in Attention, the rerun decode, the importance table."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static

from tests.ui.helpers import SIZE, plain, tiny_app, wait_until
from tests.ui.test_decode_attention import decode, open_trained
from tui_lab.ui.panes.attention.attention_pane import AttentionPane
from tui_lab.ui.panes.decode.decode_pane import DecodePane
from tui_lab.ui.widgets.importance_view import ImportanceView
from tui_lab.ui.widgets.text_table import TextTable


async def rerun_done(pilot, pane: DecodePane, before: object) -> None:  # type: ignore[no-untyped-def]
    await wait_until(pilot, lambda: pane.result is not before, 30, "the decode to rerun")
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def test_x_ablates_the_head_on_show_and_x_again_restores_it(trained_run: Path) -> None:
    app = tiny_app(run_dir=str(trained_run))
    async with app.run_test(size=SIZE) as pilot:
        await open_trained(pilot)
        pane = await decode(pilot, "3141")
        original = pane.result
        await pilot.press("4")
        attention = app.query_one(AttentionPane)
        while attention.kinds[attention.kind_index][0] != "cross":
            await pilot.press("k")
        assert attention.selected_head == "decoder.0.cross:0"
        assert "ablated" not in plain(attention.query_one("#attn-header", Static))

        await pilot.press("x")
        await rerun_done(pilot, pane, original)
        ablated = pane.result
        assert pane.ablation.heads == ["decoder.0.cross:0"]
        assert "ablated: decoder.0.cross:0 (zero)" in plain(
            attention.query_one("#attn-header", Static)
        )
        assert "ablated: decoder.0.cross:0 (zero)" in plain(
            pane.query_one("#decode-output", Static)
        )
        assert attention.result is ablated  # Attention shows the ablated decode

        # The rerun is the core's decode with that head zeroed (same machine: same tokens).
        from tui_lab.core.analysis.ablation import ablate, parse_head
        from tui_lab.core.decoding.decode import generate

        model = pane.run.model
        with ablate(model, [parse_head("decoder.0.cross:0", model)], "zero"):
            expected = generate(model, pane.run.task, "3141", report_k=5)
        assert ablated.output == expected.output
        assert [s.token for s in ablated.steps] == [s.token for s in expected.steps]
        for got, want in zip(ablated.steps, expected.steps, strict=True):
            assert abs(got.prob - want.prob) < 1e-4
        assert not model.decoder.layers[0].cross_attn.w_o._forward_pre_hooks  # live model untouched

        # A second head: both switched off; m cycles the mode and reruns.
        await pilot.press("h")
        before = pane.result
        await pilot.press("x")
        await rerun_done(pilot, pane, before)
        assert pane.ablation.heads == ["decoder.0.cross:0", "decoder.0.cross:1"]
        before = pane.result
        await pilot.press("m")
        await rerun_done(pilot, pane, before)
        assert pane.ablation.mode == "mean"
        assert "(mean)" in plain(attention.query_one("#attn-header", Static))
        assert "(mean)" in plain(pane.query_one("#decode-output", Static))
        await pilot.press("m")
        assert pane.ablation.mode == "zero"

        # X restores every head: the original output again, no longer marked.
        before = pane.result
        await pilot.press("X")
        await rerun_done(pilot, pane, before)
        assert not pane.ablation.active
        assert pane.result.output == original.output
        assert "ablated" not in plain(pane.query_one("#decode-output", Static))
        assert "ablated" not in plain(attention.query_one("#attn-header", Static))

        # x on, x off: the original output again.
        before = pane.result
        await pilot.press("x")
        await rerun_done(pilot, pane, before)
        before = pane.result
        await pilot.press("x")
        await rerun_done(pilot, pane, before)
        assert not pane.ablation.active and pane.result.output == original.output


async def test_importance_table_has_a_row_per_head_and_a_baseline(trained_run: Path) -> None:
    app = tiny_app(run_dir=str(trained_run))
    async with app.run_test(size=SIZE) as pilot:
        await open_trained(pilot)
        await decode(pilot, "3141")
        await pilot.press("4")
        attention = app.query_one(AttentionPane)
        attention.importance_n = 12
        await pilot.press("i")
        view = attention.query_one(ImportanceView)
        assert view.display
        await wait_until(
            pilot, lambda: "baseline" in plain(view.query_one("#importance-status")), 60
        )
        status = plain(view.query_one("#importance-status"))
        assert "N=12" in status and "zero" in status
        lines = view.query_one("#importance-table", TextTable).text.splitlines()
        heads = sorted(w[0] for w in map(str.split, lines) if w and ":" in w[0])
        assert heads == sorted(
            f"{name}:{h}"
            for name in ("encoder.0.self", "decoder.0.self", "decoder.0.cross")
            for h in range(2)
        )
        # Cached per checkpoint: hidden and shown again, it comes from ablation.json.
        assert (trained_run / "ablation.json").exists()
        await pilot.press("i", "i")
        await wait_until(pilot, lambda: "cached" in plain(view.query_one("#importance-status")), 30)
