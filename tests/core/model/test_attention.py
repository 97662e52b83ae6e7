"""Scaled dot-product attention, masks, KV cache and multi-head attention.

Expected values come from the formula worked by hand (plain Python) or from
``torch.nn.MultiheadAttention`` given the same weights, never from this code.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from tui_lab.core.model.attention import (
    KVCache,
    MultiHeadAttention,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
)
from tui_lab.core.model.hook_points import using_hooks

Q = [[0.8, 0.2], [0.5, 0.6], [0.1, 0.9]]
K = [[0.9, 0.1], [0.4, 0.7], [0.2, 0.8]]
V = [[0.5, 0.1], [0.4, 0.8], [0.9, 0.3]]


def test_tutorial_worked_example_by_hand() -> None:
    # Q K^T, then / sqrt(d_k), row softmax, weighted sum of V: plain Python.
    d_k = 2
    qk = [[sum(qi * ki for qi, ki in zip(q, k, strict=True)) for k in K] for q in Q]
    assert qk[0] == pytest.approx([0.74, 0.46, 0.32])  # 0.8*0.9+0.2*0.1, ...
    scaled = [[s / math.sqrt(d_k) for s in row] for row in qk]
    weights = []
    for row in scaled:
        exps = [math.exp(s) for s in row]
        weights.append([e / sum(exps) for e in exps])
    expected_out = [
        [sum(w * v[j] for w, v in zip(row, V, strict=True)) for j in range(2)] for row in weights
    ]

    out, w = scaled_dot_product_attention(
        torch.tensor(Q, dtype=torch.float64),
        torch.tensor(K, dtype=torch.float64),
        torch.tensor(V, dtype=torch.float64),
    )
    assert w.shape == (3, 3) and out.shape == (3, 2)
    for i in range(3):
        assert w[i].tolist() == pytest.approx(weights[i], abs=1e-6)
        assert out[i].tolist() == pytest.approx(expected_out[i], abs=1e-6)
        assert float(w[i].sum()) == pytest.approx(1.0, abs=1e-12)


def test_any_leading_dims_match_a_loop() -> None:
    torch.manual_seed(0)
    q = torch.randn(2, 3, 4, 5, 8)
    k = torch.randn(2, 3, 4, 6, 8)
    v = torch.randn(2, 3, 4, 6, 7)
    mask = torch.rand(5, 6) > 0.3
    mask[:, 0] = True
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert out.shape == (2, 3, 4, 5, 7) and w.shape == (2, 3, 4, 5, 6)
    for idx in [(0, 0, 0), (1, 2, 3), (0, 1, 2)]:
        scores = q[idx] @ k[idx].T / math.sqrt(8)
        scores[~mask] = float("-inf")
        ref_w = scores.softmax(-1)
        torch.testing.assert_close(w[idx], ref_w)
        torch.testing.assert_close(out[idx], ref_w @ v[idx])


def test_causal_mask_shape_and_cache_offset() -> None:
    m = causal_mask(3)
    assert m.dtype == torch.bool
    assert m.tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    # Two new queries after three cached keys sit at positions 3 and 4.
    m = causal_mask(2, 5)
    assert m.tolist() == [[True, True, True, True, False], [True, True, True, True, True]]


def test_causal_future_does_not_leak_and_weights_are_exactly_zero() -> None:
    torch.manual_seed(1)
    q, k, v = (torch.randn(2, 3, 6, 4) for _ in range(3))
    mask = causal_mask(6)
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert bool((w[..., ~mask] == 0).all())
    k2, v2 = k.clone(), v.clone()
    k2[..., 4:, :] = torch.randn(2, 3, 2, 4) * 10
    v2[..., 4:, :] = torch.randn(2, 3, 2, 4) * 10
    out2, _ = scaled_dot_product_attention(q, k2, v2, mask)
    torch.testing.assert_close(out2[..., :4, :], out[..., :4, :], rtol=0, atol=0)
    assert not torch.allclose(out2[..., 4:, :], out[..., 4:, :])


def test_padding_mask_hides_pad_keys() -> None:
    tokens = torch.tensor([[5, 6, 7, 0, 0], [5, 6, 7, 8, 9]])
    mask = padding_mask(tokens, pad_id=0)
    assert mask.shape == (2, 1, 1, 5) and mask.dtype == torch.bool
    assert mask[0, 0, 0].tolist() == [True, True, True, False, False]
    torch.manual_seed(2)
    q = torch.randn(2, 2, 5, 4)
    k, v = torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4)
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert bool((w[0, :, :, 3:] == 0).all())
    k2, v2 = k.clone(), v.clone()
    k2[0, :, 3:] = 100.0
    v2[0, :, 3:] = -100.0
    out2, _ = scaled_dot_product_attention(q, k2, v2, mask)
    torch.testing.assert_close(out2, out, rtol=0, atol=0)


def test_fully_masked_rows_give_zeros_not_nan() -> None:
    torch.manual_seed(3)
    q = torch.randn(2, 4, 3, requires_grad=True)
    k, v = torch.randn(2, 5, 3), torch.randn(2, 5, 3)
    mask = torch.ones(4, 5, dtype=torch.bool)
    mask[1] = False  # query 1 may attend nothing
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert not torch.isnan(out).any() and not torch.isnan(w).any()
    assert bool((w[:, 1] == 0).all()) and bool((out[:, 1] == 0).all())
    out.sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()
    # Every row masked: everything is zero.
    out, w = scaled_dot_product_attention(q, k, v, torch.zeros(4, 5, dtype=torch.bool))
    assert bool((out == 0).all()) and bool((w == 0).all())


def test_mha_fused_path_fully_masked_rows_are_finite() -> None:
    torch.manual_seed(4)
    mha = MultiHeadAttention(8, 2).eval()
    x = torch.randn(2, 4, 8)
    mask = torch.ones(2, 1, 1, 4, dtype=torch.bool)
    mask[1] = False  # the whole second sequence is padding
    fused, _ = mha(x, x, x, mask)
    explicit, w = mha(x, x, x, mask, need_weights=True)
    assert torch.isfinite(fused).all() and torch.isfinite(explicit).all()
    assert bool((w[1] == 0).all())
    torch.testing.assert_close(fused, explicit)


def _copy_from_torch(ours: MultiHeadAttention, ref: nn.MultiheadAttention) -> None:
    d = ours.d_model
    with torch.no_grad():
        for i, lin in enumerate((ours.w_q, ours.w_k, ours.w_v)):
            lin.weight.copy_(ref.in_proj_weight[i * d : (i + 1) * d])
            lin.bias.copy_(ref.in_proj_bias[i * d : (i + 1) * d])
        ours.w_o.weight.copy_(ref.out_proj.weight)
        ours.w_o.bias.copy_(ref.out_proj.bias)


@pytest.fixture
def pair() -> tuple[MultiHeadAttention, nn.MultiheadAttention]:
    torch.manual_seed(5)
    ref = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    with torch.no_grad():  # torch zeroes its biases; random ones test the mapping
        ref.in_proj_bias.normal_()
        ref.out_proj.bias.normal_()
    ours = MultiHeadAttention(16, 4).eval()
    _copy_from_torch(ours, ref)
    return ours, ref


def test_mha_matches_torch_self_attention(pair: tuple) -> None:
    ours, ref = pair
    x = torch.randn(3, 7, 16)
    ref_out, ref_w = ref(x, x, x, need_weights=True, average_attn_weights=False)
    out, w = ours(x, x, x, need_weights=True)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, ref_w, atol=1e-5, rtol=1e-5)
    fused, none = ours(x, x, x)
    assert none is None
    torch.testing.assert_close(fused, ref_out, atol=1e-5, rtol=1e-5)


def test_mha_matches_torch_cross_attention_with_padding(pair: tuple) -> None:
    ours, ref = pair
    query, memory = torch.randn(3, 5, 16), torch.randn(3, 8, 16)
    tokens = torch.ones(3, 8, dtype=torch.long)
    tokens[0, 6:] = 0
    tokens[2, 3:] = 0
    allowed = padding_mask(tokens, 0)  # True = real token
    ref_out, ref_w = ref(
        query,
        memory,
        memory,
        key_padding_mask=tokens == 0,  # torch: True = hidden
        need_weights=True,
        average_attn_weights=False,
    )
    out, w = ours(query, memory, memory, allowed, need_weights=True)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, ref_w, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        ours(query, memory, memory, allowed)[0], ref_out, atol=1e-5, rtol=1e-5
    )


def test_mha_matches_torch_causal_and_padding(pair: tuple) -> None:
    ours, ref = pair
    x = torch.randn(2, 6, 16)
    tokens = torch.ones(2, 6, dtype=torch.long)
    tokens[1, 4:] = 0
    hidden_future = torch.ones(6, 6, dtype=torch.bool).triu(1)  # torch: True = not allowed
    ref_out, ref_w = ref(
        x,
        x,
        x,
        attn_mask=hidden_future,
        key_padding_mask=tokens == 0,
        need_weights=True,
        average_attn_weights=False,
    )
    allowed = padding_mask(tokens, 0)
    out, w = ours(x, x, x, allowed, need_weights=True, is_causal=True)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, ref_w, atol=1e-5, rtol=1e-5)
    fused, _ = ours(x, x, x, allowed, is_causal=True)
    torch.testing.assert_close(fused, ref_out, atol=1e-5, rtol=1e-5)
    # is_causal alone (the fused kernel's own causal mode) against an explicit mask.
    ref_causal, _ = ref(x, x, x, attn_mask=hidden_future, need_weights=False)
    torch.testing.assert_close(ours(x, x, x, is_causal=True)[0], ref_causal, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours(x, x, x, causal_mask(6))[0], ref_causal, atol=1e-5, rtol=1e-5)


def test_mha_separate_key_and_value_inputs(pair: tuple) -> None:
    ours, ref = pair
    q, k, v = torch.randn(2, 3, 16), torch.randn(2, 5, 16), torch.randn(2, 5, 16)
    ref_out, _ = ref(q, k, v)
    torch.testing.assert_close(ours(q, k, v)[0], ref_out, atol=1e-5, rtol=1e-5)


def test_mha_rejects_indivisible_heads() -> None:
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(10, 3)


def test_kv_cache_appends_and_static_reuses() -> None:
    cache = KVCache()
    assert cache.length == 0 and not cache.filled
    k1, v1 = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4)
    cache.update(k1, v1)
    k, v = cache.update(torch.randn(1, 2, 1, 4), torch.randn(1, 2, 1, 4))
    assert cache.length == 4 and k.shape == (1, 2, 4, 4)
    torch.testing.assert_close(k[:, :, :3], k1)
    static = KVCache(static=True)
    static.update(k1, v1)
    static.update(k1, v1)
    assert static.length == 3
    cache.reset()
    assert cache.length == 0


def test_incremental_self_attention_with_cache_equals_full_causal() -> None:
    torch.manual_seed(6)
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 7, 16)
    full, full_w = mha(x, x, x, is_causal=True, need_weights=True)
    cache = KVCache()
    # A 3-token prefix, then one token at a time.
    parts = [mha(x[:, :3], x[:, :3], x[:, :3], is_causal=True, cache=cache)[0]]
    for t in range(3, 7):
        xt = x[:, t : t + 1]
        parts.append(mha(xt, xt, xt, is_causal=True, cache=cache)[0])
    torch.testing.assert_close(torch.cat(parts, 1), full, atol=1e-5, rtol=1e-5)
    # Two tokens at once after a cache: the explicit causal mask must be offset.
    cache = KVCache()
    mha(x[:, :4], x[:, :4], x[:, :4], is_causal=True, cache=cache)
    out, w = mha(x[:, 4:6], x[:, 4:6], x[:, 4:6], is_causal=True, cache=cache, need_weights=True)
    torch.testing.assert_close(out, full[:, 4:6], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, full_w[:, :, 4:6, :6], atol=1e-6, rtol=1e-5)
    fused_cache = KVCache()
    mha(x[:, :4], x[:, :4], x[:, :4], is_causal=True, cache=fused_cache)
    fused, _ = mha(x[:, 4:6], x[:, 4:6], x[:, 4:6], is_causal=True, cache=fused_cache)
    torch.testing.assert_close(fused, full[:, 4:6], atol=1e-5, rtol=1e-5)


def test_static_cache_cross_attention_ignores_later_key_value() -> None:
    torch.manual_seed(7)
    mha = MultiHeadAttention(8, 2).eval()
    q, memory = torch.randn(1, 2, 8), torch.randn(1, 5, 8)
    expected, _ = mha(q, memory, memory)
    cache = KVCache(static=True)
    mha(q[:, :1], memory, memory, cache=cache)
    garbage = torch.full_like(memory, 1e3)  # reused projections: memory is not read again
    out, _ = mha(q[:, 1:], garbage, garbage, cache=cache)
    torch.testing.assert_close(out, expected[:, 1:], atol=1e-5, rtol=1e-5)


def test_pattern_hook_records_only_while_active() -> None:
    torch.manual_seed(8)
    mha = MultiHeadAttention(8, 2).eval()
    mha.hook_prefix = "encoder.0.attn."
    x = torch.randn(2, 3, 8, requires_grad=True)
    plain, _ = mha(x, x, x)
    calls: list[tuple[str, torch.Tensor]] = []
    with using_hooks([("encoder.0.attn.hook_pattern", lambda w, n: calls.append((n, w.detach())))]):
        captured, w = mha(x, x, x)
    mha(x, x, x)  # outside the block: nothing more is recorded
    assert w is None  # a hook does not widen the return value
    assert [n for n, _ in calls] == ["encoder.0.attn.hook_pattern"]
    assert calls[0][1].shape == (2, 2, 3, 3)
    want = torch.softmax((mha.split_heads(mha.w_q(x)) @ mha.split_heads(mha.w_k(x)).transpose(-1, -2)) / 2.0, -1)
    torch.testing.assert_close(calls[0][1], want.detach(), atol=1e-6, rtol=1e-6)  # d_head 4: /sqrt(4)
    torch.testing.assert_close(captured, plain, atol=1e-6, rtol=1e-6)


def test_training_dropout_on_weights_is_used_and_eval_is_deterministic() -> None:
    torch.manual_seed(9)
    mha = MultiHeadAttention(16, 4, dropout=0.5)
    x = torch.randn(2, 5, 16)
    mha.train()
    a, _ = mha(x, x, x)
    b, _ = mha(x, x, x)
    assert not torch.allclose(a, b)
    mha.eval()
    torch.testing.assert_close(mha(x, x, x)[0], mha(x, x, x)[0])
