"""The two Transformer blocks and the position-wise feed-forward network.

Each sub-layer (self-attention, cross-attention, feed-forward) sits in a
residual connection with a LayerNorm, in one of two arrangements:

- post-LN (the original paper, ``norm_first=False``): ``x = norm(x + sublayer(x))``;
- pre-LN (GPT-2 and most modern models, ``norm_first=True``):
  ``x = x + sublayer(norm(x))``, which trains stably without a long warmup but
  needs a final LayerNorm after the last layer (the models add it).

Dropout is applied to each sub-layer's output before it is added back, as in
the paper.

``d_ff = 0`` builds an attention-only block: no feed-forward sub-layer and no
norm for it (``ff`` is None). Attention-only models are the setting in which
induction heads were first described (Olsson et al. 2022).

``BlockOptions`` carries what real checkpoints need beyond that: RMSNorm
(Llama) instead of LayerNorm, a gated feed-forward, the parallel residual of
GPT-NeoX (``x + attn(norm1(x)) + ff(norm2(x))``: both read the same input),
grouped-query attention, a score scale, a local window and bias switches. Its
defaults are the lab's own blocks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from tui_lab.core.model.attention import KVCache, MultiHeadAttention
from tui_lab.core.model.positions import RotaryEmbedding

RopeAngles = tuple[torch.Tensor, torch.Tensor]  # RotaryEmbedding.angles(offset, T)


def maybe_dropout(dropout: nn.Dropout, x: torch.Tensor) -> torch.Tensor:
    """``dropout(x)``, skipping the call where it would return ``x`` unchanged.

    In eval mode, or with p = 0, ``nn.Dropout`` still costs a module call and a
    dispatched op; a decoded token passes 13 of them in a 4-layer model.
    """
    return dropout(x) if dropout.training and dropout.p > 0 else x


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")  # GPT-2's gelu_new


_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,  # exact (erf)
    "gelu_tanh": _gelu_tanh,
    "silu": F.silu,
}


@dataclass(frozen=True)
class BlockOptions:
    """A block's options beyond its sizes (``ModelConfig``'s names; ``window`` is
    this layer's entry of ``attention_windows``). Defaults: the lab's own blocks."""

    norm_kind: str = "layernorm"
    norm_eps: float = 1e-5
    gated_ff: bool = False
    ff_bias: bool = True
    parallel_residual: bool = False
    n_kv_heads: int | None = None
    qkv_bias: bool = True
    out_bias: bool = True
    score_scale: float | None = None
    window: int = 0


DEFAULT_OPTIONS = BlockOptions()


def make_norm(d_model: int, options: BlockOptions = DEFAULT_OPTIONS) -> nn.LayerNorm | nn.RMSNorm:
    """The norm ``options`` ask for: LayerNorm (scale and shift) or RMSNorm (scale only)."""
    if options.norm_kind == "rmsnorm":
        return nn.RMSNorm(d_model, eps=options.norm_eps)
    return nn.LayerNorm(d_model, eps=options.norm_eps)


def make_attention(
    d_model: int, n_heads: int, dropout: float, rope: RotaryEmbedding | None, options: BlockOptions
) -> MultiHeadAttention:
    """A block's attention with the options' heads, biases, scale and window."""
    return MultiHeadAttention(
        d_model,
        n_heads,
        dropout,
        rope=rope,
        n_kv_heads=options.n_kv_heads,
        qkv_bias=options.qkv_bias,
        out_bias=options.out_bias,
        score_scale=options.score_scale,
        window=options.window,
    )


class FeedForward(nn.Module):
    """``lin2(dropout(act(lin1(x))))``: the same two-layer MLP at every position.

    ``gated``: ``lin2(dropout(act(gate(x)) * lin1(x)))`` (Llama's gate, up and
    down projections are ``gate``, ``lin1`` and ``lin2``).
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str = "relu",
        gated: bool = False,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(_ACTIVATIONS)}, got {activation!r}")
        self.lin1 = nn.Linear(d_model, d_ff, bias=bias)
        self.lin2 = nn.Linear(d_ff, d_model, bias=bias)
        self.gate = nn.Linear(d_model, d_ff, bias=bias) if gated else None
        self.dropout = nn.Dropout(dropout)
        self.act = _ACTIVATIONS[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate is not None:
            h = self.act(self.gate(x)) * self.lin1(x)  # (B, T, d_ff)
        else:
            h = self.act(self.lin1(x))
        return self.lin2(maybe_dropout(self.dropout, h))  # (B, T, d_model)


def _feed_forward(
    d_model: int, d_ff: int, dropout: float, activation: str, options: BlockOptions
) -> FeedForward | None:
    if not d_ff:
        return None
    return FeedForward(d_model, d_ff, dropout, activation, options.gated_ff, options.ff_bias)


class EncoderLayer(nn.Module):
    """Self-attention over the source, then feed-forward (``norm1``, ``norm2``).

    With ``causal=True`` the self-attention is masked to the past: this is the
    block of a decoder-only (GPT-style) model, which has no cross attention.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = True,
        rope: RotaryEmbedding | None = None,
        options: BlockOptions = DEFAULT_OPTIONS,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.parallel = options.parallel_residual
        if self.parallel and not norm_first:
            raise ValueError("a parallel residual needs pre-norm (norm_first=True)")
        self.self_attn = make_attention(d_model, n_heads, dropout, rope, options)
        self.ff = _feed_forward(d_model, d_ff, dropout, activation, options)
        self.norm1 = make_norm(d_model, options)
        self.norm2 = make_norm(d_model, options) if d_ff else None
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        is_causal: bool = False,
        cache: KVCache | None = None,
        rope_angles: RopeAngles | None = None,
    ) -> torch.Tensor:
        """``x`` (B, T, d_model); ``mask`` broadcastable to (B, H, T, T), True = may attend."""
        drop = self.dropout
        if self.norm_first:
            h = self.norm1(x)
            a = self.self_attn(h, h, h, mask, is_causal=is_causal, cache=cache, rope_angles=rope_angles)[0]
            if self.parallel:  # attention and feed-forward both read the block's input
                out = x + maybe_dropout(drop, a)
                if self.ff is not None and self.norm2 is not None:
                    out = out + maybe_dropout(drop, self.ff(self.norm2(x)))
                return out
            x = x + maybe_dropout(drop, a)
            if self.ff is not None and self.norm2 is not None:
                x = x + maybe_dropout(drop, self.ff(self.norm2(x)))
        else:
            a = self.self_attn(x, x, x, mask, is_causal=is_causal, cache=cache, rope_angles=rope_angles)[0]
            x = self.norm1(x + maybe_dropout(drop, a))
            if self.ff is not None and self.norm2 is not None:
                x = self.norm2(x + maybe_dropout(drop, self.ff(x)))
        return x


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention to the encoder memory, feed-forward.

    Norms: ``norm1`` (self-attention), ``norm2`` (cross-attention), ``norm3``
    (feed-forward). The self-attention is always causal: position t never sees
    later target tokens, which is what lets one forward pass train every
    position at once (teacher forcing).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = True,
        rope: RotaryEmbedding | None = None,
        options: BlockOptions = DEFAULT_OPTIONS,
    ) -> None:
        super().__init__()
        if options.parallel_residual:
            raise ValueError("a parallel residual is for decoder-only blocks")
        self.norm_first = norm_first
        self.self_attn = make_attention(d_model, n_heads, dropout, rope, options)
        # Cross attention reads the whole memory: no window.
        cross = replace(options, window=0)
        self.cross_attn = make_attention(d_model, n_heads, dropout, None, cross)
        self.ff = _feed_forward(d_model, d_ff, dropout, activation, options)
        self.norm1 = make_norm(d_model, options)
        self.norm2 = make_norm(d_model, options)
        self.norm3 = make_norm(d_model, options) if d_ff else None
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        memory_mask: torch.Tensor | None = None,
        self_cache: KVCache | None = None,
        cross_cache: KVCache | None = None,
        rope_angles: RopeAngles | None = None,
    ) -> torch.Tensor:
        """``x`` (B, T, d_model), ``memory`` (B, S, d_model), ``memory_mask`` (B, 1, 1, S)."""
        drop = self.dropout
        if self.norm_first:
            h = self.norm1(x)
            a = self.self_attn(h, h, h, is_causal=True, cache=self_cache, rope_angles=rope_angles)[0]
            x = x + maybe_dropout(drop, a)
            h = self.norm2(x)
            x = x + maybe_dropout(drop, self.cross_attn(h, memory, memory, memory_mask, cache=cross_cache)[0])
            if self.ff is not None and self.norm3 is not None:
                x = x + maybe_dropout(drop, self.ff(self.norm3(x)))
        else:
            a = self.self_attn(x, x, x, is_causal=True, cache=self_cache, rope_angles=rope_angles)[0]
            x = self.norm1(x + maybe_dropout(drop, a))
            a = self.cross_attn(x, memory, memory, memory_mask, cache=cross_cache)[0]
            x = self.norm2(x + maybe_dropout(drop, a))
            if self.ff is not None and self.norm3 is not None:
                x = self.norm3(x + maybe_dropout(drop, self.ff(x)))
        return x
