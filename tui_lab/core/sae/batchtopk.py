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
k = 16); from 0, θ is low by 0.99^steps of its value (5% at 300 steps). At the end of
training the running θ is replaced by a calibrated one (``calibrate_threshold``):
on the last ``CALIBRATION_ROWS`` rows the trainer trained on (training tokens,
never held-out ones), with the final weights, θ is the (k·N+1)-th largest of the
N rows' ReLU(z) (z ranked as training ranks it, decoder-norm scaled when
``rescale_acts_by_decoder_norm``), so exactly k·N of them exceed it: BatchTopK's
own selection over one batch of N rows. The running average lags the shrinking
activations of a short run (on char-lm it left held-out L0 at 15.0 for k = 16);
the calibrated θ gives L0 = k on those rows and about k on others (SAELens writes
its running θ as it is; the file's format is the same, only the threshold differs). For
inference the SAE is written as SAELens writes it: a ``jumprelu`` SAE with
every feature's threshold θ, the decoder's row norms folded into the encoder
first when the pre-activations were ranked scaled by them (SAELens's
``process_state_dict_for_saving_inference``). A token then keeps the features
with ReLU(z) > θ, on average about k of them.

Training starts as TopK (``TrainSettings.topk_start_steps``; the recipe's
``TOPK_START``: half the steps), then selects over the batch. Measured on char-lm
(1,024 features, k = 16, 300,000 and 400,000 rows, three seeds): BatchTopK from the
first step ended 0.002-0.005 of held-out explained variance below TopK at the same
L0, with the TopK start 0.0002-0.0010 above it, and TopK all the way (only the
threshold added at the end) 0.01 below, so the gain is the batch-wide half's. The
likely reason: a batch-wide selection over a still-random dictionary spends the
features on the loudest tokens, and the quiet ones' directions start to be learnt late.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from tui_lab.core.sae.config import BATCH_TOPK, SAEConfig
from tui_lab.core.sae.sae import SparseAutoencoder

# The metadata keys in which SAELens's JumpReLU file says what it was trained as
# (``training_architecture``: "batchtopk"; ``training_architecture_details``: its k,
# threshold rate, prefix sizes ...): the runs table shows it, training resumes by it.
TRAINED_AS = "training_architecture"
TRAINED_DETAILS = "training_architecture_details"
# Rows the inference threshold is calibrated on at the end of training: k·N entries of
# N·d_sae pick a quantile that 16,384 rows pin to well under 1% of k (char-lm: 262,144 of 16.8 M).
CALIBRATION_ROWS = 16_384


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


@torch.no_grad()
def calibrated_threshold(sae: SparseAutoencoder, rows: Iterable[torch.Tensor]) -> float | None:
    """θ with exactly int(k·N) of the N ``rows``' ReLU(z) above it (fewer only on ties), else None.

    The (k·N+1)-th largest ReLU(z) over all rows at once (0 when no more than k·N are
    positive: every positive one is kept), found batch by batch by keeping the k·N+1
    largest seen so far, so no (N, d_sae) tensor is ever held. z is ``pre_acts``, as
    ``batch_topk_relu`` ranks it in training.
    """
    assert sae.cfg.k is not None
    batches = [x.reshape(-1, x.shape[-1]) for x in rows]
    keep = int(sae.cfg.k * sum(x.shape[0] for x in batches))  # N known first: a batch may hold many of the top
    if keep == 0:
        return None
    best = torch.empty(0, dtype=sae.W_enc.dtype, device=sae.W_enc.device)
    for x in batches:
        cand = torch.cat([best, sae.pre_acts(x).relu().flatten()])
        best = cand.topk(min(keep + 1, cand.numel()), sorted=False).values
    return 0.0 if best.numel() <= keep else float(best.min())


@torch.no_grad()
def calibrate_threshold(sae: SparseAutoencoder, rows: Iterable[torch.Tensor]) -> None:
    """Set a BatchTopK ``sae``'s threshold to ``calibrated_threshold`` of ``rows`` (else nothing)."""
    if sae.topk_threshold is None:
        return
    theta = calibrated_threshold(sae, rows)
    if theta is not None:
        sae.topk_threshold.fill_(theta)


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
