"""An opened BERT in the lab: Decode fills [MASK] as the core does; a bare encoder (no MLM
head) says in one line that it cannot fill masks; Train refuses to fine-tune either."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from bench.hf_factory import save_masked_lm
from tests.ui.helpers import decode, plain
from tests.ui.real_model.helpers import SIZE, model_app, opened


@pytest.fixture(scope="module")
def bert_folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a random-weight BertForMaskedLM folder, a bare BertModel folder)."""
    root = tmp_path_factory.mktemp("bert")
    save_masked_lm(root / "bert", "bert")
    save_masked_lm(root / "bare", "bert", bare=True)
    return root / "bert", root / "bare"


async def test_bert_fills_masks_and_is_not_fine_tuned(bert_folders: tuple[Path, Path]) -> None:
    from tui_lab.core.decoding.fill_mask import fill_mask
    from tui_lab.core.opening.from_files import open_files

    folder = bert_folders[0]
    app = model_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        pane = await decode(pilot, "the cat [MASK] here.")
        loaded = open_files(str(folder), "cpu")
        expected = fill_mask(loaded.model, loaded.task, "the cat [MASK] here.", top_k=5)
        assert [t for t, _ in pane.result.masks[0].top] == [t for t, _ in expected.masks[0].top]
        assert pane.result.output == expected.output
        app.set_focus(None)
        await pilot.press("2", "space")
        await pilot.pause()
        assert "encoder-only (masked-LM) model" in plain(app.query_one("#train-status", Static))
        notes = [n.message for n in app._notifications]
        assert any(m.startswith("cannot fine-tune") and "decoder-only" in m for m in notes), notes


async def test_a_bare_encoder_says_it_cannot_fill_masks(bert_folders: tuple[Path, Path]) -> None:
    """No MLM head: Decode says so, and Enter reads the text for Attention (the attention
    the core captures on the same weights)."""
    import torch

    from tui_lab.core.model.capture import capture_attention
    from tui_lab.core.opening.from_files import open_files

    app = model_app(bert_folders[1])
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        await pilot.press("3")
        assert "no masked-LM head" in plain(app.query_one("#decode-output", Static))
        pane = await decode(pilot, "the cat [MASK] here.")
        shown = plain(pane.query_one("#decode-output", Static))
        assert "cannot fill masks" in shown and "Attention" in shown
        assert plain(pane.query_one("#decode-error", Static)).strip() == ""
        lab = open_files(str(bert_folders[1]))
        ids = lab.task.vocab.encode("the cat [MASK] here.")
        with capture_attention(lab.model) as store, torch.no_grad():
            lab.model(torch.tensor([ids]))
        want = store.matrices()["encoder.1.self"][0]
        got = pane.result.attention["encoder.1.self"]
        torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
        await pilot.press("4")
        await pilot.pause()
        from tui_lab.ui.panes.attention.attention_pane import AttentionPane
        from tui_lab.ui.widgets.heatmap import Heatmap

        attention = app.query_one(AttentionPane)
        assert attention.result is pane.result and attention.capture_name == "encoder.0.self"
        assert attention.query_one(Heatmap).rows == pane.result.labels
