"""Choosing the next token: greedy, or sampled with temperature, top-k and top-p cuts.

Sampling divides the logits by the temperature, then keeps only some tokens:

- top-k: the k most likely;
- top-p (nucleus): the smallest set of most likely tokens whose probability
  adds up to at least p (Holtzman et al., 2019), so a confident step keeps one
  or two tokens and an unsure one keeps many.

Both cuts apply together (a token must survive each); the kept tokens'
probabilities are renormalised and one is drawn. ``cut_mask`` returns which
tokens survive so the lab can show them.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from tui_lab.core.errors import LabError


def check_sampling(temperature: float, top_k: int, top_p: float) -> None:
    """One-line LabError for settings that cannot be used."""
    if not math.isfinite(temperature):
        raise LabError(f"temperature must be a finite number (0 = greedy), got {temperature}")
    if top_k < 0:
        raise LabError(f"top-k must be >= 0 (0 = all tokens), got {top_k}")
    if not (math.isfinite(top_p) and 0.0 < top_p <= 1.0):
        raise LabError(f"top-p must be in (0, 1] (1 = all tokens), got {top_p}")


def cut_mask(logits: Tensor, temperature: float, top_k: int = 0, top_p: float = 1.0) -> Tensor:
    """Boolean (..., V): True where a token survives the cuts. Greedy keeps only the argmax.

    Top-p keeps token i (in order of probability) while the mass of the tokens
    before it is below p: the most likely token always survives.
    """
    if temperature <= 0:
        return torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, logits.argmax(-1, keepdim=True), True)
    scaled = logits.float() / temperature
    keep = torch.ones_like(scaled, dtype=torch.bool)
    if top_k and top_k < scaled.size(-1):
        kth = scaled.topk(top_k, dim=-1).values[..., -1:]
        keep &= scaled >= kth
    if top_p < 1.0:
        probs = scaled.softmax(dim=-1)
        sorted_p, order = probs.sort(dim=-1, descending=True)
        before = sorted_p.cumsum(dim=-1) - sorted_p  # mass of the more likely tokens
        keep_sorted = before < top_p
        keep &= torch.zeros_like(keep).scatter_(-1, order, keep_sorted)
    return keep


def pick(
    logits: Tensor,
    temperature: float,
    top_k: int = 0,
    top_p: float = 1.0,
    gen: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """Next token ids (B,) from last-position logits (B, V), and the cut's mask (B, V)."""
    keep = cut_mask(logits, temperature, top_k, top_p)
    if temperature <= 0:
        return logits.argmax(dim=-1), keep
    scaled = (logits.float() / temperature).masked_fill(~keep, float("-inf"))
    probs = scaled.softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=gen).squeeze(-1), keep
