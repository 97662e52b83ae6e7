"""Pilot tests for head ablation in the lab: x/m/X in Attention, the rerun decode, the importance table.

Both run on the committed copy model that has learned its task, where switching a head
off changes what it answers (on a model that never learned, every ablation is a no-op).
"""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static

from tests.ui.helpers import SIZE, decode, open_trained, plain, tiny_app, wait_until
from tui_lab.ui.panes.attention.attention_pane import AttentionPane
from tui_lab.ui.panes.attention.importance_panel import ImportancePanel
from tui_lab.ui.panes.decode.decode_pane import DecodePane
from tui_lab.ui.widgets.importance_view import ImportanceView
from tui_lab.ui.widgets.text_table import TextTable


async def rerun_done(pilot, pane: DecodePane, before: object) -> None:  # type: ignore[no-untyped-def]
    await wait_until(pilot, lambda: pane.result is not before, 30, "the decode to rerun")
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def test_x_ablates_the_head_on_show_and_x_again_restores_it(learned_run: Path) -> None:
    app = tiny_app(run_dir=str(learned_run))
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
        from tui_lab.core.analysis.heads.ablation import ablate, parse_head
        from tui_lab.core.decoding.decode import generate

        model = pane.run.model
        with ablate(model, [parse_head("decoder.0.cross:0", model)], "zero"):
            expected = generate(model, pane.run.task, "3141", report_k=5)
        # Without that head the model no longer copies 3141: the rerun shows what it says then.
        assert expected.output != original.output == "3141"
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


IMPORTANCE_N = 60  # held-out examples per head: enough for the copying head to stand out
LEAD = 0.15  # the largest drop leads the next by at least this (about 0.29 at N=250)


def exact_match_without(run_dir: Path, head: str | None, n: int) -> float:
    """Exact match on the run's ``n`` held-out pairs with ``head`` zeroed by hand (None: none).

    Independent of the core's ablation: the head's columns of its module's output
    projection are set to zero in a fresh copy of the model, so its output adds nothing.
    """
    import torch

    from tui_lab.core.decoding.decode import batch_greedy
    from tui_lab.core.opening.from_run import load_for_inference
    from tui_lab.core.training.evaluate import held_out_pairs

    loaded = load_for_inference(run_dir)
    model = loaded.model
    if head is not None:
        name, index = head.rsplit(":", 1)
        module = next(m for m in model.modules() if getattr(m, "lab_name", None) == name)
        width = module.d_head
        with torch.no_grad():
            module.w_o.weight[:, int(index) * width : (int(index) + 1) * width] = 0.0
    pairs = held_out_pairs(loaded.task, loaded.config.train, n)
    outputs = batch_greedy(
        model,
        loaded.task,
        [x for x, _ in pairs],
        max_new_tokens=loaded.config.sequence_length_needed(),
    )
    return sum(out == want for out, (_, want) in zip(outputs, pairs, strict=True)) / len(pairs)


async def test_importance_puts_the_head_that_copies_first(learned_run: Path) -> None:
    """The first row is the head whose loss costs most exact match, worked out here by hand."""
    app = tiny_app(run_dir=str(learned_run))
    async with app.run_test(size=SIZE) as pilot:
        await open_trained(pilot)
        await decode(pilot, "3141")
        await pilot.press("4")
        attention = app.query_one(AttentionPane)
        attention.query_one(ImportancePanel).n = IMPORTANCE_N
        await pilot.press("i")
        view = attention.query_one(ImportanceView)
        assert view.display
        await wait_until(
            pilot, lambda: "baseline" in plain(view.query_one("#importance-status")), 60
        )
        status = plain(view.query_one("#importance-status"))
        assert f"N={IMPORTANCE_N}" in status and "zero" in status
        lines = view.query_one("#importance-table", TextTable).text.splitlines()
        rows = [w for w in map(str.split, lines) if w and ":" in w[0]]
        heads = [w[0] for w in rows]
        assert sorted(heads) == sorted(
            f"{name}:{h}"
            for name in (
                "encoder.0.self",
                "decoder.0.self",
                "decoder.0.cross",
                "decoder.1.self",
                "decoder.1.cross",
            )
            for h in range(2)
        )

        baseline = exact_match_without(learned_run, None, IMPORTANCE_N)
        drops = {h: baseline - exact_match_without(learned_run, h, IMPORTANCE_N) for h in heads}
        first, second = sorted(drops, key=drops.__getitem__, reverse=True)[:2]
        assert drops[first] - drops[second] >= LEAD, drops  # a clear winner, not a near tie
        assert heads[0] == first, (rows, drops)
        shown_drop = float(rows[0][2].rstrip("%")) / 100  # "+98.3%": the exact match lost
        # Within two examples: the lab decodes the same pairs through the core's ablation hook.
        assert abs(shown_drop - drops[first]) <= 2 / IMPORTANCE_N, (rows[0], drops[first])

        # Cached per checkpoint: hidden and shown again, it comes from ablation.json.
        assert (learned_run / "ablation.json").exists()
        await pilot.press("i", "i")
        await wait_until(pilot, lambda: "cached" in plain(view.query_one("#importance-status")), 30)
