"""SAEBench's core evaluation of an SAE, computed as sae-bench 0.6.0 computes it, in its JSON layout.

``tfx-lab sae eval --saebench OUT.json`` writes a file shaped as SAEBench's
``CoreEvalOutput`` (``eval_type_id`` "core", ``eval_config``, ``eval_result_metrics``
by category, ``eval_result_details`` per feature, ...), so the lab's SAEs sit
beside SAEBench's results. The numbers follow SAEBench's ``evals/core/main.py``
over batches of B windows of T tokens, each number averaged per token over all
batches unless said:

- sparsity: ``l0`` = non-zero features per token; ``l1`` = Σ_i f_i per token.
- reconstruction_quality: ``mse`` = ‖x − x̂‖² per token divided by its batch's
  token count (SAEBench's normalisation, kept so the numbers compare);
  ``cossim`` = cos(x, x̂); ``explained_variance_legacy`` = 1 − ‖x − x̂‖² /
  ‖x − x̄_batch‖²; ``explained_variance`` = 1 − E‖x − x̂‖² / (E‖x‖² − m²) with m
  the mean over tokens and dimensions of x² (SAEBench's formula, as written).
- shrinkage: ``l2_norm_in`` ‖x‖, ``l2_norm_out`` ‖x̂‖, ``l2_ratio`` ‖x̂‖/‖x‖ (‖x‖
  below 1e-4 read as 1), ``relative_reconstruction_bias`` = mean‖x̂‖² / mean(x·x̂)
  per batch, averaged over batches.
- model_performance_preservation: CE per predicted token clean, with the hook
  replaced by the reconstruction, and zero-ablated; ``ce_loss_score`` =
  (CE_ablated − CE_sae) / (CE_ablated − CE_clean).
- model_behavior_preservation: KL(clean ‖ replaced) per token, with the SAE and
  zero-ablated; ``kl_div_score`` = (KL_ablated − KL_sae) / KL_ablated.
- per feature: density (share of tokens with f > 0), the consistent-activation
  heuristic (firings per window it fires in), encoder bias and norm, encoder–
  decoder cosine, the largest cosine with another encoder (decoder) direction;
  misc_metrics: ``frac_alive`` (density > 0; 1 − the dead fraction), the shares
  over 1% and 10% ("dense" features) and the share of all firings they hold.

NaN becomes −1 and per-feature numbers are rounded to 10 places, as SAEBench
writes them. No token is left out (SAEBench leaves out BOS/EOS/pad ids; the
lab's char-level models have none).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from tui_lab.core.sae.metrics import LogitsUnder, Replacement
from tui_lab.core.sae.sae import SparseAutoencoder

SAEBENCH_VERSION = "0.6.0"
FLOAT_PRECISION = 10  # SAEBench's DEFAULT_FLOAT_PRECISION for per-feature numbers
# SAEBench's per-token ‖x‖ below which l2_ratio divides by 1 instead
L2_FLOOR = 1e-4


@dataclass(frozen=True)
class CoreEvalConfig:
    """SAEBench's ``CoreEvalConfig`` fields, in its order (everything computed, so all true)."""

    model_name: str
    llm_dtype: str = "float32"
    batch_size_prompts: int = 16
    n_eval_reconstruction_batches: int = 10
    n_eval_sparsity_variance_batches: int = 1
    dataset: str = ""
    context_size: int = 128
    compute_kl: bool = True
    compute_ce_loss: bool = True
    compute_l2_norms: bool = True
    compute_sparsity_metrics: bool = True
    compute_variance_metrics: bool = True
    compute_featurewise_density_statistics: bool = True
    compute_featurewise_weight_based_metrics: bool = True
    exclude_special_tokens_from_reconstruction: bool = False
    verbose: bool = False


class SparsityVariance:
    """Per-token and per-batch sums over (B, T, d) batches: the sparsity, variance, shrinkage
    and density numbers of SAEBench's ``get_sparsity_and_variance_metrics``."""

    PER_TOKEN = ("l2_norm_in", "l2_norm_out", "l2_ratio", "l0", "l1", "explained_variance_legacy", "mse", "cossim")

    def __init__(self, d_sae: int) -> None:
        self.values: dict[str, list[torch.Tensor]] = {name: [] for name in self.PER_TOKEN}
        self.bias: list[float] = []  # relative reconstruction bias, one per batch
        self.sum_sq: list[float] = []  # per batch: mean over tokens of ‖x‖²
        self.sq_per_dim: list[torch.Tensor] = []  # per batch: mean over tokens of x², per dimension
        self.resid: list[float] = []  # per batch: mean over tokens of ‖x − x̂‖²
        self.fired = torch.zeros(d_sae, dtype=torch.float64)
        self.windows_fired = torch.zeros(d_sae, dtype=torch.float64)
        self.tokens = 0

    @torch.no_grad()
    def add(self, x: torch.Tensor, f: torch.Tensor, x_hat: torch.Tensor) -> None:
        """One batch: activations x (B, T, d), features f (B, T, d_sae), reconstruction x_hat."""
        fires = (f > 0).double()
        self.fired += fires.sum(dim=(0, 1)).cpu()
        self.windows_fired += (fires.sum(dim=1) > 0).sum(dim=0).cpu()
        self.tokens += x.shape[0] * x.shape[1]
        x, f, x_hat = (t.reshape(-1, t.shape[-1]).double() for t in (x, f, x_hat))
        norm_in, norm_out = x.norm(dim=-1), x_hat.norm(dim=-1)
        rss = (x - x_hat).pow(2).sum(dim=-1)
        per_token = {
            "l2_norm_in": norm_in, "l2_norm_out": norm_out,
            "l2_ratio": norm_out / torch.where(norm_in.abs() < L2_FLOOR, torch.ones_like(norm_in), norm_in),
            "l0": (f != 0).sum(dim=-1).double(), "l1": f.sum(dim=-1),
            "explained_variance_legacy": 1 - rss / (x - x.mean(dim=0)).pow(2).sum(dim=-1),
            "mse": rss / x.shape[0], "cossim": F.cosine_similarity(x, x_hat, dim=-1, eps=0.0),
        }
        for name, value in per_token.items():
            self.values[name].append(value.cpu())
        self.bias.append(float(x_hat.pow(2).sum(dim=-1).mean() / (x * x_hat).sum(dim=-1).mean()))
        self.sum_sq.append(float(x.pow(2).sum(dim=-1).mean()))
        self.sq_per_dim.append(x.pow(2).mean(dim=0).cpu())
        self.resid.append(float(rss.mean()))

    def metrics(self) -> dict[str, float]:
        out = {name: float(torch.cat(values).mean()) for name, values in self.values.items()}
        out["relative_reconstruction_bias"] = sum(self.bias) / len(self.bias)
        m = float(torch.cat(self.sq_per_dim).mean())
        total = sum(self.sum_sq) / len(self.sum_sq) - m**2
        out["explained_variance"] = 1 - (sum(self.resid) / len(self.resid)) / total
        return out

    def feature_metrics(self) -> dict[str, list[float]]:
        return {"feature_density": (self.fired / self.tokens).tolist(),
                "consistent_activation_heuristic": (self.fired / self.windows_fired).tolist()}


def per_token_ce(logits: torch.Tensor, tokens: torch.Tensor, shift: int) -> torch.Tensor:
    """−log p of each predicted token (``shift`` on, as ``metrics.next_token_ce``), flattened."""
    t = logits.shape[-2]
    pred = logits[..., : t - shift, :].reshape(-1, logits.shape[-1]).double()
    return F.cross_entropy(pred, tokens[..., shift:].reshape(-1), reduction="none")


def per_token_kl(clean: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """KL(clean ‖ other) of each position's next-token distribution, flattened."""
    p_log, q_log = clean.double().log_softmax(dim=-1), other.double().log_softmax(dim=-1)
    return (p_log.exp() * (p_log - q_log)).sum(dim=-1).reshape(-1)


@dataclass(frozen=True)
class ScoredBatch:
    """One batch of windows for the CE and KL numbers: its logits under a replacement, its targets."""

    logits_under: LogitsUnder
    tokens: torch.Tensor
    shift: int


@torch.no_grad()
def downstream_metrics(batches: Iterable[ScoredBatch], reconstruct: Replacement) -> dict[str, float]:
    """CE and KL clean, with the SAE and zero-ablated, per token over every batch; the two scores."""
    parts: dict[str, list[torch.Tensor]] = {name: [] for name in (
        "kl_div_with_sae", "kl_div_with_ablation", "ce_loss_with_sae", "ce_loss_without_sae", "ce_loss_with_ablation")}
    for batch in batches:
        clean = batch.logits_under(None)
        spliced = batch.logits_under(lambda act: reconstruct(act).to(act.dtype))
        zeroed = batch.logits_under(torch.zeros_like)
        parts["kl_div_with_sae"].append(per_token_kl(clean, spliced))
        parts["kl_div_with_ablation"].append(per_token_kl(clean, zeroed))
        for name, logits in (("ce_loss_with_sae", spliced), ("ce_loss_without_sae", clean),
                             ("ce_loss_with_ablation", zeroed)):
            parts[name].append(per_token_ce(logits, batch.tokens, batch.shift))
    out = {name: float(torch.cat(values).mean()) for name, values in parts.items()}
    out["kl_div_score"] = _ratio(out["kl_div_with_ablation"] - out["kl_div_with_sae"], out["kl_div_with_ablation"])
    out["ce_loss_score"] = _ratio(out["ce_loss_with_ablation"] - out["ce_loss_with_sae"],
                                  out["ce_loss_with_ablation"] - out["ce_loss_without_sae"])
    return out


def _ratio(a: float, b: float) -> float:
    return a / b if b != 0 else float("nan")


def max_cosine_sim(columns: torch.Tensor) -> torch.Tensor:
    """For each column of (D, F), its largest cosine with any other column."""
    unit = F.normalize(columns.double(), dim=0)
    sims = unit.T @ unit
    sims.fill_diagonal_(float("-inf"))
    return sims.max(dim=1).values


@torch.no_grad()
def weight_metrics(sae: SparseAutoencoder) -> dict[str, list[float]]:
    """Per feature: encoder bias and norm, encoder–decoder cosine, largest encoder and decoder cosines."""
    W_enc, W_dec = sae.W_enc.detach().double().cpu(), sae.W_dec.detach().double().cpu()
    return {
        "encoder_bias": sae.b_enc.detach().double().cpu().tolist(),
        "encoder_norm": W_enc.norm(dim=0).tolist(),
        "encoder_decoder_cosine_sim": F.cosine_similarity(W_enc.T, W_dec, dim=-1).tolist(),
        "max_encoder_cosine_sim": max_cosine_sim(W_enc).tolist(),
        "max_decoder_cosine_sim": max_cosine_sim(W_dec.T).tolist(),
    }


def misc_metrics(features: dict[str, list[float]]) -> dict[str, float]:
    """SAEBench's ``calculate_misc_metrics``: alive and dense shares, average largest cosines."""
    density = torch.tensor(features["feature_density"], dtype=torch.float64)
    total = float(density.sum())

    def held_over(level: float) -> float:
        return float(density[density > level].sum()) / total if total > 0 else 0.0

    return {
        "freq_over_1_percent": float((density > 0.01).double().mean()),
        "freq_over_10_percent": float((density > 0.1).double().mean()),
        "normalized_freq_over_1_percent": held_over(0.01),
        "normalized_freq_over_10_percent": held_over(0.1),
        "average_max_encoder_cosine_sim": float(torch.tensor(features["max_encoder_cosine_sim"]).mean()),
        "average_max_decoder_cosine_sim": float(torch.tensor(features["max_decoder_cosine_sim"]).mean()),
        "frac_alive": float((density > 0).double().mean()),
    }
