"""Encode and decode of each architecture against the formulas, written out with NumPy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tui_lab.core.sae.config import SAEConfig
from tui_lab.core.sae.jumprelu import jumprelu, step
from tui_lab.core.sae.sae import SparseAutoencoder

D_IN, D_SAE = 6, 10


def _sae(architecture: str, **cfg: object) -> SparseAutoencoder:
    """An SAE with random weights (every parameter non-zero, so each term is exercised)."""
    k = 3 if architecture == "topk" else None
    sae = SparseAutoencoder(SAEConfig(d_in=D_IN, d_sae=D_SAE, architecture=architecture, k=k, **cfg))  # type: ignore[arg-type]
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in sae.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.7)
        if sae.threshold is not None:
            sae.threshold.copy_(torch.rand(D_SAE, generator=g) * 0.8)
    return sae


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().double().numpy()


def _reference(sae: SparseAutoencoder, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(features, reconstruction) by the formulas of sae.py's docstring, in float64 NumPy."""
    W_enc, b_enc, W_dec, b_dec = (_np(getattr(sae, n)) for n in ("W_enc", "b_enc", "W_dec", "b_dec"))
    x_in = x - b_dec if sae.cfg.apply_b_dec_to_input else x
    z = x_in @ W_enc + b_enc
    arch = sae.cfg.architecture
    if arch == "standard":
        f = np.maximum(z, 0.0)
    elif arch == "jumprelu":
        f = np.maximum(z, 0.0) * (z > _np(sae.threshold))  # type: ignore[arg-type]
    else:
        k = sae.cfg.k
        f = np.zeros_like(z)
        top = np.argsort(-z, axis=-1)[..., :k]
        np.put_along_axis(f, top, np.maximum(np.take_along_axis(z, top, axis=-1), 0.0), axis=-1)
    return f, f @ W_dec + b_dec


@pytest.mark.parametrize("architecture", ["standard", "topk", "jumprelu"])
@pytest.mark.parametrize("apply_b_dec", [True, False])
def test_encode_decode_match_the_formulas(architecture: str, apply_b_dec: bool) -> None:
    sae = _sae(architecture, apply_b_dec_to_input=apply_b_dec)
    x = np.random.default_rng(3).normal(size=(2, 5, D_IN))  # any leading dims
    f_ref, x_hat_ref = _reference(sae, x)
    f = sae.encode(torch.tensor(x, dtype=torch.float32))
    assert f.shape == (2, 5, D_SAE)
    np.testing.assert_allclose(_np(f), f_ref, atol=1e-5)
    assert (f_ref > 0).any() and (f_ref == 0).any()
    x_hat = sae.decode(f)
    assert x_hat.shape == (2, 5, D_IN)
    np.testing.assert_allclose(_np(x_hat), x_hat_ref, atol=1e-5)
    recon, feats, _ = sae(torch.tensor(x, dtype=torch.float32))
    assert torch.equal(feats, f) and torch.allclose(recon, x_hat)


def test_topk_keeps_k_per_token() -> None:
    sae = _sae("topk")
    f = sae.encode(torch.randn(50, D_IN) * 5)
    assert int((f > 0).sum(dim=-1).max()) <= 3


def test_topk_rescaled_by_decoder_norm() -> None:
    """SAELens's ``rescale_acts_by_decoder_norm``: rank z·‖W_dec,i‖, decode f/‖W_dec,i‖."""
    sae = _sae("topk", rescale_acts_by_decoder_norm=True)
    x = np.random.default_rng(4).normal(size=(7, D_IN))
    W_enc, b_enc, W_dec, b_dec = (_np(getattr(sae, n)) for n in ("W_enc", "b_enc", "W_dec", "b_dec"))
    norms = np.linalg.norm(W_dec, axis=1)
    z = ((x - b_dec) @ W_enc + b_enc) * norms
    f_ref = np.zeros_like(z)
    top = np.argsort(-z, axis=-1)[:, :3]
    np.put_along_axis(f_ref, top, np.maximum(np.take_along_axis(z, top, axis=-1), 0.0), axis=-1)
    f = sae.encode(torch.tensor(x, dtype=torch.float32))
    np.testing.assert_allclose(_np(f), f_ref, atol=1e-5)
    np.testing.assert_allclose(_np(sae.decode(f)), (f_ref / norms) @ W_dec + b_dec, atol=1e-5)


def test_jumprelu_threshold_gradients_are_the_estimators() -> None:
    """∂/∂θ of Σ jumprelu = Σ −(θ/ε)·K((z−θ)/ε); of Σ step = Σ −(1/ε)·K(...); K the rectangle."""
    z = torch.tensor([[0.50, 0.21, 0.0], [0.52, 0.90, 0.31]], requires_grad=True)
    theta = torch.tensor([0.51, 0.2, 0.3], requires_grad=True)
    eps = 0.05
    jumprelu(z, theta, eps).sum().backward()
    window = np.abs((_np(z) - _np(theta)) / eps) < 0.5  # which (z, θ) pairs fall in the kernel
    np.testing.assert_allclose(_np(theta.grad), (-(_np(theta) / eps) * window).sum(axis=0), atol=1e-6)  # type: ignore[arg-type]
    np.testing.assert_allclose(_np(z.grad), (_np(z) > _np(theta)).astype(float))  # type: ignore[arg-type]
    theta.grad = None
    step(z, theta, eps).sum().backward()
    np.testing.assert_allclose(_np(theta.grad), (-(1 / eps) * window).sum(axis=0), atol=1e-4)  # type: ignore[arg-type]


def test_decoder_kept_at_unit_norm_without_the_parallel_gradient() -> None:
    sae = _sae("topk")
    sae.normalize_decoder()
    assert torch.allclose(sae.W_dec.norm(dim=1), torch.ones(D_SAE))
    sae.W_dec.grad = torch.randn(D_SAE, D_IN)
    sae.remove_parallel_gradient()
    assert torch.allclose((sae.W_dec.grad * sae.W_dec).sum(dim=1), torch.zeros(D_SAE), atol=1e-6)
