"""The loss of a text with heads off (``ablate --model``), against computations written out here."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from tui_lab.core.analysis.heads.ablation import HeadRef, all_heads
from tui_lab.core.analysis.heads.text_ablation import (
    loss_with_heads_off,
    text_importance,
    text_loss,
    text_means,
)
from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.model.models import DecoderOnly

IDS = [0, 5, 9, 0, 3, 7, 5, 9, 0, 3, 1]  # id 0 is an ordinary token of a real vocabulary


@pytest.fixture(scope="module")
def model() -> DecoderOnly:
    torch.manual_seed(0)
    config = ModelConfig(arch="decoder-only", d_model=16, n_heads=2, n_decoder_layers=2,
                         d_ff=32, positional="learned", max_len=32, vocab_size=12)
    return DecoderOnly(config, 12).eval()


def prefix_loss(model: DecoderOnly, ids: list[int]) -> float:
    """-log p(next | prefix) averaged over the text, one prefix at a time."""
    losses = []
    for t in range(1, len(ids)):
        logits = model(torch.tensor([ids[:t]]))[0, -1]
        losses.append(-F.log_softmax(logits, -1)[ids[t]])
    return float(torch.stack(losses).mean())


@torch.no_grad()
def test_the_text_loss_is_the_mean_next_token_loss_of_every_prefix(model: DecoderOnly) -> None:
    assert text_loss(model, IDS) == pytest.approx(prefix_loss(model, IDS), abs=1e-5)


@torch.no_grad()
def test_a_head_off_is_the_model_with_that_heads_output_columns_zeroed(model: DecoderOnly) -> None:
    edited = copy.deepcopy(model)
    w_o = edited.decoder.layers[1].self_attn.w_o
    d_head = 8
    w_o.weight[:, d_head : 2 * d_head] = 0.0  # head 1's slice of the concatenated heads
    expected = prefix_loss(edited, IDS)
    got = loss_with_heads_off(model, IDS, [HeadRef("decoder.1.self", 1)])
    assert got == pytest.approx(expected, abs=1e-5)
    assert got != pytest.approx(text_loss(model, IDS), abs=1e-4)  # the head mattered
    assert text_loss(model, IDS) == pytest.approx(prefix_loss(model, IDS), abs=1e-5)  # restored


@torch.no_grad()
def test_mean_mode_averages_over_every_position_token_zero_included(model: DecoderOnly) -> None:
    outputs = []
    attn = model.decoder.layers[0].self_attn
    handle = attn.w_o.register_forward_pre_hook(lambda _m, args: outputs.append(args[0]))
    model(torch.tensor([IDS]))
    handle.remove()
    expected = outputs[0][0].mean(0).view(2, 8)  # (H, d_head) over all 11 positions
    assert torch.allclose(text_means(model, IDS)["decoder.0.self"], expected, atol=1e-6)


def test_importance_has_one_row_per_head_sorted_by_rise(model: DecoderOnly) -> None:
    seen = []
    table = text_importance(model, IDS, progress=lambda done, total: seen.append((done, total)))
    assert table.baseline == pytest.approx(text_loss(model, IDS), abs=1e-6)
    assert sorted(r.head for r in table.rows) == sorted(str(h) for h in all_heads(model))
    rises = [r.rise for r in table.rows]
    assert rises == sorted(rises, reverse=True)
    for r in table.rows:
        assert r.rise == pytest.approx(r.loss - table.baseline, abs=1e-9)
    assert seen[-1] == (4, 4) and table.n_tokens == len(IDS) - 1
