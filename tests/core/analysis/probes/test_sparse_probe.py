"""The k-sparse probe over an SAE's features: it keeps the feature that reads the variable."""

from __future__ import annotations

import torch

from tui_lab.core.analysis.probes.sparse_probe import rank_features, sparse_probe
from tui_lab.core.sae.config import SAEConfig
from tui_lab.core.sae.sae import SparseAutoencoder

D, F = 6, 10


def _sae_reading(u: torch.Tensor) -> SparseAutoencoder:
    """A ReLU SAE whose feature 7 is relu(x.u) and whose others read random directions."""
    sae = SparseAutoencoder(SAEConfig(d_in=D, d_sae=F, architecture="standard", apply_b_dec_to_input=False))
    with torch.no_grad():
        gen = torch.Generator().manual_seed(1)
        sae.W_enc.copy_(torch.randn(D, F, generator=gen))
        sae.W_enc[:, 7] = u
        sae.b_enc.zero_()
    return sae


def test_the_sparse_probe_keeps_the_feature_that_reads_the_variable() -> None:
    gen = torch.Generator().manual_seed(0)
    u = torch.nn.functional.normalize(torch.randn(D, generator=gen), dim=0)
    y = torch.randint(0, 2, (400,), generator=gen)
    noise = torch.randn(400, D, generator=gen)
    noise -= (noise @ u)[:, None] * u
    x = noise + (2.0 * y)[:, None] * u  # the variable: x.u is 0 or 2
    score = sparse_probe(_sae_reading(u), x, y, torch.arange(400), "blocks.0.hook_resid_post", k=1)
    assert score.features == [7]
    assert score.accuracy == 1.0
    assert score.control < 0.7
    assert score.to_dict()["k"] == 1


def test_rank_features_by_between_class_share_of_variance() -> None:
    # feature 0 splits the classes cleanly; feature 1 is the same values unrelated to the class
    f = torch.tensor([[0.0, 1.0], [0.0, 0.0], [1.0, 1.0], [1.0, 0.0]])
    y = torch.tensor([0, 0, 1, 1])
    assert rank_features(f, y, 2) == [0, 1]
