"""A k-SAE's training loss on its kept features only equals the dense path's, terms and gradients.

The reference is the dense path (``training_loss(..., dense=True)``: every feature's
activation through ``SparseAutoencoder.forward``), which ``test_saelens_reference.py``
and the BatchTopK and Matryoshka tests check against SAELens and hand computations.
"""

from __future__ import annotations

import pytest
import torch

from tui_lab.core.sae.active_features import top_of_batch
from tui_lab.core.sae.config import SAEConfig
from tui_lab.core.sae.losses import Coefficients, training_loss
from tui_lab.core.sae.sae import SparseAutoencoder, batch_topk_relu

D_IN, D_SAE = 12, 40


def _sae(arch: str, rescale: bool, b_dec_in: bool, seed: int = 0) -> SparseAutoencoder:
    cfg = SAEConfig(d_in=D_IN, d_sae=D_SAE, architecture=arch, k=4, rescale_acts_by_decoder_norm=rescale,
                    apply_b_dec_to_input=b_dec_in, matryoshka_widths=[8, 20, D_SAE] if arch.startswith("mat") else None)
    sae = SparseAutoencoder(cfg, seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():  # away from the tied start, with unequal decoder norms and biases
        for p in (sae.W_enc, sae.W_dec):
            p.add_(0.3 * torch.randn(p.shape, generator=g))
        sae.b_enc.copy_(0.2 * torch.randn(D_SAE, generator=g))
        sae.b_dec.copy_(0.2 * torch.randn(D_IN, generator=g))
        if sae.topk_threshold is not None:
            sae.topk_threshold.fill_(0.4)
    return sae


def _loss_and_grads(sae: SparseAutoencoder, x: torch.Tensor, dead: torch.Tensor, dense: bool,
                    per_token: bool = False) -> dict[str, torch.Tensor]:
    sae.zero_grad(set_to_none=True)
    loss = training_loss(sae, x, Coefficients(aux_k=0.5), dead, dense=dense, per_token=per_token)
    loss.total.backward()
    out = {"total": loss.total.detach(), "mse": loss.mse.detach(), "aux": loss.aux.detach(),
           "x_hat": loss.x_hat.detach(), "features": loss.features.detach()}
    out.update({f"inner{i}": t.detach() for i, t in enumerate(loss.inner)})
    out.update({name: p.grad.clone() for name, p in sae.named_parameters() if p.grad is not None})
    return out


@pytest.mark.parametrize(("arch", "per_token"), [("topk", False), ("batchtopk", False), ("batchtopk", True),
                                               ("matryoshka_batchtopk", False), ("matryoshka_batchtopk", True)])
@pytest.mark.parametrize(("rescale", "b_dec_in"), [(False, True), (True, False)])
def test_sparse_step_equals_the_dense_one(arch: str, per_token: bool, rescale: bool, b_dec_in: bool) -> None:
    x = torch.randn(64, D_IN, generator=torch.Generator().manual_seed(5))
    dead = torch.zeros(D_SAE, dtype=torch.bool)
    dead[::3] = True  # AuxK has dead features to reach for
    sae = _sae(arch, rescale, b_dec_in)
    dense = _loss_and_grads(sae, x, dead, True, per_token)
    sparse = _loss_and_grads(sae, x, dead, False, per_token)
    if per_token:  # TopK's selection: every token keeps exactly k (all its k largest are positive here)
        assert (sparse["features"] != 0).sum(dim=1).max() <= 4 and (sparse["features"] != 0).sum(dim=1).min() >= 1
    assert set(sparse) == set(dense)
    assert float(dense["aux"]) > 0 and float(dense["mse"]) > 0
    for name, want in dense.items():
        torch.testing.assert_close(sparse[name], want, rtol=1e-5, atol=1e-6, msg=name)


def test_the_batch_keeps_exactly_k_per_row_on_average_whatever_the_floor() -> None:
    z = torch.randn(50, 30, generator=torch.Generator().manual_seed(3))
    want = batch_topk_relu(z, 2.5).nonzero()
    for floor in (0.0, 0.5, 1.5, 100.0):  # 100: above every entry, so the whole batch is looked at
        rows, feats = top_of_batch(z, 2.5, floor)
        assert rows.numel() == 125
        got = torch.stack([rows, feats], 1)
        assert sorted(map(tuple, got.tolist())) == sorted(map(tuple, want.tolist())), floor
