"""The lab opened on a real model (``LabApp(model_source=folder)``), every pane walked by keyboard.

The folder is a random-weight GPT-2 written by ``transformers``' ``save_pretrained``;
the numbers the panes show (the greedy continuation, the top-5 probabilities, the
attention weights, the loss on the text, the parameter count) are checked against
that reference model, never against the lab's own code.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.ui.helpers import plain, type_text, wait_until
from tests.ui.real_model.helpers import SIZE, model_app, opened
from tui_lab.ui.panes.decode.decode_pane import DecodePane
from tui_lab.ui.widgets.head_atlas import HeadAtlas
from tui_lab.ui.widgets.heatmap import Heatmap
from tui_lab.ui.widgets.importance_view import ImportanceView

TEXT = "The cat sat on the"


def reference_ids(folder: Path, text: str) -> list[int]:
    """``text``'s ids by ``transformers``' own tokenizer of the folder."""
    from transformers import AutoTokenizer

    return list(AutoTokenizer.from_pretrained(folder)(text)["input_ids"])


@torch.no_grad()
def reference_greedy(reference: Any, ids: list[int], n: int) -> list[int]:
    """``generate(do_sample=False)``'s new tokens (it stops at end-of-text, id 0, as the lab does)."""
    out = reference.generate(
        torch.tensor([ids]), max_new_tokens=n, do_sample=False, pad_token_id=0, eos_token_id=0
    )
    return [int(i) for i in out[0, len(ids) :]]


@torch.no_grad()
def reference_loss(reference: Any, ids: list[int]) -> float:
    """Mean next-token cross-entropy of ``ids`` by the reference (nats)."""
    tokens = torch.tensor([ids])
    return float(reference(tokens, labels=tokens).loss)


async def decode_text(pilot: Any, text: str, typed: bool = True) -> DecodePane:
    """3, the text typed in (or, ``typed=False``, put in the field whole: a long text's
    keys would only repeat what the short ones show), Enter; then back out of the field
    so the pane's keys work."""
    await pilot.press("3")
    pane = pilot.app.query_one(DecodePane)
    pane.query_one("#decode-input").value = "" if typed else text
    if typed:
        await type_text(pilot, text)
    await pilot.press("enter")
    await wait_until(pilot, lambda: pane.result is not None, 60, "the decode")
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    return pane


async def test_every_pane_shows_the_opened_model(gpt2_folder: tuple[Path, Any]) -> None:
    """Build its card, Decode its greedy continuation and top-5, Attention its weights on every
    layer and head, Params its parameter count; Train says in one line it cannot train it."""
    folder, reference = gpt2_folder
    app = model_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        assert f"model {folder}" in plain(app.query_one("#status"))
        card = plain(app.query_one("#model-card"))
        assert "family" in card and "gpt2" in card and "model.safetensors" in card
        assert "Read-only" in card and app.query_one("#build-form-col").display is False

        pane = await decode_text(pilot, TEXT)
        ids = reference_ids(folder, TEXT)
        expected = reference_greedy(reference, ids, 32)
        result = pane.result
        assert result.tokens == expected
        vocab = app.opened.task.vocab
        shown = pane.query_one("#decode-steps").text
        assert all(vocab.label(i) in shown for i in expected[:3])
        with torch.no_grad():
            probs = reference(torch.tensor([ids])).logits[0, -1].softmax(-1)
        top_p, top_i = probs.topk(5)
        assert [t for t, _ in result.steps[0].top] == [vocab.label(int(i)) for i in top_i]
        assert [p for _, p in result.steps[0].top] == pytest.approx(top_p.tolist(), abs=1e-5)

        await pilot.press("4")
        heatmap = app.query_one("#heatmap", Heatmap)
        assert app.focused is heatmap
        fed = ids + expected[:-1]
        with torch.no_grad():
            attentions = reference(torch.tensor([fed]), output_attentions=True).attentions
        await pilot.press("down", "down", "down", "right")
        assert heatmap.cursor == (3, 1)
        assert heatmap.value == pytest.approx(float(attentions[0][0, 0, 3, 1]), abs=1e-5)
        await pilot.press("l", "h", "h")  # layer 2, head 3
        header = plain(app.query_one("#attn-header"))
        assert "layer 2/2" in header and "head 3/4" in header
        assert heatmap.value == pytest.approx(float(attentions[1][0, 2, 3, 1]), abs=1e-5)

        await pilot.press("5")
        await pilot.pause()
        totals = plain(app.query_one("#params-totals"))
        assert f"{reference.num_parameters():,}" in totals  # tied head counted once

        await pilot.press("2", "space")
        await pilot.pause()
        assert app.pane("train").state == "idle"
        said = [n.message for n in app._notifications]
        # No text typed under the card in Build: space says where to type one.
        assert any("type a text file under its card" in m for m in said), said
        assert "space fine-tunes it" in plain(app.query_one("#train-status"))

        await pilot.press("6")
        await wait_until(pilot, lambda: app.pane("runs") is not None, 60, "the Runs pane")
        assert app.active_pane == "runs"


async def test_atlas_walkthrough_ablation_importance_and_lens(gpt2_folder: tuple[Path, Any]) -> None:
    """The atlas scores every head on the standard probe; a head switched off reruns the
    continuation and says the loss on the text; the importance table and the lens fill in."""
    folder, reference = gpt2_folder
    app = model_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        await decode_text(pilot, TEXT)
        baseline = reference_loss(reference, reference_ids(folder, TEXT))

        await pilot.press("4", "a")  # every head of the layer, and the atlas
        atlas = app.query_one(HeadAtlas)
        await wait_until(pilot, lambda: atlas.heads is not None or atlas.error, 60, "the atlas")
        assert atlas.error is None
        assert len(atlas.heads) == 8 and {p for h in atlas.heads for p in h.probes.values()} == {"repeat"}
        assert "all 4 heads" in plain(app.query_one("#head-grid"))

        await pilot.press("a", "w")  # one head again, with its walkthrough
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "softmax" in plain(app.query_one("#walkthrough"))

        await pilot.press("x")  # decoder.0.self:0 off: the decode runs again without it
        decode = app.query_one(DecodePane)
        await wait_until(
            pilot, lambda: any("off:" in n for n in decode.result.notes), 60, "the ablated decode"
        )
        note = next(n for n in decode.result.notes if "off:" in n)
        assert "decoder.0.self:0 (zero) off" in note
        on = float(re.search(r"\(([\d.]+) with every head on", note).group(1))
        assert on == pytest.approx(baseline, abs=2e-3)  # printed with 3 decimals

        await pilot.press("X", "i")  # every head back on; the loss rise of each head off
        view = app.query_one(ImportanceView)
        await wait_until(
            pilot, lambda: "nats/token" in plain(view.query_one("#importance-status")), 60, "importance"
        )
        status = plain(view.query_one("#importance-status"))
        assert float(re.search(r"loss ([\d.]+)", status).group(1)) == pytest.approx(baseline, abs=2e-3)
        assert len(view.query_one("#importance-table").text.splitlines()) >= 8

        await pilot.press("3", "escape", "v")  # the logit lens of the decode on show
        await app.workers.wait_for_complete()
        await pilot.pause()
        lens = app.query_one("#decode-lens").text
        assert "decoder" in lens or "layer" in lens
        assert "unavailable" not in lens


async def test_long_text_pages_and_a_text_over_the_context_is_one_line(
    gpt2_folder: tuple[Path, Any],
) -> None:
    """A text near the context (64) fills more rows than the pane has: the heatmap shows a
    window that follows the cursor to the last row; a text over the context gets one line."""
    folder, _ = gpt2_folder
    app = model_app(folder)
    long_text = " ".join(["the cat sat on the mat"] * 4)  # ~24 words, well under 64 tokens
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        pane = await decode_text(pilot, long_text, typed=False)
        n_rows = len(pane.result.attention["decoder.0.self"][0])
        await pilot.press("4")
        heatmap = app.query_one("#heatmap", Heatmap)
        legend = plain(heatmap).splitlines()[-1]
        assert f"of {n_rows}" in legend and "queries 1-" in legend  # a window, from the top
        for _ in range(4):
            await pilot.press("pagedown")
        assert heatmap.cursor[0] == n_rows - 1
        lines = plain(heatmap).splitlines()
        assert f"queries {n_rows - len(lines) + 3}-{n_rows} of {n_rows}" in lines[-1]

        too_long = " ".join(["the cat sat on the mat"] * 20)
        await pilot.press("3")
        pane.query_one("#decode-input").value = too_long
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        error = plain(pane.query_one("#decode-error")).strip()
        assert "this model's context is 64" in error and "\n" not in error


async def test_a_folder_that_cannot_open_is_one_line_and_the_lab_goes_on(tmp_path: Path) -> None:
    """No weights in the folder: one notification, the status bar says so, and the lab
    works on the default preset (Build's form, its parameter report)."""
    folder = tmp_path / "no-weights"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "gpt2"}')
    app = model_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        assert app.opened is None
        errors = [n for n in app._notifications if n.severity == "error"]
        assert len(errors) == 1 and "\n" not in errors[0].message
        assert "failed" in plain(app.query_one("#status"))
        assert app.query_one("#build-form-col").display is True
        assert app.last_report.config.name == app.config.name
        # The preset's YAML, left out while the model's card held its place, is drawn now.
        assert "# what a saved preset holds" in plain(app.query_one("#yaml"))
