"""BatchTopK's running threshold, and the JumpReLU SAE it becomes for inference.

In training a BatchTopK SAE keeps the k·N largest ReLU(z) of a batch of N rows
(``sae.batch_topk_relu``), which needs the whole batch: a single token could not
be encoded alone. So training also keeps a running threshold θ, a moving average
of the smallest activation kept in each batch,

    θ ← (1 − lr) · θ + lr · min{f : f > 0}          (lr = ``topk_threshold_lr``, 0.01)

started at 0 and kept in float64 (SAELens's ``update_topk_threshold``;
dictionary_learning's ``threshold_beta`` = 1 − lr is the same average). Starting
at the first batch's value instead (dictionary_learning, which waits 1,000 steps
first) was tried and dropped: early batches' activations are several times the
final ones, and on char-lm's 293 steps that left θ 50% high (held-out L0 10.6 for
k = 16); from 0, θ is low by 0.99^steps of its value (5% at 300 steps). For
inference the SAE is written as SAELens writes it: a ``jumprelu`` SAE with
every feature's threshold θ, the decoder's row norms folded into the encoder
first when the pre-activations were ranked scaled by them (SAELens's
``process_state_dict_for_saving_inference``). A token then keeps the features
with ReLU(z) > θ, on average about k of them: on the batches it was trained on,
θ reproduces the batch top-k's selection up to the few entries near θ (the
tests measure how few).
"""

from __future__ import annotations

import torch

from tui_lab.core.sae.config import BATCH_TOPK, SAEConfig
from tui_lab.core.sae.sae import SparseAutoencoder

# The metadata keys in which SAELens's JumpReLU file says what it was trained as
# (``training_architecture``: "batchtopk"; ``training_architecture_details``: its k,
# threshold rate, prefix sizes ...): the runs table shows it, training resumes by it.
TRAINED_AS = "training_architecture"
TRAINED_DETAILS = "training_architecture_details"


@torch.no_grad()
def update_topk_threshold(sae: SparseAutoencoder, features: torch.Tensor) -> None:
    """Move ``sae``'s running threshold toward the smallest positive activation of ``features``."""
    theta = sae.topk_threshold
    if theta is None:
        return
    positive = features[features > 0]
    if positive.numel() == 0:  # nothing fired: nothing to learn from this batch
        return
    lr = sae.cfg.topk_threshold_lr
    theta.mul_(1.0 - lr).add_(lr * positive.min().to(theta.dtype))


def inference_config(cfg: SAEConfig) -> SAEConfig:
    """The ``jumprelu`` cfg.json a BatchTopK SAE of ``cfg`` is written with (SAELens's keys)."""
    meta = cfg.metadata
    details: dict[str, object] = {"k": cfg.k, "rescale_acts_by_decoder_norm": cfg.rescale_acts_by_decoder_norm,
                                  "topk_threshold_lr": cfg.topk_threshold_lr}
    if cfg.architecture == "matryoshka_batchtopk":
        details.update(matryoshka_widths=list(cfg.matryoshka_widths or []), use_matryoshka_aux_loss=False)
    extra = {**meta.extra, TRAINED_AS: cfg.architecture, TRAINED_DETAILS: details}
    return SAEConfig(
        d_in=cfg.d_in, d_sae=cfg.d_sae, architecture="jumprelu", dtype=cfg.dtype,
        apply_b_dec_to_input=cfg.apply_b_dec_to_input, normalize_activations=cfg.normalize_activations,
        metadata=type(meta)(meta.hook_name, meta.model_name, meta.context_size, meta.prepend_bos, extra),
    )


@torch.no_grad()
def inference_sae(sae: SparseAutoencoder) -> SparseAutoencoder:
    """``sae`` as the JumpReLU SAE it is written as, in eval mode (itself if not a BatchTopK SAE).

    With decoder-norm-scaled ranking, the norms move into the encoder (W_enc and
    b_enc times the norm, W_dec rows divided by it): z then is the scaled
    pre-activation θ was learnt on, and the decoder's rows are unit vectors.
    """
    if sae.cfg.architecture not in BATCH_TOPK or sae.topk_threshold is None:
        return sae
    out = SparseAutoencoder(inference_config(sae.cfg), device=sae.W_enc.device, seed=None)
    W_enc, b_enc, W_dec = sae.W_enc.detach().clone(), sae.b_enc.detach().clone(), sae.W_dec.detach().clone()
    if sae.cfg.rescale_acts_by_decoder_norm:
        norms = W_dec.norm(dim=-1).clamp_min(1e-8)
        W_enc, b_enc, W_dec = W_enc * norms, b_enc * norms, W_dec / norms[:, None]
    out.W_enc.copy_(W_enc)
    out.b_enc.copy_(b_enc)
    out.W_dec.copy_(W_dec)
    out.b_dec.copy_(sae.b_dec.detach())
    assert out.threshold is not None  # a jumprelu SAE has one
    # one float for every feature, rounded once as SAELens's ``.item()`` then ones_like does
    out.threshold.fill_(float(sae.topk_threshold))
    out.folder, out.log_sparsity = sae.folder, sae.log_sparsity
    return out.eval()


def trained_config(cfg: SAEConfig) -> SAEConfig | None:
    """The BatchTopK config a JumpReLU file's metadata says it was trained with, else None."""
    extra = cfg.metadata.extra
    arch, details = extra.get(TRAINED_AS), extra.get(TRAINED_DETAILS)
    if cfg.architecture != "jumprelu" or arch not in BATCH_TOPK or not isinstance(details, dict):
        return None
    meta = cfg.metadata
    kept = {key: value for key, value in extra.items() if key not in (TRAINED_AS, TRAINED_DETAILS)}
    widths = details.get("matryoshka_widths")
    return SAEConfig(
        d_in=cfg.d_in, d_sae=cfg.d_sae, architecture=str(arch), dtype=cfg.dtype,
        apply_b_dec_to_input=cfg.apply_b_dec_to_input, normalize_activations=cfg.normalize_activations,
        k=details.get("k"), topk_threshold_lr=details.get("topk_threshold_lr", 0.01),  # SAEConfig checks them
        rescale_acts_by_decoder_norm=bool(details.get("rescale_acts_by_decoder_norm", False)),
        matryoshka_widths=list(widths) if isinstance(widths, list) else None,
        metadata=type(meta)(meta.hook_name, meta.model_name, meta.context_size, meta.prepend_bos, kept),
    )


@torch.no_grad()
def resumable(sae: SparseAutoencoder) -> SparseAutoencoder:
    """A checkpoint's SAE as it trains: a BatchTopK-trained JumpReLU file back as BatchTopK."""
    trained = trained_config(sae.cfg)
    return sae if trained is None else training_sae(sae, trained)


@torch.no_grad()
def training_sae(sae: SparseAutoencoder, trained: SAEConfig) -> SparseAutoencoder:
    """The BatchTopK SAE of config ``trained`` that ``inference_sae`` wrote as ``sae`` (to resume).

    The lab trains with unit decoder rows and no rescaling, so nothing was folded and
    the weights carry over as they are; θ is any feature's threshold (all are equal).
    """
    out = SparseAutoencoder(trained, device=sae.W_enc.device, seed=None)
    for name in ("W_enc", "b_enc", "W_dec", "b_dec"):
        getattr(out, name).copy_(getattr(sae, name).detach())
    assert out.topk_threshold is not None and sae.threshold is not None
    out.topk_threshold.fill_(float(sae.threshold[0]))
    out.folder, out.log_sparsity = sae.folder, sae.log_sparsity
    return out
