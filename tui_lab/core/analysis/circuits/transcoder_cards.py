"""A transcoder feature as the Features pane's card shows an SAE's: contexts and logit effects.

The SAE feature table and its cache (``core/sae/feature_table.py``, ``feature_cache.py``)
read an SAE at one hook. A transcoder layer encodes its input hook as an SAE encodes its
site, so ``as_sae`` writes it as one (W_enc transposed, nothing subtracted from the input)
and the table, cache and card code serve it unchanged. Its activations are
``Transcoder.encode``'s wherever that is positive: a JumpReLU threshold below 0 would let
the transcoder give small negatives, which a table of firings leaves out (θ read as ≥ 0).

Logit effects are the Circuit pane's labels' (``feature_labels.top_tokens``): the decoder
row scaled by the final norm's gain, through the unembedding, demeaned over the vocabulary.
``label_unembedding`` is that map as a (d_model, V) matrix, so the card's
``logit_effects`` (W_dec[f] · W_U) gives those numbers, the top three being the label.
"""

from __future__ import annotations

import torch

from tui_lab.core.analysis.circuits.replacement_model import decoder_only, final_norm
from tui_lab.core.opening.in_hand import ModelInHand
from tui_lab.core.sae.config import SAEConfig, SAEMetadata
from tui_lab.core.sae.sae import SparseAutoencoder
from tui_lab.core.sae.transcoder import Transcoder

# The transcoder's nonlinearity by the SAE architecture that computes it on the same z.
SAE_ARCHITECTURE = {"relu": "standard", "topk": "topk", "jumprelu": "jumprelu"}


@torch.no_grad()
def as_sae(tc: Transcoder, hook: str) -> SparseAutoencoder:
    """``tc``'s encoder as an SAE at ``hook`` (its input hook): the same features on the same inputs."""
    cfg = SAEConfig(d_in=tc.d_model, d_sae=tc.d_tc, architecture=SAE_ARCHITECTURE[tc.architecture],
                    dtype=str(tc.W_enc.dtype).removeprefix("torch."), apply_b_dec_to_input=False, k=tc.k,
                    metadata=SAEMetadata(hook_name=hook))
    sae = SparseAutoencoder(cfg, device=tc.W_enc.device)
    sae.W_enc.copy_(tc.W_enc.T)
    sae.b_enc.copy_(tc.b_enc)
    sae.W_dec.copy_(tc.W_dec)
    sae.b_dec.copy_(tc.b_dec)
    if sae.threshold is not None and tc.threshold is not None:
        sae.threshold.copy_(tc.threshold.clamp_min(0))
    return sae.eval()


@torch.no_grad()
def label_unembedding(model: ModelInHand) -> torch.Tensor:
    """(d_model, V): the final norm's gain folded into the unembedding, demeaned over the vocabulary
    (a decoder row times it is ``top_tokens``'s effect)."""
    w_u = decoder_only(model).lm_head.weight.detach().float().T  # (d, V)
    gain = getattr(final_norm(model), "weight", None)
    if isinstance(gain, torch.Tensor):
        w_u = gain.detach().float()[:, None] * w_u
    return w_u - w_u.mean(dim=1, keepdim=True)
