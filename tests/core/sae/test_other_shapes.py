"""SAEs on the other two shapes: what CE loss recovered scores, checked against
``transformers``' own models, and a decoder hook of an encoder-decoder refused.

- an encoder-only model (BERT) scores each input token at its own place (its MLM head
  reading the unmasked text);
- an encoder-decoder (Marian), which has no target text, scores its own greedy output,
  teacher-forced (its pad never chosen, as a translator never emits it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from bench.hf_factory import save_marian, save_masked_lm
from tui_lab.core.opening.model_in_hand import open_model
from tui_lab.core.sae.activations import logits_under, scored_text, site_width
from tui_lab.core.sae.errors import SAEError
from tui_lab.core.sae.metrics import ce_losses

pytestmark = pytest.mark.usefixtures("no_network")
IDS = torch.tensor([[5, 9, 14, 22, 31, 8, 40, 17], [7, 3, 19, 26, 11, 8, 12, 30]])


def _identity(act: torch.Tensor) -> torch.Tensor:
    return act


def test_an_encoder_only_model_scores_its_input_in_place(tmp_path: Path) -> None:
    import transformers

    save_masked_lm(tmp_path, "bert", initializer_range=0.3)
    lab = open_model(tmp_path)
    ref = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    scored = scored_text(lab, IDS)
    got = ce_losses(logits_under(lab, scored.ids, "blocks.1.hook_resid_post", scored.target), scored.tokens,
                    _identity, scored.shift)
    with torch.no_grad():
        logits = ref(IDS).logits
    want = float(F.cross_entropy(logits.flatten(0, 1), IDS.flatten()))
    assert got.clean == pytest.approx(want, abs=1e-4)
    assert got.reconstructed == pytest.approx(want, abs=1e-4)  # the identity splices nothing in
    assert got.zero_ablated != pytest.approx(want, abs=1e-2)


@pytest.fixture(scope="module")
def marian(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    folder = tmp_path_factory.mktemp("marian")
    ref = save_marian(folder, init_std=0.3)
    return open_model(folder), ref


def test_an_encoder_decoder_scores_its_own_greedy_output(marian: tuple[Any, Any]) -> None:
    lab, ref = marian
    scored = scored_text(lab, IDS, steps=6)
    pad = ref.config.pad_token_id
    target = torch.full((2, 1), ref.config.decoder_start_token_id)
    with torch.no_grad():
        for _ in range(6):  # the reference's own greedy output, its pad never chosen
            logits = ref(input_ids=IDS, decoder_input_ids=target).logits[:, -1]
            logits[:, pad] = float("-inf")
            target = torch.cat([target, logits.argmax(-1, keepdim=True)], dim=1)
        logits = ref(input_ids=IDS, decoder_input_ids=target[:, :-1]).logits
    assert torch.equal(scored.tokens, target[:, 1:]) and torch.equal(scored.target, target[:, :-1])
    want = float(F.cross_entropy(logits.flatten(0, 1), target[:, 1:].flatten()))
    got = ce_losses(logits_under(lab, scored.ids, "encoder.1.hook_resid_post", scored.target), scored.tokens,
                    _identity, scored.shift)
    assert got.clean == pytest.approx(want, abs=1e-4)
    assert got.zero_ablated > got.clean  # zeroing the encoder's output costs the translation


def test_a_decoder_hook_of_an_encoder_decoder_is_one_line(marian: tuple[Any, Any]) -> None:
    lab, _ = marian
    assert site_width(lab, "encoder.1.hook_resid_post", IDS[:1]) == 32
    with pytest.raises(SAEError, match="train at an encoder"):
        site_width(lab, "decoder.1.hook_resid_post", IDS[:1])
