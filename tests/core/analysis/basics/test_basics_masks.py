"""The masks picture on a padded batch: the grids against their definitions, the weights row
against the renormalisation written out here and against the weights the model itself computes."""

from __future__ import annotations

import pytest
import torch

from tui_lab.core.analysis.basics.basics_example import fresh_model
from tui_lab.core.analysis.basics.basics_masks import mask_picture
from tui_lab.core.config.presets import load_preset
from tui_lab.core.model.capture import capture_attention


@pytest.mark.parametrize(
    ("arch", "positional"), [("encoder-decoder", "sinusoidal"), ("decoder-only", "rope")]
)
def test_masks_of_a_padded_batch(arch: str, positional: str) -> None:
    config = load_preset("copy").with_values(
        {"model.arch": arch, "model.d_model": 32, "model.n_heads": 2, "model.positional": positional}
    )
    model, task = fresh_model(config)
    picture = mask_picture(model, task, arch, text="12")  # shorter than the examples: padded
    batch = picture.batch
    t = batch.tokens.size(1)
    n = batch.lengths[picture.row]
    assert batch.texts[0] == "12" and n < t == max(batch.lengths)
    for i in range(t):
        for j in range(t):
            assert bool(picture.padding[i, j]) == (j < n)  # a pad is hidden from every query
            assert bool(picture.causal[i, j]) == (j <= i)  # no query sees ahead
            assert bool(picture.combined[i, j]) == (j < n and j <= i)

    q = picture.query
    before, after = picture.before.tolist(), picture.after.tolist()
    allowed = [j < n and j <= q for j in range(t)]
    kept = sum(b for b, ok in zip(before, allowed, strict=True) if ok)
    assert sum(before) == pytest.approx(1.0, abs=1e-5)
    for b, a, ok in zip(before, after, allowed, strict=True):
        # masking = the allowed weights renormalised; the others exactly 0
        assert a == (pytest.approx(b / kept, abs=1e-5) if ok else 0.0)

    # The row after masking is the one the model computes in that layer and head.
    with capture_attention(model) as store, torch.no_grad():
        if batch.src is not None:
            model(batch.src, batch.tokens)
        else:
            model(batch.tokens)
    captured = store.matrices()[picture.module][picture.row, picture.head, q]
    assert picture.module == "decoder.0.self"
    assert captured.tolist() == pytest.approx(after, abs=1e-5)


def test_an_encoder_only_models_row_is_masked_by_padding_alone() -> None:
    """No causal attention: the combined grid is the padding grid, and the row after masking
    is the one the model's first (bidirectional) self-attention computes."""
    config = load_preset("mlm-char").with_values(
        {"model.d_model": 32, "model.n_heads": 2, "model.n_encoder_layers": 1, "model.d_ff": 64}
    )
    model, task = fresh_model(config)
    picture = mask_picture(model, task, "encoder-only", text="the c_t")
    assert picture.encoder and picture.module == "encoder.0.self"
    n, t = picture.batch.lengths[picture.row], picture.batch.tokens.size(1)
    assert n < t and torch.equal(picture.combined, picture.padding)
    assert picture.combined[0].tolist() == [j < n for j in range(t)]  # the first query sees ahead
    with capture_attention(model) as store, torch.no_grad():
        model(picture.batch.tokens)
    captured = store.matrices()[picture.module][picture.row, picture.head, picture.query]
    assert captured.tolist() == pytest.approx(picture.after.tolist(), abs=1e-5)
