"""The lab opened on a Marian translator (``LabApp(model_source=folder)``), walked by keyboard.

The folder is a random-weight ``MarianMTModel`` written by ``save_pretrained`` with its own
SentencePiece tokenizer; the translation and the cross-attention weights the panes show are
checked against that reference model and ``MarianTokenizer``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from bench.hf_factory import save_marian
from tests.ui.helpers import plain, wait_until
from tests.ui.real_model.helpers import SIZE, model_app, opened
from tests.ui.real_model.test_real_model_panes import decode_text
from tui_lab.ui.panes.decode.decode_pane import DecodePane
from tui_lab.ui.widgets.head_atlas import HeadAtlas
from tui_lab.ui.widgets.heatmap import Heatmap

TEXT = "The cat sat on the mat."


@pytest.fixture(scope="module")
def marian_folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    folder = tmp_path_factory.mktemp("real-model") / "tiny-marian"
    return folder, save_marian(folder)


async def test_decode_translates_and_attention_shows_cross_attention(marian_folder) -> None:
    """Decode's greedy translation equals generate(num_beams=1); Attention's cross view has the
    target pieces down the side and the source pieces along the top, its weights the reference's."""
    from transformers import MarianTokenizer

    folder, reference = marian_folder
    tok = MarianTokenizer.from_pretrained(folder)
    src = tok(TEXT, return_tensors="pt").input_ids
    app = model_app(folder)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        card = plain(app.query_one("#model-card"))
        assert "marian" in card and "source.spm" in card

        pane = await decode_text(pilot, TEXT)
        result = pane.result
        n = len(result.tokens)
        with torch.no_grad():
            want = reference.generate(src, num_beams=1, do_sample=False, max_new_tokens=n,
                                      forced_eos_token_id=None, bad_words_ids=[[reference.config.pad_token_id]])
        assert result.tokens == want[0, 1:].tolist()
        assert {"encoder.0.self", "decoder.0.self", "decoder.0.cross"} <= set(result.attention)

        await pilot.press("4")
        heatmap = app.query_one("#heatmap", Heatmap)
        header = plain(app.query_one("#attn-header"))
        for _ in range(3):  # k: encoder self, decoder self, cross
            if "decoder.0.cross" in header:
                break
            await pilot.press("k")
            await pilot.pause()
            header = plain(app.query_one("#attn-header"))
        assert "decoder.0.cross" in header
        queries, keys = result.labels["decoder.0.cross"]
        assert keys == [p.replace("▁", "␣") for p in tok.convert_ids_to_tokens(src[0])]
        assert queries[0] == "<pad>"
        fed = want[:, :-1]
        with torch.no_grad():
            cross = reference(input_ids=src, decoder_input_ids=fed, output_attentions=True).cross_attentions
        await pilot.press("down", "down", "right", "right", "right")
        assert heatmap.cursor == (2, 3)
        assert heatmap.value == pytest.approx(float(cross[0][0, 0, 2, 3]), abs=1e-5)
        shown = plain(heatmap)
        assert keys[3] in shown or keys[3][:3] in shown

        await pilot.press("a")  # every head, and the translator's atlas
        atlas = app.query_one(HeadAtlas)
        await wait_until(pilot, lambda: atlas.heads is not None or atlas.error, 60, "the atlas")
        assert atlas.error is None
        cross_heads = [h for h in atlas.heads if h.name.endswith(".cross")]
        assert len(cross_heads) == 8 and all(set(h.scores) == {"sharp", "monotonic"} for h in cross_heads)

        await pilot.press("a")  # one head again
        decode = app.query_one(DecodePane)
        before = decode.result
        await pilot.press("x")  # switched off: the translation reruns without it
        await wait_until(pilot, lambda: decode.result is not before, 60, "the ablated decode")
        ablated = decode.result
        assert app.ablation.label_of(ablated) == "decoder.0.cross:0 (zero)"
        assert not any("loss on the input" in n for n in ablated.notes)  # a language model's measure

        await pilot.press("X", "3", "escape", "v")  # every head back on; the decoder's logit lens
        await app.workers.wait_for_complete()
        await pilot.pause()
        lens = app.query_one("#decode-lens").text
        assert "unavailable" not in lens and ("decoder" in lens or "layer" in lens)
