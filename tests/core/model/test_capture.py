"""Attention capture: names, shapes, incremental assembly, and no side effects."""

from __future__ import annotations

import pytest
import torch

from tui_lab.core.config.lab_config import ModelConfig
from tui_lab.core.model.capture import AttentionStore, capture_attention
from tui_lab.core.model.hook_points import active_hooks
from tui_lab.core.model.models import EncoderDecoder, build_model

VOCAB = 11


def _model(arch: str, pos: str = "sinusoidal") -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = ModelConfig(
        arch=arch,
        positional=pos,
        d_model=16,
        n_heads=2,
        n_encoder_layers=2,
        n_decoder_layers=3,
        d_ff=32,
    )
    return build_model(cfg, VOCAB).eval()


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.randint(5, VOCAB, (2, 7))
    src[1, 4:] = 0
    return src, torch.randint(5, VOCAB, (2, 5))


def test_encoder_decoder_names_shapes_and_order() -> None:
    model = _model("encoder-decoder")
    src, tgt = _inputs()
    with torch.no_grad(), capture_attention(model) as store:
        model(src, tgt)
    mats = store.matrices()
    assert list(mats) == [
        "encoder.0.self",
        "encoder.1.self",
        "decoder.0.self",
        "decoder.0.cross",
        "decoder.1.self",
        "decoder.1.cross",
        "decoder.2.self",
        "decoder.2.cross",
    ]
    assert mats["encoder.1.self"].shape == (2, 2, 7, 7)
    assert mats["decoder.0.self"].shape == (2, 2, 5, 5)
    assert mats["decoder.2.cross"].shape == (2, 2, 5, 7)
    for w in mats.values():
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
    # Padded source keys get no attention; the decoder never looks ahead.
    assert bool((mats["decoder.1.cross"][1, :, :, 4:] == 0).all())
    assert bool((mats["encoder.0.self"][1, :, :, 4:] == 0).all())
    assert bool((mats["decoder.0.self"].triu(1) == 0).all())


def test_decoder_only_names_and_shapes() -> None:
    model = _model("decoder-only")
    _, tokens = _inputs()
    with torch.no_grad(), capture_attention(model) as store:
        model(tokens)
    mats = store.matrices()
    assert list(mats) == ["decoder.0.self", "decoder.1.self", "decoder.2.self"]
    assert all(w.shape == (2, 2, 5, 5) for w in mats.values())


@pytest.mark.parametrize("arch", ["encoder-decoder", "decoder-only"])
def test_capture_does_not_change_logits(arch: str) -> None:
    model = _model(arch, "rope")
    src, tgt = _inputs()
    run = (lambda: model(src, tgt)) if arch == "encoder-decoder" else (lambda: model(tgt))
    with torch.no_grad():
        plain = run()
        with capture_attention(model):
            captured = run()
    torch.testing.assert_close(captured, plain, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("arch", ["encoder-decoder", "decoder-only"])
def test_incremental_rows_assemble_into_the_full_matrices(arch: str) -> None:
    model = _model(arch, "learned")
    src, tgt = _inputs()
    with torch.no_grad():
        with capture_attention(model) as full:
            model(src, tgt) if isinstance(model, EncoderDecoder) else model(tgt)
        with capture_attention(model) as steps:
            cache = model.new_cache()
            if isinstance(model, EncoderDecoder):
                memory = model.encode(src)
                for t in range(tgt.size(1)):
                    model.decode(tgt[:, t : t + 1], memory, src, cache=cache)
            else:
                for t in range(tgt.size(1)):
                    model(tgt[:, t : t + 1], cache=cache)
    want, got = full.matrices(), steps.matrices()
    assert list(got) == list(want)
    for name in want:
        # Step t recorded one row over t + 1 keys, padded with zeros on the right,
        # which is exactly the causal full-pass matrix.
        torch.testing.assert_close(got[name], want[name], atol=1e-5, rtol=1e-5)


def test_store_pads_shorter_rows_with_zeros() -> None:
    store = AttentionStore()
    store.record("decoder.0.self", torch.ones(1, 2, 1, 1))
    store.record("decoder.0.self", torch.full((1, 2, 2, 3), 0.5))
    m = store.matrices()["decoder.0.self"]
    assert m.shape == (1, 2, 3, 3)
    assert m[0, 0].tolist() == [[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]


def test_nothing_is_recorded_outside_the_context_even_after_an_error() -> None:
    model = _model("encoder-decoder")
    src, tgt = _inputs()
    before = {n: dict(vars(m)) for n, m in model.named_modules()}
    with pytest.raises(RuntimeError, match="boom"), capture_attention(model) as store:
        assert active_hooks() is not None
        raise RuntimeError("boom")
    assert active_hooks() is None
    # Capture sets nothing on the model's modules: their attributes are as they were.
    assert {n: dict(vars(m)) for n, m in model.named_modules()} == before
    with torch.no_grad():
        model(src, tgt)
    assert len(store) == 0 and store.matrices() == {}
