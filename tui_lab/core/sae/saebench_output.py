"""SAEBench's core evaluation run on a model in hand, written in SAEBench's ``CoreEvalOutput`` layout.

The windows are the held-out text's, ``batch_size_prompts`` to a batch: the
first ``n_eval_reconstruction_batches`` batches score CE and KL, the first
``n_eval_sparsity_variance_batches`` the rest (SAEBench reads both from the
start of its shuffled dataset the same way). The numbers are ``saebench.py``'s.
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import asdict
from typing import TYPE_CHECKING

import torch

from tui_lab.core.sae.activations import flat_site, logits_under, reconstruction, scored_text
from tui_lab.core.sae.sae import SparseAutoencoder
from tui_lab.core.sae.saebench import (
    FLOAT_PRECISION,
    CoreEvalConfig,
    ScoredBatch,
    SparsityVariance,
    downstream_metrics,
    misc_metrics,
    weight_metrics,
)

if TYPE_CHECKING:
    from tui_lab.core.sae.activations import HookedLike

# eval_result_metrics: each category's fields, in SAEBench's order
CATEGORIES: dict[str, tuple[str, ...]] = {
    "model_behavior_preservation": ("kl_div_score", "kl_div_with_ablation", "kl_div_with_sae"),
    "model_performance_preservation": ("ce_loss_score", "ce_loss_with_ablation", "ce_loss_with_sae",
                                       "ce_loss_without_sae"),
    "reconstruction_quality": ("explained_variance", "explained_variance_legacy", "mse", "cossim"),
    "shrinkage": ("l2_norm_in", "l2_norm_out", "l2_ratio", "relative_reconstruction_bias"),
    "sparsity": ("l0", "l1"),
    "token_stats": ("total_tokens_eval_reconstruction", "total_tokens_eval_sparsity_variance"),
    "misc_metrics": ("freq_over_1_percent", "freq_over_10_percent", "normalized_freq_over_1_percent",
                     "normalized_freq_over_10_percent", "average_max_encoder_cosine_sim",
                     "average_max_decoder_cosine_sim", "frac_alive"),
}
# eval_result_details: one object per feature, these keys in this order
DETAIL_KEYS = ("feature_density", "consistent_activation_heuristic", "encoder_bias", "encoder_norm",
               "encoder_decoder_cosine_sim", "max_decoder_cosine_sim", "max_encoder_cosine_sim")


def nan_to_minus_one(value: object) -> object:
    """NaN as −1 anywhere in nested dicts and lists (SAEBench's ``replace_nans_with_negative_one``)."""
    if isinstance(value, dict):
        return {k: nan_to_minus_one(v) for k, v in value.items()}
    if isinstance(value, list):
        return [nan_to_minus_one(v) for v in value]
    return -1 if isinstance(value, float) and math.isnan(value) else value


def feature_details(features: dict[str, list[float]]) -> list[dict[str, object]]:
    """The per-feature objects: ``index`` then DETAIL_KEYS, rounded to FLOAT_PRECISION places."""
    n = len(features["feature_density"])
    return [{"index": i, **{key: round(features[key][i], FLOAT_PRECISION) for key in DETAIL_KEYS}}
            for i in range(n)]


def core_output(config: CoreEvalConfig, numbers: dict[str, float], features: dict[str, list[float]],
                sae_cfg: dict[str, object], sae_id: str) -> dict[str, object]:
    """The whole JSON object, as SAEBench's ``save_single_eval_result`` writes it (NaN as −1)."""
    metrics = {category: {key: numbers[key] for key in keys} for category, keys in CATEGORIES.items()}
    cleaned = nan_to_minus_one({"metrics": metrics, "features": features})
    assert isinstance(cleaned, dict)
    return {
        "eval_type_id": "core",
        "eval_config": asdict(config),
        "eval_id": str(uuid.uuid4()),
        "datetime_epoch_millis": int(time.time() * 1000),
        "eval_result_metrics": cleaned["metrics"],
        "eval_result_details": feature_details(cleaned["features"]),
        "sae_bench_commit_hash": "tfx-lab",  # computed by the lab, not by a SAEBench checkout
        "sae_lens_id": sae_id,
        "sae_lens_release_id": None,
        "sae_lens_version": None,
        "sae_cfg_dict": sae_cfg,
        "eval_result_unstructured": {},
    }


@torch.no_grad()
def run_core(sae: SparseAutoencoder, model: HookedLike, windows: torch.Tensor, hook: str,
             config: CoreEvalConfig) -> tuple[dict[str, float], dict[str, list[float]]]:
    """(numbers, per-feature lists) of SAEBench's core evaluation over ``windows`` (n, T) at ``hook``."""
    size = config.batch_size_prompts
    batches = [windows[i : i + size] for i in range(0, windows.shape[0], size)]
    stats = SparsityVariance(sae.cfg.d_sae)
    for ids in batches[: config.n_eval_sparsity_variance_batches]:
        _, cache = model.run_with_cache(ids, names=[hook])
        x = flat_site(cache[hook]).float()
        f = sae.encode(x)
        stats.add(x, f, sae.decode(f))
    scored = []
    for ids in batches[: config.n_eval_reconstruction_batches]:
        text = scored_text(model, ids)
        scored.append(ScoredBatch(logits_under(model, text.ids, hook, text.target), text.tokens, text.shift))
    numbers = {**stats.metrics(), **downstream_metrics(scored, reconstruction(sae))}
    # the tokens read (SAEBench's count, context × batches × batch size, when every batch is full)
    numbers["total_tokens_eval_reconstruction"] = sum(b.numel() for b in batches[: config.n_eval_reconstruction_batches])
    numbers["total_tokens_eval_sparsity_variance"] = stats.tokens
    features = {**stats.feature_metrics(), **weight_metrics(sae)}
    numbers.update(misc_metrics(features))
    return numbers, features
