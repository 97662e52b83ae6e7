"""An SAE measured on held-out activations: L0, MSE, explained variance, dead features, CE recovered.

The activations stream through in batches; only running sums are kept, so the
held-out set can be larger than memory.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from tui_lab.core.sae.metrics import CELosses
from tui_lab.core.sae.sae import SparseAutoencoder


class ReconstructionStats:
    """Running sums over (N, d_in) batches, enough for the metrics over all of them."""

    def __init__(self, d_in: int, d_sae: int) -> None:
        self.n = 0
        self.sum_x = torch.zeros(d_in, dtype=torch.float64)
        self.sum_x2 = torch.zeros((), dtype=torch.float64)
        self.sum_err2 = torch.zeros((), dtype=torch.float64)
        self.active = 0.0  # Σ features firing per token
        self.fired = torch.zeros(d_sae, dtype=torch.bool)

    @torch.no_grad()
    def add(self, x: torch.Tensor, x_hat: torch.Tensor, f: torch.Tensor) -> None:
        x64 = x.double()
        self.n += x.shape[0]
        self.sum_x += x64.sum(dim=0)
        self.sum_x2 += x64.pow(2).sum()
        self.sum_err2 += (x64 - x_hat.double()).pow(2).sum()
        self.active += float((f != 0).sum())
        self.fired |= (f != 0).any(dim=0)

    def metrics(self) -> dict[str, float]:
        """l0, mse (per element), explained_variance, fvu, dead_fraction (never fired here)."""
        n, d = max(self.n, 1), self.sum_x.numel()
        # Σ‖x − x̄‖² = Σ‖x‖² − N‖x̄‖²
        total = float(self.sum_x2 - self.sum_x.pow(2).sum() / n)
        ev = 1.0 - float(self.sum_err2) / total if total > 0 else float("nan")
        return {"l0": self.active / n, "mse": float(self.sum_err2) / (n * d), "explained_variance": ev,
                "fvu": 1.0 - ev, "dead_fraction": float((~self.fired).float().mean())}


@torch.no_grad()
def evaluate_sae(sae: SparseAutoencoder, activations: Iterable[torch.Tensor], tokens: int,
                 ce: CELosses | None = None) -> dict[str, object]:
    """The metrics of ``sae`` over the first ``tokens`` rows of ``activations`` (..., d_in) batches."""
    stats = ReconstructionStats(sae.cfg.d_in, sae.cfg.d_sae)
    for batch in activations:
        x = batch.reshape(-1, batch.shape[-1])[: tokens - stats.n].float()
        f = sae.encode(x)
        stats.add(x, sae.decode(f), f)
        if stats.n >= tokens:
            break
    out: dict[str, object] = {**stats.metrics(), "tokens": stats.n}
    out["ce_loss_recovered"] = None if ce is None else ce.recovered
    if ce is not None:
        out.update(ce_clean=ce.clean, ce_zero_ablated=ce.zero_ablated, ce_reconstructed=ce.reconstructed)
    return out
