"""Activations with a known answer: sums of a few unit directions from a fixed dictionary.

The rows come in context order, as a model's do: each "document" of ``doc`` rows
draws its features from a small pool of the dictionary, so rows next to each
other share features. Only a shuffled buffer shows a batch of many documents.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

D_IN, N_DIRECTIONS, ACTIVE = 64, 256, 4


def dictionary(seed: int = 1) -> torch.Tensor:
    """(N_DIRECTIONS, D_IN) random unit directions."""
    g = torch.Generator().manual_seed(seed)
    true = torch.randn(N_DIRECTIONS, D_IN, generator=g)
    return true / true.norm(dim=1, keepdim=True)


def documents(true: torch.Tensor, rows: int, doc: int = 256, pool: int = 8, seed: int = 2,
              noise: float = 0.02) -> Iterator[torch.Tensor]:
    """``rows`` activation rows in chunks of one document, ACTIVE features each, coefficients in [0.5, 2)."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(rows // doc):
        chosen = torch.randperm(N_DIRECTIONS, generator=g)[:pool]
        pick = torch.argsort(torch.rand(doc, pool, generator=g), dim=1)[:, :ACTIVE]
        idx = chosen[pick]  # (doc, ACTIVE)
        coeff = torch.rand(doc, ACTIVE, generator=g) * 1.5 + 0.5
        yield (coeff[..., None] * true[idx]).sum(dim=1) + noise * torch.randn(doc, D_IN, generator=g)


def recovered(true: torch.Tensor, decoder: torch.Tensor, at: float = 0.9) -> float:
    """Share of true directions some decoder row points along at cosine >= ``at``."""
    rows = decoder / decoder.norm(dim=1, keepdim=True)
    return float(((true @ rows.T).max(dim=1).values >= at).float().mean())
