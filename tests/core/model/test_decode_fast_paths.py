"""Two decoding fast paths: q/k/v weights that lie side by side in one fused tensor
(GPT-2's ``c_attn``, split into views on load) are used as one view, not copied;
and a decoder-only model gives the last position's logits alone when asked.

References are written out here: ``torch.cat`` of the three projections, a
separate-projection attention (``nn.Linear`` modules holding copies of the same
numbers), and the full forward pass's last row.
"""

from __future__ import annotations

import torch
from torch import nn

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.model.attention import KVCache, MultiHeadAttention
from tui_lab.core.model.kv_cache import stacked as _stacked
from tui_lab.core.model.models import DecoderOnly

D, H, T = 16, 4, 7


def fused_views(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    """A Conv1D-style fused (D, 3D) weight and (3D,) bias, and their q, k, v views as GPT-2 maps them."""
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randn(D, 3 * D, generator=gen)  # (in, q|k|v out), as GPT-2 stores it
    bias = torch.randn(3 * D, generator=gen)
    rows = weight.T  # (3D, D), a view
    return weight, bias, [rows[j * D : (j + 1) * D] for j in range(3)], [bias[j * D : (j + 1) * D] for j in range(3)]


def test_adjacent_views_are_stacked_as_a_view_of_the_fused_weight() -> None:
    weight, bias, ws, bs = fused_views()
    stacked, stacked_bias = _stacked(tuple(ws)), _stacked(tuple(bs))
    torch.testing.assert_close(stacked, torch.cat(ws), rtol=0, atol=0)
    torch.testing.assert_close(stacked_bias, torch.cat(bs), rtol=0, atol=0)
    assert stacked.data_ptr() == weight.data_ptr()  # no copy: the fused tensor itself
    assert stacked_bias.data_ptr() == bias.data_ptr()


def test_separate_or_reordered_weights_are_copied_in_order() -> None:
    _, _, ws, _ = fused_views()
    reordered = (ws[1], ws[0], ws[2])  # one storage, but not back to back in this order
    torch.testing.assert_close(_stacked(reordered), torch.cat(reordered), rtol=0, atol=0)
    apart = tuple(torch.randn(D, D) for _ in range(3))
    torch.testing.assert_close(_stacked(apart), torch.cat(apart), rtol=0, atol=0)


def test_a_cached_decode_on_fused_views_matches_separate_projections() -> None:
    weight, bias, ws, bs = fused_views(1)
    mha = MultiHeadAttention(D, H).eval()
    plain = MultiHeadAttention(D, H).eval()  # the same numbers, in separate tensors
    with torch.no_grad():
        for name, w, b in zip(("w_q", "w_k", "w_v"), ws, bs, strict=True):
            getattr(mha, name).weight = nn.Parameter(w, requires_grad=False)
            getattr(mha, name).bias = nn.Parameter(b, requires_grad=False)
            getattr(plain, name).weight.copy_(w)
            getattr(plain, name).bias.copy_(b)
        plain.w_o.load_state_dict(mha.w_o.state_dict())
        x = torch.randn(1, T, D, generator=torch.Generator().manual_seed(2))
        want = plain(x, x, x, is_causal=True)[0]
        cache = KVCache()
        steps = [mha(x[:, :3], x[:, :3], x[:, :3], is_causal=True, cache=cache)[0]]
        for t in range(3, T):
            step = x[:, t : t + 1]
            steps.append(mha(step, step, step, is_causal=True, cache=cache)[0])
    torch.testing.assert_close(torch.cat(steps, dim=1), want, atol=1e-5, rtol=1e-5)
    assert cache.packed is not None and cache.packed[0].data_ptr() == weight.data_ptr()


def test_last_only_logits_are_the_full_passes_last_row() -> None:
    config = ModelConfig(arch="decoder-only", d_model=D, n_heads=H, n_decoder_layers=2, d_ff=32,
                         positional="learned", max_len=16, vocab_size=11)
    torch.manual_seed(0)
    model = DecoderOnly(config, 11).eval()
    tokens = torch.randint(0, 11, (2, T))
    with torch.no_grad():
        full = model(tokens)
        last = model(tokens, last_only=True)
        cache = model.new_cache()
        model(tokens[:, :-1], cache=cache, last_only=True)
        stepped = model(tokens[:, -1:], cache=cache, last_only=True)
    assert last.shape == (2, 1, 11)
    torch.testing.assert_close(last, full[:, -1:], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(stepped, full[:, -1:], atol=1e-5, rtol=1e-5)
