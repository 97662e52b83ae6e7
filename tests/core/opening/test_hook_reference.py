"""Hook points read the activations the references compute: ``transformers``' hidden
states and attentions for each family, ``torch.nn``'s layers (same weights) for the lab's
own decoder-only and encoder-decoder models.

``hidden_states[i + 1]`` is layer i's output (``blocks.{i}.hook_resid_post``), except the
last, which ``transformers`` hands back after the final norm (``ln_final.hook_normalized``).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch import nn

from bench.hf_factory import save_family
from tests.core.model.test_models import PAD, VOCAB, _batch, _map_weights, _randomise
from tui_lab.core.config.lab_config import ModelConfig
from tui_lab.core.model.models import build_model
from tui_lab.core.opening.model_in_hand import open_model

FAMILIES = ["gpt2", "gpt_neox", "llama", "gpt_neo"]


@pytest.fixture(scope="module", params=FAMILIES)
def family(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    folder: Path = tmp_path_factory.mktemp(request.param)
    reference = save_family(folder, request.param, tokenizer=True)
    return open_model(folder), reference


def test_resid_post_is_each_layers_hidden_state(family) -> None:
    lab, reference = family
    tokens = torch.randint(0, 300, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = reference(tokens, output_hidden_states=True).hidden_states
        _, cache = lab.run_with_cache(tokens)
    n = lab.config.model.n_decoder_layers
    assert len(want) == n + 1
    torch.testing.assert_close(cache["blocks.0.hook_resid_pre"], want[0], atol=1e-4, rtol=0)
    for i in range(n - 1):
        torch.testing.assert_close(cache[f"blocks.{i}.hook_resid_post"], want[i + 1], atol=1e-4, rtol=0)
    torch.testing.assert_close(cache["ln_final.hook_normalized"], want[n], atol=1e-4, rtol=0)


def test_pattern_is_each_layers_attention(family) -> None:
    lab, reference = family
    tokens = torch.randint(0, 300, (2, 12), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = reference(tokens, output_attentions=True).attentions
        _, cache = lab.run_with_cache(tokens, names=lambda n: n.endswith("hook_pattern"))
    assert len(cache) == len(want)
    for i, w in enumerate(want):
        got = cache[f"blocks.{i}.attn.hook_pattern"]
        assert got.shape == w.shape  # (batch, head, query, key)
        torch.testing.assert_close(got, w, atol=1e-5, rtol=0)


def _torch_decoder_only(model: nn.Module, d: int, heads: int, ff: int) -> nn.ModuleList:
    """``nn.TransformerEncoderLayer``s (pre-norm) carrying the lab's decoder-only weights."""
    layers = nn.ModuleList()
    for ours in model.decoder.layers:
        ref = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True, norm_first=True)
        _randomise(ref)
        with torch.no_grad():
            for i, lin in enumerate((ours.self_attn.w_q, ours.self_attn.w_k, ours.self_attn.w_v)):
                lin.weight.copy_(ref.self_attn.in_proj_weight[i * d : (i + 1) * d])
                lin.bias.copy_(ref.self_attn.in_proj_bias[i * d : (i + 1) * d])
            ours.self_attn.w_o.load_state_dict(ref.self_attn.out_proj.state_dict())
            ours.ff.lin1.load_state_dict(ref.linear1.state_dict())
            ours.ff.lin2.load_state_dict(ref.linear2.state_dict())
            ours.norm1.load_state_dict(ref.norm1.state_dict())
            ours.norm2.load_state_dict(ref.norm2.state_dict())
        layers.append(ref.train())  # train() with dropout 0: off torch's inference fast path
    return layers


def _cache(model: nn.Module, *inputs: torch.Tensor) -> dict[str, torch.Tensor]:
    from tui_lab.core.model.hook_points import using_hooks

    found: dict[str, torch.Tensor] = {}
    with torch.no_grad(), using_hooks([(lambda _n: True, lambda x, n: found.__setitem__(n, x))]):
        model(*inputs)
    return found


def test_lab_decoder_only_against_torch_layers() -> None:
    torch.manual_seed(3)
    cfg = ModelConfig(arch="decoder-only", d_model=32, n_heads=4, n_decoder_layers=2, d_ff=64, positional="learned")
    model = build_model(cfg, VOCAB).eval()
    refs = _torch_decoder_only(model, 32, 4, 64)
    tokens = torch.randint(1, VOCAB, (2, 7))
    cache = _cache(model, tokens)
    x = model.pos(model.tgt_embed(tokens) * math.sqrt(32))
    causal = nn.Transformer.generate_square_subsequent_mask(7)
    for i, ref in enumerate(refs):
        h = ref.norm1(x)
        _, weights = ref.self_attn(h, h, h, attn_mask=causal, need_weights=True, average_attn_weights=False)
        torch.testing.assert_close(cache[f"blocks.{i}.attn.hook_pattern"], weights.detach(), atol=1e-5, rtol=0)
        x = ref(x, src_mask=causal, is_causal=True)
        torch.testing.assert_close(cache[f"blocks.{i}.hook_resid_post"], x.detach(), atol=1e-4, rtol=0)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor")
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_lab_encoder_decoder_against_torch_transformer(norm: str) -> None:
    torch.manual_seed(4)
    cfg = ModelConfig(d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64, norm=norm)
    model = build_model(cfg, VOCAB, pad_id=PAD).eval()
    ref = nn.Transformer(32, 4, 2, 2, 64, dropout=0.0, batch_first=True, norm_first=norm == "pre")
    _randomise(ref)
    _map_weights(model, ref)
    ref.train()
    src, tgt = _batch()
    cache = _cache(model, src, tgt)
    pad = src == PAD
    x = model.pos(model.src_embed(src) * math.sqrt(32))
    real = (~pad)[..., None].expand_as(x)  # padded source rows are never read
    for i, layer in enumerate(ref.encoder.layers):
        h = layer.norm1(x) if norm == "pre" else x
        _, w = layer.self_attn(h, h, h, key_padding_mask=pad, need_weights=True, average_attn_weights=False)
        torch.testing.assert_close(cache[f"encoder.{i}.attn.hook_pattern"], w.detach(), atol=1e-5, rtol=0)
        x = layer(x, src_key_padding_mask=pad)
        torch.testing.assert_close(cache[f"encoder.{i}.hook_resid_post"][real], x.detach()[real], atol=1e-4, rtol=0)
    memory = ref.encoder.norm(x) if norm == "pre" else x
    y = model.pos(model.tgt_embed(tgt) * math.sqrt(32))
    causal = nn.Transformer.generate_square_subsequent_mask(tgt.size(1))
    for i, layer in enumerate(ref.decoder.layers):
        h = layer.norm1(y) if norm == "pre" else y
        _, w = layer.self_attn(h, h, h, attn_mask=causal, need_weights=True, average_attn_weights=False)
        torch.testing.assert_close(cache[f"decoder.{i}.attn.hook_pattern"], w.detach(), atol=1e-5, rtol=0)
        a = layer.self_attn(h, h, h, attn_mask=causal, need_weights=False)[0]
        mid = y + a if norm == "pre" else layer.norm1(y + a)
        h = layer.norm2(mid) if norm == "pre" else mid
        _, w = layer.multihead_attn(h, memory, memory, key_padding_mask=pad, need_weights=True,
                                    average_attn_weights=False)
        torch.testing.assert_close(cache[f"decoder.{i}.cross_attn.hook_pattern"], w.detach(), atol=1e-5, rtol=0)
        torch.testing.assert_close(cache[f"decoder.{i}.hook_resid_mid"], mid.detach(), atol=1e-4, rtol=0)
        y = layer(y, memory, tgt_mask=causal, tgt_is_causal=True, memory_key_padding_mask=pad)
        torch.testing.assert_close(cache[f"decoder.{i}.hook_resid_post"], y.detach(), atol=1e-4, rtol=0)
