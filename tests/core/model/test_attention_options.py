"""Attention options real checkpoints need: grouped-query heads, a score scale,
local windows and bias switches, on every code path (fused, explicit, KV cache,
packed decoding projection).

The reference is written out here from the formula (a loop over query heads,
an explicit band mask), or torch's own ``F.scaled_dot_product_attention`` with
``enable_gqa``; never this code's output.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tui_lab.core.model.attention import (
    KVCache,
    MultiHeadAttention,
    scaled_dot_product_attention,
    window_mask,
)
from tui_lab.core.model.capture import capture_attention

D, H, T = 16, 4, 9


def perturbed(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Random weights and biases (a zero bias would hide a bias in the wrong slot)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    return module.eval()


def reference(
    mha: MultiHeadAttention, x: torch.Tensor, window: int = 0, scale: float | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal self-attention written out head by head: query head h reads
    key/value head h // (H / H_kv); a key j is seen by query i when
    i - window < j <= i (window 0: every j <= i)."""
    b, t, _ = x.shape
    d_head = D // H
    kv_heads = mha.n_kv_heads
    q = F.linear(x, mha.w_q.weight, mha.w_q.bias).view(b, t, H, d_head)
    k = F.linear(x, mha.w_k.weight, mha.w_k.bias).view(b, t, kv_heads, d_head)
    v = F.linear(x, mha.w_v.weight, mha.w_v.bias).view(b, t, kv_heads, d_head)
    allowed = torch.zeros(t, t, dtype=torch.bool)
    for i in range(t):
        for j in range(t):
            allowed[i, j] = j <= i and (window == 0 or j > i - window)
    s = 1 / math.sqrt(d_head) if scale is None else scale
    outs, weights = [], []
    for h in range(H):
        g = h // (H // kv_heads)
        scores = (q[:, :, h] @ k[:, :, g].transpose(-1, -2)) * s  # (B, T, T)
        w = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        weights.append(w)
        outs.append(w @ v[:, :, g])
    out = torch.cat(outs, dim=-1)  # (B, T, D): heads side by side
    return F.linear(out, mha.w_o.weight, mha.w_o.bias), torch.stack(weights, dim=1)


def make(**options) -> MultiHeadAttention:
    return perturbed(MultiHeadAttention(D, H, **options))


def x_input(seed: int = 1) -> torch.Tensor:
    return torch.randn(2, T, D, generator=torch.Generator().manual_seed(seed))


def decode_stepwise(mha: MultiHeadAttention, x: torch.Tensor, first: int = 3) -> torch.Tensor:
    """A prompt of ``first`` tokens, then one token at a time through a KV cache."""
    cache = KVCache()
    outs = [mha(x[:, :first], x[:, :first], x[:, :first], is_causal=True, cache=cache)[0]]
    for i in range(first, x.size(1)):
        step = x[:, i : i + 1]
        outs.append(mha(step, step, step, is_causal=True, cache=cache)[0])
    return torch.cat(outs, dim=1)


OPTIONS = [
    pytest.param({"n_kv_heads": 2}, id="gqa-2"),
    pytest.param({"n_kv_heads": 1}, id="multi-query"),
    pytest.param({"score_scale": 1.0}, id="scale-1"),
    pytest.param({"window": 3}, id="window-3"),
    pytest.param({"qkv_bias": False, "out_bias": False}, id="no-bias"),
    pytest.param({"qkv_bias": False, "out_bias": True}, id="out-bias-only"),
    pytest.param(
        {"n_kv_heads": 2, "window": 2, "score_scale": 0.7, "qkv_bias": False}, id="all"
    ),
]


@pytest.mark.parametrize("options", OPTIONS)
def test_every_path_matches_the_written_out_formula(options) -> None:
    mha = make(**options)
    x = x_input()
    want, want_w = reference(mha, x, options.get("window", 0), options.get("score_scale"))
    with torch.no_grad():
        fused = mha(x, x, x, is_causal=True)[0]
        explicit, weights = mha(x, x, x, is_causal=True, need_weights=True)
        # Under no_grad a self-attention cache takes the packed q/k/v projection.
        cached = decode_stepwise(mha, x)
    torch.testing.assert_close(fused, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(explicit, want, atol=1e-5, rtol=1e-5)
    assert weights is not None and weights.shape == (2, H, T, T)  # one map per query head
    torch.testing.assert_close(weights, want_w, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(cached, want, atol=1e-5, rtol=1e-5)
    # With gradients on, the cache path projects q, k, v separately: the same numbers.
    torch.testing.assert_close(decode_stepwise(mha, x).detach(), want, atol=1e-5, rtol=1e-5)


def test_grouped_query_matches_torch_enable_gqa() -> None:
    mha = make(n_kv_heads=2)
    x = x_input(2)
    b, d_head = x.size(0), D // H
    q = mha.w_q(x).view(b, T, H, d_head).transpose(1, 2)
    k = mha.w_k(x).view(b, T, 2, d_head).transpose(1, 2)
    v = mha.w_v(x).view(b, T, 2, d_head).transpose(1, 2)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    want = mha.w_o(ref.transpose(1, 2).reshape(b, T, D))
    torch.testing.assert_close(mha(x, x, x, is_causal=True)[0], want, atol=1e-5, rtol=1e-5)


def test_the_cache_keeps_only_the_key_value_heads() -> None:
    mha = make(n_kv_heads=2)
    assert mha.w_k.weight.shape == (2 * D // H, D) and mha.w_v.weight.shape == (2 * D // H, D)
    cache = KVCache()
    x = x_input()
    with torch.no_grad():
        mha(x, x, x, is_causal=True, cache=cache)
    assert cache.k is not None and cache.k.shape == (2, 2, T, D // H)


def test_biases_off_are_absent_parameters() -> None:
    mha = MultiHeadAttention(D, H, qkv_bias=False, out_bias=False)
    names = {n for n, _ in mha.named_parameters()}
    assert names == {"w_q.weight", "w_k.weight", "w_v.weight", "w_o.weight"}


def test_window_mask_by_hand() -> None:
    # 3 new queries after 2 cached keys (positions 2, 3, 4), window 2:
    # position 2 sees keys 1, 2; position 3 sees 2, 3; position 4 sees 3, 4.
    assert window_mask(3, 5, 2).tolist() == [
        [False, True, True, False, False],
        [False, False, True, True, False],
        [False, False, False, True, True],
    ]


def test_windowed_weights_are_zero_outside_the_window_in_capture() -> None:
    mha = make(window=3)
    mha.lab_name = "decoder.0.self"
    x = x_input()
    with torch.no_grad(), capture_attention(mha) as store:
        decode_stepwise(mha, x, first=4)
    w = store.matrices()["decoder.0.self"]  # (B, H, T, T), one row per position
    for i in range(T):
        for j in range(T):
            seen = i - 3 < j <= i
            assert bool((w[:, :, i, j] > 0).all()) == seen, (i, j)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, H, T))


def test_score_scale_in_the_explicit_function() -> None:
    q, k, v = torch.randn(1, 3, 4), torch.randn(1, 5, 4), torch.randn(1, 5, 2)
    _, weights = scaled_dot_product_attention(q, k, v, scale=1.0)
    torch.testing.assert_close(weights, torch.softmax(q @ k.transpose(-1, -2), dim=-1))
    _, default = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(default, torch.softmax(q @ k.transpose(-1, -2) / 2.0, dim=-1))
