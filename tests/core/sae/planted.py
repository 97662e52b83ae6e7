"""Small planted activations and the BatchTopK-family SAEs trained on them, trained once per session.

48 unit directions in 16 dimensions, K = 2 active per row with coefficients in
[0.5, 1.5), a little noise. A 64-feature SAE trains on them in 600 steps of 64
rows, the last 150 with the learning rate decaying to 0 (as the recipe does), so
the running threshold has settled when the tests look at it.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

import torch

from tui_lab.core.sae.config import SAEConfig
from tui_lab.core.sae.sae import SparseAutoencoder
from tui_lab.core.sae.settings import TrainSettings
from tui_lab.core.sae.trainer import SAETrainer

D_IN, N_DIRECTIONS, K, D_SAE = 16, 48, 2, 64
WIDTHS = [8, 24, 64]
SETTINGS = TrainSettings(tokens=600 * 64, batch_size=64, buffer_rows=4096, lr=3e-3, dead_window=5000,
                         log_every=1000, lr_decay_steps=150)


def directions() -> torch.Tensor:
    """(N_DIRECTIONS, D_IN) fixed random unit directions."""
    true = torch.randn(N_DIRECTIONS, D_IN, generator=torch.Generator().manual_seed(1))
    return true / true.norm(dim=1, keepdim=True)


def planted_rows(n: int, seed: int) -> torch.Tensor:
    """(n, D_IN) rows, each a sum of K of the directions plus noise."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.rand(n, N_DIRECTIONS, generator=g).argsort(dim=1)[:, :K]
    coeff = torch.rand(n, K, generator=g) + 0.5
    return (coeff[..., None] * directions()[idx]).sum(dim=1) + 0.01 * torch.randn(n, D_IN, generator=g)


def _source() -> Iterator[torch.Tensor]:
    seed = 1000
    while True:
        seed += 1
        yield planted_rows(1024, seed)


def fresh_sae(arch: str, seed: int = 0) -> SparseAutoencoder:
    widths = WIDTHS if arch == "matryoshka_batchtopk" else None
    cfg = SAEConfig(d_in=D_IN, d_sae=D_SAE, architecture=arch, k=K, matryoshka_widths=widths)
    return SparseAutoencoder(cfg, seed=seed)


@cache
def trained_sae(arch: str) -> SparseAutoencoder:
    """An SAE of ``arch`` trained by SETTINGS (a few seconds; once per test session)."""
    torch.manual_seed(0)
    sae = fresh_sae(arch)
    SAETrainer(sae, SETTINGS).train(_source())
    return sae
