"""Matryoshka BatchTopK: nested dictionaries, each prefix of the features trained to reconstruct.

With prefix sizes w_1 < w_2 < ... < w_m = d_sae (``matryoshka_widths``, such as
64/256/1024), the features of a batch are BatchTopK's f, and prefix j's
reconstruction uses only the first w_j of them:

    x̂_j = b_dec + Σ_{i < w_j} f_i · W_dec,i

The objective adds, to the full SAE's reconstruction error (which is prefix m's),
each inner prefix's ‖x − x̂_j‖² (summed over d_in, averaged over tokens), j < m:
the first features must explain as much as they can on their own, so general
features settle early and specific ones later, which reduces feature absorption
(Bussmann et al. 2025; Nabeshima 2024). SAELens's and dictionary_learning's
``MatryoshkaBatchTopK`` use this objective with equal weights, as here.
The dictionary of prefix w_j is the first w_j rows of the full one (``prefix``).
"""

from __future__ import annotations

import torch

from tui_lab.core.sae.config import SAEConfig
from tui_lab.core.sae.sae import SparseAutoencoder


def prefix_reconstructions(sae: SparseAutoencoder, f: torch.Tensor, widths: list[int]) -> list[torch.Tensor]:
    """x̂_j for each width of ``widths`` (increasing), from features ``f`` (N, d_sae), cumulatively."""
    if sae.cfg.rescale_acts_by_decoder_norm:
        f = f / sae.W_dec.norm(dim=-1)
    out: list[torch.Tensor] = []
    decoded, start = sae.b_dec.expand(f.shape[0], -1), 0
    for width in widths:
        decoded = decoded + f[:, start:width] @ sae.W_dec[start:width]
        out.append(decoded)
        start = width
    return out


def inner_losses(sae: SparseAutoencoder, x: torch.Tensor, f: torch.Tensor) -> list[torch.Tensor]:
    """Each inner prefix's reconstruction error (every width but the last), as the objective adds them."""
    widths = list(sae.cfg.matryoshka_widths or [])[:-1]
    return [(x_hat - x).pow(2).sum(dim=-1).mean() for x_hat in prefix_reconstructions(sae, f, widths)]


@torch.no_grad()
def prefix(sae: SparseAutoencoder, width: int) -> SparseAutoencoder:
    """The SAE of ``sae``'s first ``width`` features (its nested dictionary of that size).

    Same b_dec and, for a JumpReLU or BatchTopK SAE, the same thresholds; the
    encoder's first ``width`` columns and the decoder's first ``width`` rows.
    """
    if not 1 <= width <= sae.cfg.d_sae:
        raise ValueError(f"width must be between 1 and d_sae={sae.cfg.d_sae}, got {width}")
    cfg = sae.cfg
    widths = [w for w in cfg.matryoshka_widths or [] if w < width] + [width]
    sub_cfg = SAEConfig(
        d_in=cfg.d_in, d_sae=width, architecture=cfg.architecture, dtype=cfg.dtype,
        apply_b_dec_to_input=cfg.apply_b_dec_to_input, normalize_activations=cfg.normalize_activations,
        k=None if cfg.k is None else min(cfg.k, width),
        rescale_acts_by_decoder_norm=cfg.rescale_acts_by_decoder_norm, topk_threshold_lr=cfg.topk_threshold_lr,
        matryoshka_widths=widths if cfg.matryoshka_widths else None, metadata=cfg.metadata,
    )
    out = SparseAutoencoder(sub_cfg, device=sae.W_enc.device, seed=None)
    out.W_enc.copy_(sae.W_enc[:, :width])
    out.b_enc.copy_(sae.b_enc[:width])
    out.W_dec.copy_(sae.W_dec[:width])
    out.b_dec.copy_(sae.b_dec)
    if out.threshold is not None and sae.threshold is not None:
        out.threshold.copy_(sae.threshold[:width])
    if out.topk_threshold is not None and sae.topk_threshold is not None:
        out.topk_threshold.copy_(sae.topk_threshold)
    return out.train(sae.training)
