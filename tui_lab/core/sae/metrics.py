"""How good an SAE is: sparsity (L0), reconstruction (MSE, explained variance, FVU),
dead features, and the model's cross-entropy recovered with the SAE spliced in.

Each takes plain tensors or numbers (and, for the cross-entropy, a callable that
runs the model with a replacement at the hook), so none depends on a model's internals.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

# A function from the hook's activation to what replaces it.
Replacement = Callable[[torch.Tensor], torch.Tensor]
# Logits (..., T, vocab) of a fixed batch of text with the hook's activation replaced
# by ``replacement(activation)``, or left alone when given None.
LogitsUnder = Callable[[Replacement | None], torch.Tensor]


def l0(features: torch.Tensor) -> float:
    """Mean number of non-zero features per token of ``features`` (..., d_sae)."""
    return float((features != 0).sum(dim=-1).float().mean())


def mse(x: torch.Tensor, x_hat: torch.Tensor) -> float:
    """Mean squared error per element, as ``F.mse_loss`` (SAELens's eval ``mse``)."""
    return float(F.mse_loss(x_hat.detach().float(), x.detach().float()))


def explained_variance(x: torch.Tensor, x_hat: torch.Tensor) -> float:
    """1 − Σ‖x − x̂‖² / Σ‖x − x̄‖² over the tokens of x (..., d_in), x̄ their mean.

    The share of the activations' variance (summed over dimensions) the
    reconstruction accounts for; 1 − this is the fraction of variance unexplained.
    """
    x2 = x.detach().reshape(-1, x.shape[-1]).double()
    r2 = x_hat.detach().reshape(-1, x_hat.shape[-1]).double()
    residual = (x2 - r2).pow(2).sum()
    total = (x2 - x2.mean(dim=0)).pow(2).sum()
    return float(1.0 - residual / total) if total > 0 else float("nan")


def fvu(x: torch.Tensor, x_hat: torch.Tensor) -> float:
    """The fraction of variance unexplained: 1 − explained variance."""
    return 1.0 - explained_variance(x, x_hat)


def dead_fraction(tokens_since_fired: torch.Tensor, window: int) -> float:
    """Share of features that have not fired in the last ``window`` tokens."""
    return float((tokens_since_fired >= window).float().mean())


def ce_loss_recovered(clean: float, zero_ablated: float, reconstructed: float) -> float:
    """(CE zero-ablated − CE with the reconstruction) / (CE zero-ablated − CE clean).

    1 when splicing the SAE in costs nothing, 0 when it is as bad as zeroing the
    hook; NaN when zeroing the hook does not change the loss (nothing to recover).
    """
    gap = zero_ablated - clean
    if gap == 0 or not math.isfinite(gap):
        return float("nan")
    return (zero_ablated - reconstructed) / gap


def next_token_ce(logits: torch.Tensor, tokens: torch.Tensor, shift: int = 1) -> float:
    """Mean cross-entropy of ``logits`` (..., T, V) predicting ``tokens`` (..., T) ``shift``
    steps on: 1 for a language model's next token, 0 for a token at its own position (an
    encoder's input, a decoder's teacher-forced target)."""
    vocab = logits.shape[-1]
    t = logits.shape[-2]
    pred = logits[..., : t - shift, :].reshape(-1, vocab).float()
    return float(F.cross_entropy(pred, tokens[..., shift:].reshape(-1)))


@dataclass(frozen=True)
class CELosses:
    """The three cross-entropies of ``ce_loss_recovered``, and the score."""

    clean: float
    zero_ablated: float
    reconstructed: float

    @property
    def recovered(self) -> float:
        return ce_loss_recovered(self.clean, self.zero_ablated, self.reconstructed)


@torch.no_grad()
def ce_losses(logits_under: LogitsUnder, tokens: torch.Tensor, reconstruct: Replacement, shift: int = 1
              ) -> CELosses:
    """The model's CE on ``tokens`` (``shift`` as ``next_token_ce``) clean, with the hook
    zeroed, and reconstructed.

    ``logits_under(replacement)`` runs the model on ``tokens`` with the hook's
    activation replaced; ``reconstruct`` is the SAE's decode ∘ encode.
    """

    def zero(act: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(act)

    def spliced(act: torch.Tensor) -> torch.Tensor:
        return reconstruct(act).to(act.dtype)

    return CELosses(
        clean=next_token_ce(logits_under(None), tokens, shift),
        zero_ablated=next_token_ce(logits_under(zero), tokens, shift),
        reconstructed=next_token_ce(logits_under(spliced), tokens, shift),
    )
