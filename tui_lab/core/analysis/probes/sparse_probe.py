"""A k-sparse probe over an SAE's features: can k of its features alone read the variable?

The activations at the SAE's hook are encoded into features (``SparseAutoencoder.encode``);
on the training split, each feature is scored by how far apart its class means lie
against its spread (between-class variance over total variance, Gurnee et al.'s
"sparse probing" ranking in its simplest form), the k best are kept, and the same
logistic probe as ``linear_probe`` (with its shuffled-label control) is fitted on
those k alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from tui_lab.core.analysis.probes.linear_probe import held_out_accuracy, split

if TYPE_CHECKING:
    from tui_lab.core.sae.sae import SparseAutoencoder


@dataclass(frozen=True)
class SparseScore:
    """The k features chosen and the probe's held-out accuracy on them (and its control)."""

    hook: str
    features: list[int]
    accuracy: float
    control: float

    def to_dict(self) -> dict[str, object]:
        return {"hook": self.hook, "k": len(self.features), "features": self.features,
                "accuracy": self.accuracy, "control": self.control}


def rank_features(f: Tensor, y: Tensor, k: int) -> list[int]:
    """The ``k`` features of ``f`` (S, F) whose class means (labels ``y``) differ most for
    their spread."""
    n_classes = int(y.max()) + 1
    onehot = torch.nn.functional.one_hot(y, n_classes).float()  # (S, C)
    counts = onehot.sum(0).clamp_min(1)  # (C,)
    means = (onehot.T @ f) / counts[:, None]  # (C, F)
    overall = f.mean(0)
    between = ((means - overall) ** 2 * (counts / len(y))[:, None]).sum(0)  # (F,)
    score = between / (f.var(0, unbiased=False) + 1e-8)
    return [int(i) for i in torch.topk(score, min(k, f.size(1))).indices]


def sparse_probe(sae: SparseAutoencoder, x: Tensor, y: Tensor, example: Tensor, hook: str, k: int,
                 seed: int = 0) -> SparseScore:
    """The k-sparse probe of labels ``y`` on ``sae``'s features of activations ``x`` (S, d_in)."""
    _, y = torch.unique(y, return_inverse=True)
    with torch.no_grad():
        f = sae.encode(x.to(sae.W_enc.dtype).to(sae.W_enc.device)).float().cpu()  # (S, d_sae)
    test = split(example, seed)
    chosen = rank_features(f[~test], y[~test], k)
    gen = torch.Generator().manual_seed(seed + 1)
    shuffled = y[torch.randperm(len(y), generator=gen)]
    kept = f[:, chosen]
    return SparseScore(hook, chosen, held_out_accuracy(kept, y, test), held_out_accuracy(kept, shuffled, test))
