"""The norms a block may use: LayerNorm, RMSNorm, and Gemma's RMSNorm that scales by (1 + w).

LayerNorm (scale and shift) is the paper's and GPT-2's; RMSNorm (a scale only,
no mean subtracted) is Llama's and most later families'. Gemma stores its
scale as an offset from one (``norm_offset: 1``) and computes the norm in
float32 whatever the activations' dtype; ``OffsetRMSNorm`` does the same, so a
bfloat16 model rounds where Gemma does.
"""

from __future__ import annotations

import torch
from torch import nn

from tui_lab.core.config.sections import ModelConfig


class RMSNorm(nn.RMSNorm):
    """``nn.RMSNorm``; for bfloat16 (or half) inputs computed in float32 and rounded
    before the scale, as Llama's and its kin's checkpoints compute it, so a bfloat16
    model rounds where theirs does."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:
            return super().forward(x)
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + float(self.eps or 1e-6))
        return self.weight * h.to(x.dtype)


class OffsetRMSNorm(nn.Module):
    """``x / rms(x) * (offset + weight)``, computed in float32, returned in x's dtype."""

    def __init__(self, width: int, eps: float, offset: float) -> None:
        super().__init__()
        self.eps = eps
        self.offset = offset
        self.weight = nn.Parameter(torch.zeros(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (h * (self.offset + self.weight.float())).to(x.dtype)


def make_norm(config: ModelConfig, width: int | None = None) -> nn.Module:
    """The norm ``config`` asks for over ``width`` features (default d_model)."""
    width = width or config.d_model
    if config.norm_kind == "rmsnorm":
        if config.norm_offset:
            return OffsetRMSNorm(width, config.norm_eps, config.norm_offset)
        return RMSNorm(width, eps=config.norm_eps)
    return nn.LayerNorm(width, eps=config.norm_eps)


def make_qk_norm(config: ModelConfig, width: int) -> nn.Module:
    """The norm of queries and keys (``qk_norm``): an RMSNorm whatever ``norm_kind`` says,
    as in every family that has one (Qwen3, Gemma 3, OLMo-2) and the GPT-2 speedrun;
    Gemma's (1 + w) form where the config's norms have it."""
    if config.norm_kind == "rmsnorm":
        return make_norm(config, width)
    return RMSNorm(width, eps=config.norm_eps)
