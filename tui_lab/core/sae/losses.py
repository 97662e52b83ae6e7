"""Each architecture's training loss: reconstruction plus what keeps the features sparse and alive.

All three share the reconstruction term, the squared error summed over d_in and
averaged over tokens (SAELens's ``mse_loss``, so its coefficients carry over):

- ``standard``: + l1 · Σ_i f_i ‖W_dec,i‖. Weighting by the decoder row's norm
  stops the SAE from shrinking f and growing the row to dodge the penalty.
- ``topk``: sparsity is the k itself; + aux · ‖e − W_decᵀ z_aux‖², where e is
  the reconstruction's error and z_aux keeps the k_aux = d_in/2 largest
  pre-activations of *dead* features only (Gao et al. 2024, "AuxK"): dead
  features get a gradient toward what the live ones miss, and come back.
- ``jumprelu``: + l0 · Σ_i [z_i > θ_i], the L0 itself, its gradient reaching the
  thresholds through the step's straight-through estimator (``jumprelu.py``).
- ``batchtopk``: as ``topk`` (the k is over the whole batch), AuxK included.
- ``matryoshka_batchtopk``: as ``batchtopk``, + each inner prefix's reconstruction
  error (``matryoshka.py``), all with weight 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tui_lab.core.sae.active_features import (
    ActiveSet,
    active_set,
    aux_reconstruction,
    decode,
    prefix_decodes,
)
from tui_lab.core.sae.activity import fired_counts
from tui_lab.core.sae.config import WITH_K
from tui_lab.core.sae.jumprelu import step
from tui_lab.core.sae.matryoshka import inner_losses
from tui_lab.core.sae.sae import SparseAutoencoder, topk_relu

# Architectures trained with Gao et al.'s AuxK term (their sparsity is a k).
AUX_K = WITH_K


@dataclass(frozen=True)
class Coefficients:
    """The weight of each architecture's extra term (the one its architecture uses)."""

    l1: float = 1.0  # standard
    l0: float = 1.0  # jumprelu
    aux_k: float = 1.0 / 32  # topk (Gao et al.'s α)


@dataclass
class StepLoss:
    """One batch's loss and its parts (tensors: ``total`` carries the gradient)."""

    total: torch.Tensor
    mse: torch.Tensor  # Σ over d_in, mean over tokens
    sparsity: torch.Tensor  # the L1 or L0 term (0 for TopK)
    aux: torch.Tensor  # TopK's dead-feature term (0 otherwise)
    x_hat: torch.Tensor
    features: torch.Tensor
    # Matryoshka: each inner prefix's reconstruction error (in ``total``), smallest prefix first
    inner: tuple[torch.Tensor, ...] = ()
    active: ActiveSet | None = None  # a k-architecture's kept entries (``features``' nonzeros)

    def fired(self) -> tuple[torch.Tensor, int]:
        """(how many tokens each feature fired on (d_sae,), the tokens)."""
        if self.active is not None:
            return self.active.fired(), self.active.n_rows
        return fired_counts(self.features)

    def kept_values(self) -> torch.Tensor:
        """The kept activations (detached): BatchTopK's running threshold averages their minimum."""
        return (self.features if self.active is None else self.active.values).detach()


def training_loss(
    sae: SparseAutoencoder, x: torch.Tensor, coefficients: Coefficients, dead: torch.Tensor | None,
    dense: bool = False, per_token: bool = False,
) -> StepLoss:
    """The loss of ``sae`` on a batch ``x`` (N, d_in); ``dead`` (d_sae,) marks dead features.
    A k-architecture computes it on its kept features only (``active_features``) unless ``dense``;
    ``per_token``: a BatchTopK SAE keeps k features per token (TopK's selection) this step."""
    if sae.cfg.architecture in WITH_K and not dense:
        return active_loss(sae, x, coefficients, dead, per_token)
    if per_token and sae.cfg.k is not None:
        z = sae.pre_acts(x)
        f = topk_relu(z, int(sae.cfg.k))
        x_hat = sae.decode(f)
    else:
        x_hat, f, z = sae(x)
    recon = (x_hat - x).pow(2).sum(dim=-1).mean()
    zero = recon.new_zeros(())
    sparsity, aux = zero, zero
    arch = sae.cfg.architecture
    if arch == "standard":
        sparsity = coefficients.l1 * (f * sae.W_dec.norm(dim=-1)).sum(dim=-1).mean()
    elif arch == "jumprelu":
        assert sae.threshold is not None
        sparsity = coefficients.l0 * step(z, sae.threshold, sae.bandwidth).sum(dim=-1).mean()
    elif arch in AUX_K and dead is not None and coefficients.aux_k > 0:
        aux = coefficients.aux_k * topk_aux_loss(sae, x, x_hat, z, dead)
    inner = tuple(inner_losses(sae, x, f)) if arch == "matryoshka_batchtopk" else ()
    total = recon + sparsity + aux + sum(inner, zero)
    return StepLoss(total, recon, sparsity, aux, x_hat, f, inner)


def active_loss(
    sae: SparseAutoencoder, x: torch.Tensor, coefficients: Coefficients, dead: torch.Tensor | None,
    per_token: bool = False,
) -> StepLoss:
    """``training_loss`` of a k-architecture through its kept entries (``active_features``): the
    same terms, with the decoder's products and both encoder products' gradients sparse."""
    active, z = active_set(sae, x, per_token)
    x_hat = decode(sae, active)
    recon = (x_hat - x).pow(2).sum(dim=-1).mean()
    zero = recon.new_zeros(())
    aux = zero
    if dead is not None and coefficients.aux_k > 0:
        aux = coefficients.aux_k * topk_aux_loss(sae, x, x_hat, z, dead, sparse=True)
    inner: tuple[torch.Tensor, ...] = ()
    if sae.cfg.architecture == "matryoshka_batchtopk":
        widths = list(sae.cfg.matryoshka_widths or [])[:-1]
        inner = tuple((p - x).pow(2).sum(dim=-1).mean() for p in prefix_decodes(sae, active, widths))
    total = recon + aux + sum(inner, zero)
    return StepLoss(total, recon, zero, aux, x_hat, active.dense(), inner, active)


def topk_aux_loss(
    sae: SparseAutoencoder, x: torch.Tensor, x_hat: torch.Tensor, z: torch.Tensor, dead: torch.Tensor,
    sparse: bool = False,
) -> torch.Tensor:
    """Gao et al.'s AuxK: the dead features' top k_aux reconstruct the live ones' error.

    Scaled down while few features are dead (SAELens), so a handful of dead
    features do not get a full-size gradient each. ``sparse``: ê through the chosen
    entries' decoder rows only (``active_features.aux_reconstruction``), the same value.
    """
    n_dead = int(dead.sum())
    if n_dead == 0:
        return z.new_zeros(())
    k_aux = x.shape[-1] // 2
    scale = min(n_dead / k_aux, 1.0)
    k_aux = min(k_aux, n_dead)
    error = (x - x_hat).detach()  # the target: what the live features missed
    if sparse:
        return scale * (aux_reconstruction(sae, z, dead, k_aux) - error).pow(2).sum(dim=-1).mean()
    dead_z = torch.where(dead, z, torch.full_like(z, -torch.inf))
    values, indices = dead_z.topk(k_aux, dim=-1, sorted=False)
    z_aux = torch.zeros_like(z).scatter(-1, indices, values.relu())
    # No b_dec: the error has no offset to rebuild (Gao et al.'s ê = W_dec z).
    error_hat = z_aux @ sae.W_dec
    return scale * (error_hat - error).pow(2).sum(dim=-1).mean()
