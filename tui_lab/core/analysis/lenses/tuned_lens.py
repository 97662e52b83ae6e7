"""The tuned lens (Belrose et al. 2023): one affine translator per layer.

Layer l's output ``h`` is read as ``h + A_l h + b_l`` through the model's final norm
and head. ``A_l`` and ``b_l`` start at zero, so an untrained tuned lens is the logit
lens, and weight decay pulls towards the identity rather than towards zero (the
residual form tuned-lens itself uses). The last layer has no translator: its output
is the final residual, so its row is the model's own output by construction.

Training (``tuned_lens_training.py``) fits each translator to minimise the KL from
the output distribution to the translated layer's.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class TunedLens(nn.Module):
    """Translators (``nn.Linear(d_model, d_model)``, float32) for layers 0..n_layers-2."""

    kind = "tuned"

    def __init__(self, d_model: int, n_layers: int) -> None:
        super().__init__()
        self.d_model = d_model
        self.n_layers = n_layers
        self.translators = nn.ModuleList(nn.Linear(d_model, d_model) for _ in range(n_layers - 1))
        for t in self.translators:
            assert isinstance(t, nn.Linear)
            nn.init.zeros_(t.weight)
            nn.init.zeros_(t.bias)

    def translator(self, layer: int) -> nn.Linear:
        """Layer ``layer``'s translator (the ``A``, ``b`` of ``h + A h + b``)."""
        t = self.translators[layer]
        assert isinstance(t, nn.Linear)
        return t

    def translate(self, layer: int, stream: Tensor) -> Tensor:
        """``stream + A stream + b`` for layer ``layer`` (the last layer: ``stream`` itself)."""
        if layer == self.n_layers - 1:
            return stream
        t = self.translator(layer)
        h = stream.to(t.weight.device, torch.float32)  # a lens opened from disk sits on the CPU
        return (h + t(h)).to(stream.device)

    @torch.no_grad()
    def affine(self, layer: int) -> tuple[Tensor, Tensor]:
        """The whole map of layer ``layer`` as (M, c) with translate(h) = M h + c: (I + A, b)."""
        if layer == self.n_layers - 1:
            return torch.eye(self.d_model), torch.zeros(self.d_model)
        t = self.translator(layer)
        return torch.eye(self.d_model) + t.weight.detach().cpu(), t.bias.detach().cpu().clone()
