"""SAEBench's core metrics, each field worked by hand in plain Python on tiny tensors.

The formulas are sae-bench 0.6.0's (``evals/core/main.py``), including its own
normalisations (``mse`` per token divided by the batch's token count, its
explained variance's m² term). ``test_saelens_reference.py`` compares the whole
output with SAEBench itself when its venv is there.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from tui_lab.core.sae.config import SAEConfig
from tui_lab.core.sae.sae import SparseAutoencoder
from tui_lab.core.sae.saebench import (
    CoreEvalConfig,
    ScoredBatch,
    SparsityVariance,
    downstream_metrics,
    max_cosine_sim,
    misc_metrics,
    weight_metrics,
)
from tui_lab.core.sae.saebench_output import CATEGORIES, DETAIL_KEYS, core_output

# one batch: 2 windows of 2 tokens, d = 2, d_sae = 3
X = [[[1.0, 2.0], [0.0, 1.0]], [[2.0, 0.0], [1.0, 3.0]]]
X_HAT = [[[1.0, 1.0], [0.5, 1.0]], [[2.0, 1.0], [1.0, 0.0]]]
FEAT = [[[0.5, 0.0, 1.0], [0.0, 0.0, 2.0]], [[1.5, 0.0, 0.0], [0.0, 0.0, 0.25]]]


def _dot(a: list[float], b: list[float]) -> float:
    return sum(p * q for p, q in zip(a, b, strict=True))


def _rows(t: list[list[list[float]]]) -> list[list[float]]:
    return [row for window in t for row in window]


def test_sparsity_variance_and_shrinkage_by_hand() -> None:
    stats = SparsityVariance(3)
    stats.add(torch.tensor(X), torch.tensor(FEAT), torch.tensor(X_HAT))
    got = stats.metrics()
    x, x_hat, f = _rows(X), _rows(X_HAT), _rows(FEAT)
    n = len(x)
    rss = [_dot([a - b for a, b in zip(r, s, strict=True)], [a - b for a, b in zip(r, s, strict=True)])
           for r, s in zip(x, x_hat, strict=True)]
    norm_in = [math.sqrt(_dot(r, r)) for r in x]
    norm_out = [math.sqrt(_dot(r, r)) for r in x_hat]
    mean = [sum(r[j] for r in x) / n for j in range(2)]
    centred = [sum((r[j] - mean[j]) ** 2 for j in range(2)) for r in x]
    m = sum(v * v for r in x for v in r) / (n * 2)
    expected = {
        "l0": sum(sum(1 for v in r if v != 0) for r in f) / n,  # 2, 1, 1, 1
        "l1": sum(sum(r) for r in f) / n,
        "mse": sum(e / n for e in rss) / n,
        "cossim": sum(_dot(a, b) / (p * q) for a, b, p, q in zip(x, x_hat, norm_in, norm_out, strict=True)) / n,
        "explained_variance_legacy": sum(1 - e / c for e, c in zip(rss, centred, strict=True)) / n,
        "explained_variance": 1 - (sum(rss) / n) / (sum(_dot(r, r) for r in x) / n - m * m),
        "l2_norm_in": sum(norm_in) / n, "l2_norm_out": sum(norm_out) / n,
        "l2_ratio": sum(o / i for o, i in zip(norm_out, norm_in, strict=True)) / n,
        "relative_reconstruction_bias": (sum(_dot(r, r) for r in x_hat) / n)
        / (sum(_dot(a, b) for a, b in zip(x, x_hat, strict=True)) / n),
    }
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-12), key
    assert got["l0"] == pytest.approx(1.25) and got["mse"] == pytest.approx((1 + 0.25 + 1 + 9) / 16)
    features = stats.feature_metrics()
    assert features["feature_density"] == pytest.approx([2 / 4, 0.0, 3 / 4])
    # feature 0 fires in both windows once each; feature 2 twice in the first, once in the second
    assert features["consistent_activation_heuristic"][0] == pytest.approx(1.0)
    assert math.isnan(features["consistent_activation_heuristic"][1])
    assert features["consistent_activation_heuristic"][2] == pytest.approx(1.5)


def test_ce_and_kl_scores_by_hand() -> None:
    clean = torch.tensor([[[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])
    spliced = torch.tensor([[[1.0, 0.0], [0.0, 2.0], [3.0, 1.0]]])
    zeroed = torch.zeros(1, 3, 2)
    tokens = torch.tensor([[0, 0, 1]])

    def logits_under(replacement: object) -> torch.Tensor:
        if replacement is None:
            return clean
        return zeroed if replacement is torch.zeros_like else spliced

    got = downstream_metrics([ScoredBatch(logits_under, tokens, 1)], lambda act: act)

    def logp(row: list[float], j: int) -> float:
        return row[j] - math.log(sum(math.exp(v) for v in row))

    def ce(logits: torch.Tensor) -> float:  # positions 0, 1 predict tokens 1, 2
        rows = logits[0].tolist()
        return -(logp(rows[0], 0) + logp(rows[1], 1)) / 2

    def kl(other: torch.Tensor) -> float:
        total = 0.0
        for p_row, q_row in zip(clean[0].tolist(), other[0].tolist(), strict=True):
            total += sum(math.exp(logp(p_row, j)) * (logp(p_row, j) - logp(q_row, j)) for j in range(2))
        return total / 3

    assert got["ce_loss_without_sae"] == pytest.approx(ce(clean))
    assert got["ce_loss_with_sae"] == pytest.approx(ce(spliced))
    assert got["ce_loss_with_ablation"] == pytest.approx(math.log(2))
    assert got["kl_div_with_sae"] == pytest.approx(kl(spliced))
    assert got["kl_div_with_ablation"] == pytest.approx(kl(zeroed))
    assert got["ce_loss_score"] == pytest.approx((math.log(2) - ce(spliced)) / (math.log(2) - ce(clean)))
    assert got["kl_div_score"] == pytest.approx((kl(zeroed) - kl(spliced)) / kl(zeroed))


def test_weight_metrics_by_hand() -> None:
    sae = SparseAutoencoder(SAEConfig(d_in=2, d_sae=3, architecture="standard"))
    with torch.no_grad():
        sae.W_enc.copy_(torch.tensor([[1.0, 0.0, 3.0], [0.0, 2.0, 4.0]]))
        sae.W_dec.copy_(torch.tensor([[1.0, 1.0], [0.0, -1.0], [3.0, 4.0]]))
        sae.b_enc.copy_(torch.tensor([0.5, -0.5, 0.0]))
    got = weight_metrics(sae)
    assert got["encoder_bias"] == [0.5, -0.5, 0.0]
    assert got["encoder_norm"] == pytest.approx([1.0, 2.0, 5.0])
    assert got["encoder_decoder_cosine_sim"] == pytest.approx([1 / math.sqrt(2), -1.0, 1.0])
    # encoder columns (1,0), (0,1), (0.6,0.8): each one's best other cosine
    assert got["max_encoder_cosine_sim"] == pytest.approx([0.6, 0.8, 0.8])
    # decoder rows (1,1)/√2, (0,-1), (0.6,0.8)
    assert got["max_decoder_cosine_sim"] == pytest.approx([1.4 / math.sqrt(2), -1 / math.sqrt(2), 1.4 / math.sqrt(2)])
    assert max_cosine_sim(torch.eye(2)).tolist() == [0.0, 0.0]


def test_misc_metrics_dead_and_dense_by_hand() -> None:
    features = {"feature_density": [0.0, 0.005, 0.05, 0.5], "max_encoder_cosine_sim": [0.1, 0.2, 0.3, 0.4],
                "max_decoder_cosine_sim": [0.5, 0.5, 0.5, 0.9]}
    got = misc_metrics(features)
    assert got == pytest.approx({
        "freq_over_1_percent": 0.5, "freq_over_10_percent": 0.25,
        "normalized_freq_over_1_percent": 0.55 / 0.555, "normalized_freq_over_10_percent": 0.5 / 0.555,
        "average_max_encoder_cosine_sim": 0.25, "average_max_decoder_cosine_sim": 0.6, "frac_alive": 0.75})


def test_output_has_saebench_layout_and_minus_one_for_nan() -> None:
    numbers = {key: 0.5 for keys in CATEGORIES.values() for key in keys}
    numbers["kl_div_score"] = float("nan")
    features = {key: [0.123456789012345, float("nan")] for key in DETAIL_KEYS}
    out = core_output(CoreEvalConfig(model_name="m"), numbers, features, {"d_in": 2}, "sae-dir")
    assert list(out) == ["eval_type_id", "eval_config", "eval_id", "datetime_epoch_millis", "eval_result_metrics",
                         "eval_result_details", "sae_bench_commit_hash", "sae_lens_id", "sae_lens_release_id",
                         "sae_lens_version", "sae_cfg_dict", "eval_result_unstructured"]
    assert out["eval_type_id"] == "core"
    metrics = out["eval_result_metrics"]
    assert isinstance(metrics, dict) and list(metrics) == list(CATEGORIES)
    assert metrics["model_behavior_preservation"]["kl_div_score"] == -1
    assert list(metrics["misc_metrics"]) == ["freq_over_1_percent", "freq_over_10_percent",
                                             "normalized_freq_over_1_percent", "normalized_freq_over_10_percent",
                                             "average_max_encoder_cosine_sim", "average_max_decoder_cosine_sim",
                                             "frac_alive"]
    details = out["eval_result_details"]
    assert isinstance(details, list)
    assert details[0] == {"index": 0, **{key: 0.123456789 for key in DETAIL_KEYS}}
    assert details[1] == {"index": 1, **{key: -1 for key in DETAIL_KEYS}}
    config = out["eval_config"]
    assert isinstance(config, dict) and config["model_name"] == "m" and config["compute_kl"] is True
    json.dumps(out, allow_nan=False)  # plain JSON: no NaN left
