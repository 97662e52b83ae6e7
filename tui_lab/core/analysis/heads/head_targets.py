"""The head atlas's target sets: for each query, the keys a pattern says it attends to.

Each function returns a boolean (B, Tq, Tk) tensor; ``head_scores.mass_on``
measures the attention weight a head puts on it. The repeat patterns are for
sequences whose first ``L`` tokens are repeated once right after themselves
(``head_probes.standard_probe``), so the token at q in the repeat,
``L <= q <= 2L - 1``, is a copy of the token at ``q - L``:

- ``duplicate``: from q to its earlier copy, key ``q - L``;
- ``induction``: from q to the token after its earlier copy, key ``q - L + 1``
  (Olsson et al. 2022; TransformerLens's ``detect_head`` uses the same pairs).

``uniform_attention`` is the chance level the label floor is measured against:
the weights a head would have if it spread every row evenly over the keys it
may see.
"""

from __future__ import annotations

import torch


def offset_targets(batch: int, t_q: int, t_k: int, offset: int) -> torch.Tensor:
    """(B, Tq, Tk) bool: query q targets key q - offset (0: diagonal, 1: previous).

    Queries with no such key (q < offset) have no target, so they are not scored.
    """
    q = torch.arange(t_q)[:, None]
    k = torch.arange(t_k)[None, :]
    return (k == q - offset).expand(batch, t_q, t_k)


def first_targets(batch: int, t_q: int, t_k: int) -> torch.Tensor:
    """(B, Tq, Tk) bool: every query targets key 0."""
    out = torch.zeros(batch, t_q, t_k, dtype=torch.bool)
    out[:, :, 0] = True
    return out


def _repeat_offset_targets(lengths: torch.Tensor, t_q: int, t_k: int, shift: int) -> torch.Tensor:
    """(B, Tq, Tk): query q in the repeat (L <= q <= 2L - 1) targets key q - L + shift."""
    q = torch.arange(t_q)[None, :, None]  # (1, Tq, 1)
    k = torch.arange(t_k)[None, None, :]  # (1, 1, Tk)
    length = lengths[:, None, None]  # (B, 1, 1)
    in_repeat = (q >= length) & (q <= 2 * length - 1)
    return in_repeat & (k == q - length + shift)


def induction_targets(lengths: torch.Tensor, t_q: int, t_k: int | None = None) -> torch.Tensor:
    """(B, Tq, Tk) for rows whose first ``lengths[b]`` tokens repeat right after.

    The query at q = L + j holds the block's token j again; its target is the
    token after the first occurrence, j + 1 = q - L + 1 (for the repeat's last
    token, j = L - 1, that is the repeat's own first token, at L).
    """
    return _repeat_offset_targets(lengths, t_q, t_q if t_k is None else t_k, 1)


def duplicate_targets(lengths: torch.Tensor, t_q: int, t_k: int | None = None) -> torch.Tensor:
    """(B, Tq, Tk): the query at q = L + j targets the earlier copy of its token, key j."""
    return _repeat_offset_targets(lengths, t_q, t_q if t_k is None else t_k, 0)


def allowed_keys(
    causal: bool, t_q: int, t_k: int, key_valid: torch.Tensor | None, window: int = 0
) -> torch.Tensor:
    """(B or 1, Tq, Tk) bool: the keys a query may attend to (causal and/or not padding;
    ``window`` > 0: only the last ``window`` keys, itself included, as a local layer sees)."""
    out = torch.ones(1, t_q, t_k, dtype=torch.bool)
    if causal:
        out = out & torch.ones(t_q, t_k, dtype=torch.bool).tril()[None]
    if window > 0:
        out = out & torch.ones(t_q, t_k, dtype=torch.bool).triu(1 - window)[None]
    if key_valid is not None:
        out = out & key_valid[:, None, :t_k]
    return out


def uniform_attention(allowed: torch.Tensor) -> torch.Tensor:
    """(B, 1, Tq, Tk): each row spread evenly over its allowed keys (a chance-level head)."""
    w = allowed.float()
    return (w / w.sum(-1, keepdim=True).clamp_min(1.0))[:, None]
