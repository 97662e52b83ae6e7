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
"""

from __future__ import annotations

from collections.abc import Callable

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


_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"relu": F.relu, "gelu": F.gelu}


class FeedForward(nn.Module):
    """``lin2(dropout(act(lin1(x))))``: the same two-layer MLP at every position."""

    def __init__(
        self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu"
    ) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be relu or gelu, got {activation!r}")
        self.lin1 = nn.Linear(d_model, d_ff)
        self.lin2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.act = _ACTIVATIONS[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin2(maybe_dropout(self.dropout, self.act(self.lin1(x))))  # (B, T, d_model)


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
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout, rope=rope)
        self.ff = FeedForward(d_model, d_ff, dropout, activation) if d_ff else None
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model) if d_ff else None
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
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout, rope=rope)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout, activation) if d_ff else None
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model) if d_ff else None
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
