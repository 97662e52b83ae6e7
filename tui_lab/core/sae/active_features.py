"""A k-SAE's training step on the features it keeps: pick them without a gradient, then
compute only their activations and their decoder rows with one.

TopK, BatchTopK and Matryoshka BatchTopK keep k of d_sae features per token (on
average), so the dense path of ``SparseAutoencoder.forward`` spends its decoder
product, and both products' backward passes, on zeros: of the six (N, d_in, d_sae)
matrix products of a step, four touch only the kept entries' rows and columns. Here
the encoder stays dense (its product and its weight gradient: two of the six),
the kept entries are chosen from them exactly as ``topk_relu`` and ``batch_topk_relu``
choose, and the reconstruction is a weighted sum of the kept entries' decoder rows
(``embedding_bag``: gathered, scaled and summed in one pass, forward and backward; Gao
et al. 2024 train their TopK SAEs through the same sparse decoder). The loss and every gradient equal the dense path's up
to float rounding (``tests/core/sae/test_active_features.py`` checks them against it).

Entries whose ReLU is 0 are dropped: they add nothing to the reconstruction and pass
no gradient through the ReLU, in either path.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from tui_lab.core.sae.sae import SparseAutoencoder

# BatchTopK's selection looks only at activations above this share of the last batch's
# smallest kept one, and over the whole batch when fewer than k·N lie above it: the same
# entries, found in a fraction of the time (the smallest kept value moves by a few
# percent from one batch to the next).
FLOOR_SHARE = 0.8


@dataclass(frozen=True)
class ActiveSet:
    """The kept entries of a batch of N tokens, sorted by token: ``rows``, ``feats``, their
    activations ``values`` (with a gradient to the encoder) and each token's first entry
    (``offsets``, N): ``f``'s nonzero entries in the dense path."""

    rows: torch.Tensor  # (nnz,) long
    feats: torch.Tensor  # (nnz,) long
    values: torch.Tensor  # (nnz,)
    offsets: torch.Tensor  # (N,) long
    d_sae: int

    def dense(self) -> torch.Tensor:
        """The features f (N, d_sae), detached: for counting which fired and for reports."""
        out = self.values.new_zeros(self.n_rows, self.d_sae)
        return out.index_put_((self.rows, self.feats), self.values.detach())

    @property
    def n_rows(self) -> int:
        return int(self.offsets.shape[0])

    def fired(self) -> torch.Tensor:
        """(d_sae,) how many of the batch's tokens each feature fired on."""
        return torch.bincount(self.feats, minlength=self.d_sae)

    def where(self, keep: torch.Tensor) -> ActiveSet:
        """The entries where ``keep`` (nnz,) holds."""
        rows = self.rows[keep]
        return ActiveSet(rows, self.feats[keep], self.values[keep], offsets_of(rows, self.n_rows), self.d_sae)


def offsets_of(rows: torch.Tensor, n_rows: int) -> torch.Tensor:
    """Each token's first entry in ``rows`` (sorted): ``embedding_bag``'s offsets."""
    counts = torch.bincount(rows, minlength=n_rows)
    return torch.cumsum(counts, 0) - counts


def top_per_row(z: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, feats), by row, of each row's k largest z that are positive: ``topk_relu``'s nonzeros."""
    values, feats = z.topk(k, dim=-1, sorted=False)
    rows = torch.arange(z.shape[0], device=z.device).unsqueeze(1).expand_as(feats)
    keep = values > 0
    return rows[keep], feats[keep]


def top_of_batch(z: torch.Tensor, k: float, floor: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, feats), by row, of the int(k·N) largest ReLU(z) of the batch that are positive:
    ``batch_topk_relu``'s nonzeros. ``floor``: a value the kept ones are likely above
    (looked at first; the whole batch when fewer than k·N exceed it)."""
    n, d_sae = z.shape
    keep = int(k * n)
    flat = z.flatten()
    candidates = (flat > max(floor, 0.0)).nonzero().squeeze(1)
    if candidates.numel() < keep:  # the floor was too high: every positive entry competes
        candidates = (flat > 0).nonzero().squeeze(1)
    if candidates.numel() > keep:
        candidates = candidates[flat[candidates].topk(keep, sorted=False).indices].sort().values
    return candidates // d_sae, candidates % d_sae


def pick(sae: SparseAutoencoder, z: torch.Tensor, per_token: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """The entries the SAE's architecture keeps from pre-activations z (N, d_sae); ``per_token``:
    k per token even for BatchTopK (its start, ``TrainSettings.topk_start_steps``)."""
    k = sae.cfg.k
    assert k is not None  # a k-architecture: validated by SAEConfig
    if sae.topk_threshold is None or per_token:
        return top_per_row(z, int(k))
    rows, feats = top_of_batch(z, k, FLOOR_SHARE * sae.batch_floor)
    sae.batch_floor = float(z[rows, feats].min()) if rows.numel() else 0.0
    return rows, feats


def pre_acts(sae: SparseAutoencoder, x: torch.Tensor) -> torch.Tensor:
    """``SparseAutoencoder.pre_acts`` with b_dec folded into the bias (x carries no gradient, so
    b_dec's needs no (N, d_sae, d_in) product of its own)."""
    bias = sae.b_enc - sae.b_dec @ sae.W_enc if sae.cfg.apply_b_dec_to_input else sae.b_enc
    z = torch.addmm(bias, x.to(sae.W_enc.dtype), sae.W_enc)
    if sae.cfg.rescale_acts_by_decoder_norm:
        z = z * sae.W_dec.norm(dim=-1)
    return z


def active_set(sae: SparseAutoencoder, x: torch.Tensor, per_token: bool = False) -> tuple[ActiveSet, torch.Tensor]:
    """The batch's kept entries with their activations, and the pre-activations z (with a gradient)."""
    z = pre_acts(sae, x)
    rows, feats = pick(sae, z.detach(), per_token)
    return ActiveSet(rows, feats, z[rows, feats], offsets_of(rows, z.shape[0]), z.shape[1]), z


def decode_entries(sae: SparseAutoencoder, active: ActiveSet, unscale: bool = True) -> torch.Tensor:
    """Σ over each token's entries of value · W_dec[feat] (N, d_in), without b_dec. ``unscale``:
    divide by the decoder row's norm first, as ``decode`` does with decoder-norm ranking."""
    values = active.values
    if unscale and sae.cfg.rescale_acts_by_decoder_norm:
        values = values / sae.W_dec.norm(dim=-1)[active.feats]
    return F.embedding_bag(active.feats, sae.W_dec, active.offsets, mode="sum", per_sample_weights=values)


def decode(sae: SparseAutoencoder, active: ActiveSet) -> torch.Tensor:
    """The reconstruction x̂ (N, d_in) from the kept entries: ``SparseAutoencoder.decode``."""
    return decode_entries(sae, active) + sae.b_dec


def prefix_decodes(sae: SparseAutoencoder, active: ActiveSet, widths: list[int]) -> list[torch.Tensor]:
    """Matryoshka's x̂_j for each width (increasing): the entries of features below it only."""
    return [decode(sae, active.where(active.feats < width)) for width in widths]


def aux_reconstruction(sae: SparseAutoencoder, z: torch.Tensor, dead: torch.Tensor, k_aux: int) -> torch.Tensor:
    """AuxK's ê (N, d_in): each row's k_aux largest z among dead features, ReLU'd, through W_dec
    (no b_dec, no unscaling: ``losses.topk_aux_loss``'s z_aux @ W_dec)."""
    dead_z = torch.where(dead, z.detach(), torch.full_like(z, -torch.inf, requires_grad=False))
    rows, feats = top_per_row(dead_z, k_aux)
    aux = ActiveSet(rows, feats, z[rows, feats], offsets_of(rows, z.shape[0]), z.shape[1])
    return decode_entries(sae, aux, unscale=False)
