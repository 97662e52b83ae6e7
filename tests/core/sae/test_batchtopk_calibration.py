"""BatchTopK's calibrated inference threshold: the (k·N+1)-th largest ReLU(z) of N rows.

Checked against a reference written here (every row's ReLU(z) worked in float64
numpy from the weights, sorted by hand), on a planted SAE trained by the trainer
(``planted.py``) and on an untrained one ranking decoder-norm-scaled
pre-activations; the held-out rows are drawn apart from the calibration rows.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.core.sae.planted import K, planted_rows, trained_sae
from tui_lab.core.sae.batchtopk import calibrate_threshold, calibrated_threshold
from tui_lab.core.sae.config import SAEConfig
from tui_lab.core.sae.losses import StepLoss
from tui_lab.core.sae.sae import SparseAutoencoder
from tui_lab.core.sae.settings import TrainSettings
from tui_lab.core.sae.trainer import SAETrainer


def _relu_z(sae: SparseAutoencoder, x: torch.Tensor) -> np.ndarray:
    """ReLU(z) in float64 from the weights, the decoder norms multiplied in when the SAE ranks by them."""
    W_enc, b_enc, b_dec, W_dec = (t.detach().double().numpy() for t in (sae.W_enc, sae.b_enc, sae.b_dec, sae.W_dec))
    z = (x.double().numpy() - b_dec) @ W_enc + b_enc
    if sae.cfg.rescale_acts_by_decoder_norm:
        z = z * np.linalg.norm(W_dec, axis=1)
    return np.maximum(z, 0.0)


def _reference_threshold(sae: SparseAutoencoder, x: torch.Tensor, k: float) -> float:
    """The (int(k·N)+1)-th largest ReLU(z) over all N rows: exactly int(k·N) lie above it."""
    values = np.sort(_relu_z(sae, x), axis=None)[::-1]
    return float(values[int(k * x.shape[0])])


def _batches(x: torch.Tensor, size: int) -> list[torch.Tensor]:
    return list(x.split(size))


def test_planted_sae_calibrated_gives_l0_k_on_its_rows_and_about_k_held_out() -> None:
    sae = trained_sae("batchtopk")
    calibration, held_out = planted_rows(4096, seed=501), planted_rows(4096, seed=502)
    saved = None if sae.topk_threshold is None else sae.topk_threshold.clone()
    try:
        calibrate_threshold(sae, _batches(calibration, 512))
        assert sae.topk_threshold is not None
        theta = float(sae.topk_threshold)
        assert theta == pytest.approx(_reference_threshold(sae, calibration, K), rel=1e-5)
        with torch.no_grad():
            kept = int((sae.eval()(calibration)[1] != 0).sum())
            held_l0 = float((sae(held_out)[1] != 0).sum(dim=1).float().mean())
        assert abs(kept - K * 4096) <= 1  # k·N exactly, up to one entry rounding at θ
        reference_held = float((_relu_z(sae, held_out) > theta).sum(axis=1).mean())
        assert held_l0 == pytest.approx(reference_held, abs=2 / 4096)
        assert held_l0 == pytest.approx(K, rel=0.03)
    finally:
        if saved is not None and sae.topk_threshold is not None:
            sae.topk_threshold.copy_(saved)
        sae.train()


def test_decoder_norm_scaled_ranking_is_calibrated_as_it_is_ranked() -> None:
    cfg = SAEConfig(d_in=6, d_sae=12, architecture="batchtopk", k=3, rescale_acts_by_decoder_norm=True)
    sae = SparseAutoencoder(cfg, seed=2)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        sae.W_dec.mul_(torch.rand(12, 1, generator=g) * 2 + 0.2)  # norms far from 1: the ranking changes
        sae.b_enc.copy_(torch.randn(12, generator=g) * 0.1)
    x = torch.randn(300, 6, generator=g)
    theta = calibrated_threshold(sae, _batches(x, 64))
    assert theta == pytest.approx(_reference_threshold(sae, x, 3), rel=1e-5)
    assert abs(int((_relu_z(sae, x) > theta).sum()) - 900) <= 1  # float64 here, float32 in the SAE
    calibrate_threshold(sae, _batches(x, 64))
    with torch.no_grad():
        assert abs(int((sae.eval()(x)[1] != 0).sum()) - 900) <= 1


def test_few_positive_entries_keep_them_all_and_no_rows_change_nothing() -> None:
    sae = SparseAutoencoder(SAEConfig(d_in=4, d_sae=8, architecture="batchtopk", k=6), seed=0)
    with torch.no_grad():
        sae.b_enc.fill_(-10.0)  # almost nothing positive
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(1))
    assert calibrated_threshold(sae, [x]) == 0.0
    assert calibrated_threshold(sae, []) is None
    assert sae.topk_threshold is not None
    sae.topk_threshold.fill_(0.5)
    calibrate_threshold(sae, [])
    assert float(sae.topk_threshold) == 0.5


def test_trainer_ends_on_the_threshold_calibrated_over_the_rows_it_trained_on() -> None:
    seen: list[torch.Tensor] = []

    class Recording(SAETrainer):
        def train_step(self, x: torch.Tensor) -> StepLoss:
            seen.append(x.clone())
            return super().train_step(x)

    settings = TrainSettings(tokens=4096, batch_size=256, buffer_rows=1024, lr=1e-3, dead_window=1024, log_every=4)
    sae = SparseAutoencoder(SAEConfig(d_in=16, d_sae=32, architecture="batchtopk", k=2), seed=0)
    Recording(sae, settings).train(iter([planted_rows(4096, seed=1)]))
    assert len(seen) == 16 and sae.topk_threshold is not None
    rows = torch.cat(seen)
    assert float(sae.topk_threshold) == pytest.approx(_reference_threshold(sae, rows, 2), rel=1e-5)
