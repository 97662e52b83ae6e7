"""The metrics, and CE loss recovered against a hand computation on a small model."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tui_lab.core.sae.activity import FeatureActivity
from tui_lab.core.sae.geometric_median import geometric_median
from tui_lab.core.sae.metrics import (
    Replacement,
    ce_loss_recovered,
    ce_losses,
    dead_fraction,
    explained_variance,
    fvu,
    l0,
    mse,
)


def test_sparsity_and_reconstruction_numbers() -> None:
    f = torch.tensor([[0.0, 1.0, 2.0], [0.0, 0.0, 0.5]])
    assert l0(f) == 1.5
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 0.0]])
    x_hat = torch.tensor([[1.0, 1.0], [3.0, 4.0], [4.0, 0.0]])
    assert mse(x, x_hat) == pytest.approx(2 / 6)
    # Σ‖x − x̂‖² = 2; x̄ = (3, 2): Σ‖x − x̄‖² = (4 + 0 + 4) + (0 + 4 + 4) = 16
    assert explained_variance(x, x_hat) == pytest.approx(1 - 2 / 16)
    assert fvu(x, x_hat) == pytest.approx(2 / 16)
    assert explained_variance(x, x) == 1.0


def test_dead_features_over_the_last_tokens() -> None:
    activity = FeatureActivity(d_sae=4, window=5)
    activity.update(torch.tensor([[1.0, 0, 0, 0]] * 3))
    assert activity.dead_fraction() == 0.0  # nobody has been silent 5 tokens yet
    activity.update(torch.tensor([[0, 2.0, 0, 0]] * 3))
    assert activity.since_fired.tolist() == [3, 0, 6, 6]
    assert activity.dead_fraction() == 0.5 == dead_fraction(activity.since_fired, 5)
    np.testing.assert_allclose(activity.log10_density().numpy(),
                               np.log10(np.array([0.5, 0.5, 0.0, 0.0]) + 1e-10), rtol=1e-6)


def test_ce_loss_recovered_formula() -> None:
    assert ce_loss_recovered(clean=2.0, zero_ablated=6.0, reconstructed=3.0) == 0.75
    assert ce_loss_recovered(clean=2.0, zero_ablated=6.0, reconstructed=2.0) == 1.0
    assert math.isnan(ce_loss_recovered(2.0, 2.0, 2.5))


def _softmax_ce(logits: np.ndarray, targets: np.ndarray) -> float:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return float(-logp[np.arange(len(targets)), targets].mean())


def test_ce_loss_recovered_on_a_small_model() -> None:
    """A two-matrix model: activation = E[token] (the hook), logits = activation · U.

    Zeroing the hook gives uniform logits (CE = log V); the "SAE" halves the
    activation. Each CE is computed here by hand with NumPy.
    """
    g = torch.Generator().manual_seed(0)
    V, d = 5, 3
    E, U = torch.randn(V, d, generator=g), torch.randn(d, V, generator=g)
    tokens = torch.tensor([[0, 3, 1, 4, 2, 2]])

    def logits_under(replace: Replacement | None) -> torch.Tensor:
        act = E[tokens]  # (1, T, d): the hook
        if replace is not None:
            act = replace(act)
        return act @ U

    def halve(act: torch.Tensor) -> torch.Tensor:
        return act * 0.5

    got = ce_losses(logits_under, tokens, halve)
    e, u, t = E.double().numpy(), U.double().numpy(), tokens[0].numpy()
    clean = _softmax_ce(e[t[:-1]] @ u, t[1:])
    zero = math.log(V)
    recon = _softmax_ce(0.5 * e[t[:-1]] @ u, t[1:])
    assert got.clean == pytest.approx(clean, rel=1e-5)
    assert got.zero_ablated == pytest.approx(zero, rel=1e-5)
    assert got.reconstructed == pytest.approx(recon, rel=1e-5)
    assert got.recovered == pytest.approx((zero - recon) / (zero - clean), rel=1e-4)


def test_geometric_median_resists_outliers() -> None:
    points = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [100.0, 100.0]])
    median = geometric_median(points, steps=50)
    assert float(median.norm()) < 1.5 < float(points.mean(dim=0).norm())
    # Weiszfeld's point: the weighted average it converges to is its own fixed point.
    w = 1 / (points - median).norm(dim=1)
    assert torch.allclose((w[:, None] * points).sum(0) / w.sum(), median, atol=1e-3)


def test_streamed_evaluation_equals_the_whole_batch() -> None:
    from tests.core.sae.test_sae import _sae
    from tui_lab.core.sae.evaluation import evaluate_sae

    sae = _sae("topk")
    x = torch.randn(90, 6)
    result = evaluate_sae(sae, list(x.split(25)), tokens=80)
    x80 = x[:80]
    f = sae.encode(x80)
    x_hat = sae.decode(f)
    assert result["tokens"] == 80 and result["ce_loss_recovered"] is None
    assert result["l0"] == pytest.approx(l0(f))
    assert result["mse"] == pytest.approx(mse(x80, x_hat), rel=1e-5)
    assert result["explained_variance"] == pytest.approx(explained_variance(x80, x_hat), rel=1e-5)
    assert result["dead_fraction"] == pytest.approx(float((f.sum(0) == 0).float().mean()))


def test_feature_scan_keeps_the_top_contexts() -> None:
    from tui_lab.core.sae.features import FeatureScan

    found = FeatureScan(d_sae=2, feature=1, top=2)
    f = torch.zeros(4, 3, 2)
    f[0, 2, 1], f[1, 0, 1], f[3, 1, 1], f[2, 1, 0] = 1.0, 3.0, 2.0, 5.0
    found.add(f[:2], first_window=0)
    found.add(f[2:], first_window=2)
    assert [(c.window, c.position, c.peak) for c in found.contexts()] == [(1, 0, 3.0), (3, 1, 2.0)]
    assert found.density().tolist() == [1 / 12, 3 / 12] and found.max.tolist() == [5.0, 3.0]
