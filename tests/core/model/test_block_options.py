"""Block options real checkpoints need: activations, RMSNorm, the gated
feed-forward, the parallel residual, bias switches, and how a ``ModelConfig``
turns them (and per-layer windows, unscaled embeddings) into a model.

References are the formulas written out here, or ``torch.nn`` modules given
the same weights; never this code's output.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tui_lab.core.config.error import ConfigError
from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.model.layers import FeedForward, TransformerBlock, make_norm
from tui_lab.core.model.models import build_model
from tui_lab.core.model.params import parameter_report

D, FF = 16, 24


def perturb(module: nn.Module, seed: int = 0) -> nn.Module:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.3)
    return module.eval()


def x_input(t: int = 5) -> torch.Tensor:
    return torch.randn(2, t, D, generator=torch.Generator().manual_seed(3)) * 2


HAND_ACTIVATIONS = {
    "relu": lambda x: x.clamp(min=0),
    "gelu": lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2))),
    # GPT-2's gelu_new, as its paper's tanh approximation
    "gelu_tanh": lambda x: 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    "silu": lambda x: x / (1 + torch.exp(-x)),
}


@pytest.mark.parametrize("activation", sorted(HAND_ACTIVATIONS))
def test_feed_forward_activation_by_formula(activation) -> None:
    ff = perturb(FeedForward(D, FF, activation=activation))
    x = x_input()
    want = ff.lin2.weight @ HAND_ACTIVATIONS[activation](ff.lin1.weight @ x[..., None] + ff.lin1.bias[:, None])
    want = want[..., 0] + ff.lin2.bias
    torch.testing.assert_close(ff(x), want, atol=1e-5, rtol=1e-5)


def block_config(**options) -> ModelConfig:
    """A block's sizes (D, 4 heads, FF) with ``options``: blocks take the model's config."""
    return ModelConfig(arch="decoder-only", **{**dict(d_model=D, n_heads=4, d_ff=FF), **options})


def test_gated_feed_forward_is_llamas_mlp() -> None:
    ff = perturb(FeedForward(D, FF, activation="silu", gated=True, bias=False))
    assert {n for n, _ in ff.named_parameters()} == {"lin1.weight", "lin2.weight", "gate.weight"}
    x = x_input()
    gate, up, down = ff.gate.weight, ff.lin1.weight, ff.lin2.weight
    g = x @ gate.T
    want = ((g / (1 + torch.exp(-g))) * (x @ up.T)) @ down.T  # down(silu(gate(x)) * up(x))
    torch.testing.assert_close(ff(x), want, atol=1e-5, rtol=1e-5)


def test_rmsnorm_by_formula() -> None:
    norm = perturb(make_norm(block_config(norm_kind="rmsnorm", norm_eps=1e-6)))
    assert [n for n, _ in norm.named_parameters()] == ["weight"]  # a scale, no shift
    x = x_input()
    want = x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6) * norm.weight
    torch.testing.assert_close(norm(x), want, atol=1e-6, rtol=1e-6)


def test_layernorm_eps_is_set() -> None:
    norm = make_norm(block_config(norm_eps=0.25))
    assert isinstance(norm, nn.LayerNorm) and norm.eps == 0.25
    x = x_input()
    torch.testing.assert_close(norm(x), F.layer_norm(x, (D,), eps=0.25))


def torch_block_parts(layer: TransformerBlock) -> tuple[nn.MultiheadAttention, nn.LayerNorm, nn.LayerNorm]:
    """``torch.nn.MultiheadAttention`` and LayerNorms carrying the layer's weights."""
    mha = nn.MultiheadAttention(D, 4, batch_first=True, bias=True)
    a = layer.self_attn
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat((a.w_q.weight, a.w_k.weight, a.w_v.weight)))
        mha.in_proj_bias.copy_(torch.cat((a.w_q.bias, a.w_k.bias, a.w_v.bias)))
        mha.out_proj.weight.copy_(a.w_o.weight)
        mha.out_proj.bias.copy_(a.w_o.bias)
    norms = []
    for src in (layer.norm1, layer.norm2):
        n = nn.LayerNorm(D)
        n.load_state_dict(src.state_dict())
        norms.append(n)
    return mha.eval(), norms[0], norms[1]


def test_parallel_residual_against_torch_modules() -> None:
    layer = perturb(TransformerBlock(block_config(activation="gelu", parallel_residual=True)))
    mha, norm1, norm2 = torch_block_parts(layer)
    ff = layer.ff
    assert ff is not None
    x = x_input(6)
    causal = torch.ones(6, 6, dtype=torch.bool).triu(1)  # nn's convention: True = hidden
    h1 = norm1(x)
    attn = mha(h1, h1, h1, attn_mask=causal, need_weights=False)[0]
    mlp = ff.lin2(F.gelu(ff.lin1(norm2(x))))
    want = x + attn + mlp  # both branches read x itself (GPT-NeoX)
    torch.testing.assert_close(layer(x, is_causal=True), want, atol=1e-5, rtol=1e-5)
    sequential = x + attn
    sequential = sequential + ff.lin2(F.gelu(ff.lin1(norm2(sequential))))
    assert not torch.allclose(want, sequential, atol=1e-3)  # the test tells the two apart


def test_parallel_residual_needs_pre_norm() -> None:
    # The config refuses it before any block is built.
    with pytest.raises(ConfigError, match="norm: pre"):
        TransformerBlock(block_config(norm="post", parallel_residual=True))


def test_ff_bias_off_removes_the_feed_forward_biases() -> None:
    layer = TransformerBlock(block_config(ff_bias=False, gated_ff=True))
    names = {n for n, _ in layer.named_parameters() if n.startswith("ff.")}
    assert names == {"ff.lin1.weight", "ff.lin2.weight", "ff.gate.weight"}


def decoder_only(**options) -> ModelConfig:
    sizes = dict(d_model=D, n_heads=4, n_decoder_layers=2, d_ff=FF, max_len=32, vocab_size=40)
    return ModelConfig(arch="decoder-only", **{**sizes, **options})


def test_config_options_reach_every_block() -> None:
    cfg = decoder_only(
        norm_kind="rmsnorm", norm_eps=1e-6, gated_ff=True, activation="silu", n_kv_heads=2,
        qkv_bias=False, out_bias=False, ff_bias=False, score_scale=0.5,
        attention_windows=(0, 4), positional="rope", rope_base=500.0, rope_fraction=0.5,
    )
    model = build_model(cfg)
    for i, layer in enumerate(model.decoder.layers):
        a = layer.self_attn
        assert a.n_kv_heads == 2 and a.score_scale == 0.5 and a.window == (0, 4)[i]
        assert a.w_q.bias is None and a.w_o.bias is None
        assert isinstance(layer.norm1, nn.RMSNorm) and layer.norm1.eps == 1e-6
        assert layer.ff.gate is not None and layer.ff.act is F.silu
        assert a.rope is not None and a.rope.dims == 2 and a.rope.base == 500.0
    assert isinstance(model.decoder.norm, nn.RMSNorm)
    names = [n for n, _ in model.named_parameters()]
    assert "decoder.layers.1.ff.gate.weight" in names
    assert not any(n.endswith(".bias") for n in names)


def test_unscaled_embeddings() -> None:
    torch.manual_seed(0)
    model = build_model(decoder_only(scale_embeddings=False, positional="learned", n_decoder_layers=1))
    tokens = torch.tensor([[3, 7]])
    seen = {}
    model.decoder.layers[0].norm1.register_forward_hook(lambda m, args, out: seen.update(x=args[0]))
    model(tokens)
    want = model.tgt_embed.weight[tokens] + model.pos.weight[:2]  # no sqrt(d_model)
    torch.testing.assert_close(seen["x"], want)


def test_windowed_model_decodes_with_the_cache_as_it_runs_whole() -> None:
    cfg = decoder_only(attention_windows=(3, 0), positional="rope")
    torch.manual_seed(0)
    model = perturb(build_model(cfg))
    tokens = torch.randint(0, 40, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        whole = model(tokens)
        cache = model.new_cache()
        steps = [model(tokens[:, :5], cache)] + [model(tokens[:, i : i + 1], cache) for i in range(5, 12)]
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, atol=1e-5, rtol=1e-5)
    global_only = perturb(build_model(decoder_only(positional="rope")))
    with torch.no_grad():
        assert not torch.allclose(global_only(tokens), whole, atol=1e-3)


OPTION_SETS = [
    {},
    {"n_kv_heads": 1},
    {"n_kv_heads": 2, "qkv_bias": False},
    {"out_bias": False, "ff_bias": False},
    {"gated_ff": True},
    {"gated_ff": True, "ff_bias": False, "norm_kind": "rmsnorm"},
    {"norm_kind": "rmsnorm", "positional": "learned", "tie_embeddings": False},
]


@pytest.mark.parametrize("options", OPTION_SETS)
def test_estimated_params_bound_the_real_count_and_follow_the_options(options) -> None:
    cfg = decoder_only(**options)
    with torch.device("meta"):
        real = sum(p.numel() for p in build_model(cfg).parameters())
    assert parameter_report(cfg, 40).total == real
    assert real <= cfg.estimated_params()
    base = decoder_only()
    with torch.device("meta"):
        base_real = sum(p.numel() for p in build_model(base).parameters())
    # Fewer parameters give a smaller estimate, more a larger one (the estimate
    # already counts a learned table and an untied head in its upper bound).
    if "positional" in options or "tie_embeddings" in options:
        return
    if real < base_real:
        assert cfg.estimated_params() < base.estimated_params()
    elif real > base_real:
        assert cfg.estimated_params() > base.estimated_params()


def test_params_report_has_the_gate_and_rmsnorm_rows() -> None:
    cfg = decoder_only(gated_ff=True, norm_kind="rmsnorm", ff_bias=False)
    rows = {r.name: r.params for r in parameter_report(cfg, 40).rows}
    assert rows["decoder.0.ff"] == 3 * D * FF  # gate, up (lin1), down (lin2)
    assert rows["decoder.0.norms"] == 2 * D  # two RMSNorm scales
    assert rows["decoder.norm"] == D


def test_window_caps_the_attention_flops() -> None:
    full = parameter_report(decoder_only(), 40, context_len=32)
    local = parameter_report(decoder_only(attention_windows=(8, 0)), 40, context_len=32)
    # 4 C d per attention module per token; layer 0 now reads 8 keys instead of 32.
    assert full.infer_flops_per_token - local.infer_flops_per_token == 4 * (32 - 8) * D
