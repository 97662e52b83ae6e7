"""The sparse autoencoder: ``encode`` activations into features, ``decode`` features back.

With x (..., d_in) and, when ``apply_b_dec_to_input``, x̄ = x − b_dec (else x̄ = x):

    z = x̄ · W_enc + b_enc                          pre-activations (..., d_sae)
    standard:  f = ReLU(z)
    topk:      f = ReLU(z) on the k largest z of each row, 0 elsewhere
    jumprelu:  f = ReLU(z) · [z > threshold]       one threshold per feature
    batchtopk (and matryoshka_batchtopk), training: f = ReLU(z) on the k·N largest
               z of the whole batch of N rows, 0 elsewhere (Bussmann et al. 2024);
               outside training: ReLU(z) · [z > θ] with θ the running threshold
               (``batchtopk.py``), which is how it is written for inference
    x̂ = f · W_dec + b_dec                          reconstruction (..., d_in)

The parameter names and shapes are SAELens's and its files' (W_enc (d_in, d_sae),
W_dec (d_sae, d_in)), so ``state_dict()`` is ``sae_weights.safetensors``'s content.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from tui_lab.core.sae.config import BATCH_TOPK, WITH_K, SAEConfig
from tui_lab.core.sae.jumprelu import jumprelu

# Architectures whose training needs unit-norm decoder rows: TopK (Gao et al. 2024)
# and JumpReLU (Rajamanoharan et al. 2024) penalise or rank f itself, so a decoder row
# that grew would let its feature shrink for free. "standard" instead weights its L1
# by the decoder norms (SAELens, Anthropic's April 2024 update), which the scale
# cannot fool, so its rows are left free.
UNIT_DECODER = frozenset({"topk", "jumprelu"}) | BATCH_TOPK


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype ``cfg.json`` names (``float32`` or SAELens's older ``torch.float32``)."""
    dtype = getattr(torch, name.removeprefix("torch."))
    assert isinstance(dtype, torch.dtype)
    return dtype


def topk_relu(z: torch.Tensor, k: int) -> torch.Tensor:
    """ReLU of the k largest entries of each row of ``z``, zeros elsewhere (same shape)."""
    values, indices = torch.topk(z, k, dim=-1, sorted=False)
    return torch.zeros_like(z).scatter(-1, indices, values.relu())


def batch_topk_relu(z: torch.Tensor, k: float) -> torch.Tensor:
    """ReLU(z) on the int(k·N) largest entries of the whole batch z (..., d_sae), N its rows.

    One selection over every row at once, so a row may keep more or fewer than k;
    exactly int(k·N) are kept when that many entries are positive (SAELens's and
    dictionary_learning's BatchTopK: ReLU first, then the top-k of the flattened batch).
    """
    acts = z.relu()
    flat = acts.flatten()
    rows = acts.shape[:-1].numel()
    values, indices = flat.topk(int(k * rows), sorted=False)
    return torch.zeros_like(flat).scatter(0, indices, values).reshape(acts.shape)


class SparseAutoencoder(nn.Module):
    """An SAE of one of SAELens's architectures; ``cfg`` is its ``cfg.json``."""

    threshold: nn.Parameter | None
    topk_threshold: torch.Tensor | None  # BatchTopK: the running threshold (float64, a buffer)
    folder: Path | None  # where it was read from, if it was
    log_sparsity: torch.Tensor | None  # sparsity.safetensors's log10 firing rates, if any

    def __init__(self, cfg: SAEConfig, device: torch.device | str = "cpu", seed: int | None = 0) -> None:
        super().__init__()
        self.cfg = cfg
        dtype = torch_dtype(cfg.dtype)
        d_in, d_sae = cfg.d_in, cfg.d_sae
        self.W_enc = nn.Parameter(torch.empty(d_in, d_sae, dtype=dtype, device=device))
        self.b_enc = nn.Parameter(torch.zeros(d_sae, dtype=dtype, device=device))
        self.W_dec = nn.Parameter(torch.empty(d_sae, d_in, dtype=dtype, device=device))
        self.b_dec = nn.Parameter(torch.zeros(d_in, dtype=dtype, device=device))
        self.threshold = None
        if cfg.architecture == "jumprelu":
            self.threshold = nn.Parameter(torch.zeros(d_sae, dtype=dtype, device=device))
        # float64 as SAELens keeps it: a moving average of small numbers drifts in float32
        self.register_buffer("topk_threshold", torch.zeros((), dtype=torch.float64, device=device)
                             if cfg.architecture in BATCH_TOPK else None)
        # The window of the threshold's straight-through estimator (training only).
        self.bandwidth = 0.05
        # BatchTopK: the last training batch's smallest kept activation (``active_features.pick``
        # looks above a share of it first)
        self.batch_floor = 0.0
        self.folder = None
        self.log_sparsity = None
        self.initialize(seed)

    @torch.no_grad()
    def initialize(self, seed: int | None = 0, threshold: float = 0.0) -> None:
        """Random unit decoder rows and the encoder as their transpose (Gao et al.; SAELens).

        Tied at the start so each feature first reads the direction it writes: features
        begin as matched pairs and training only has to refine them.
        """
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        rows = torch.randn(self.cfg.d_sae, self.cfg.d_in, generator=gen, dtype=torch.float64)
        rows = rows / rows.norm(dim=-1, keepdim=True)
        self.W_dec.copy_(rows.to(self.W_dec))
        self.W_enc.copy_(self.W_dec.T)
        self.b_enc.zero_()
        self.b_dec.zero_()
        if self.threshold is not None:
            self.threshold.fill_(threshold)
        if self.topk_threshold is not None:
            self.topk_threshold.zero_()

    def pre_acts(self, x: torch.Tensor) -> torch.Tensor:
        """The pre-activations z (..., d_sae) of activations x (..., d_in)."""
        x = x.to(self.W_enc.dtype)
        if self.cfg.apply_b_dec_to_input:
            x = x - self.b_dec
        z = x @ self.W_enc + self.b_enc
        if self.cfg.architecture in WITH_K and self.cfg.rescale_acts_by_decoder_norm:
            z = z * self.W_dec.norm(dim=-1)
        return z

    def activate(self, z: torch.Tensor) -> torch.Tensor:
        """Feature activations f from pre-activations z, by the architecture's nonlinearity."""
        arch = self.cfg.architecture
        if arch == "topk":
            assert isinstance(self.cfg.k, int)  # validated by SAEConfig
            return topk_relu(z, self.cfg.k)
        if arch == "jumprelu":
            assert self.threshold is not None
            # ReLU first: SAELens's ReLU(z)·[z > θ] for any θ, and jumprelu's estimator
            # still trains θ where it matters (θ > 0).
            return jumprelu(z.relu(), self.threshold, self.bandwidth)
        if self.topk_threshold is not None:
            assert self.cfg.k is not None  # validated by SAEConfig
            if self.training:
                return batch_topk_relu(z, self.cfg.k)
            # compared in z's dtype, as the float32 threshold SAELens writes for inference
            return z.relu() * (z > self.topk_threshold.to(z.dtype)).to(z.dtype)
        return z.relu()

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Feature activations (..., d_sae) of activations x (..., d_in)."""
        return self.activate(self.pre_acts(x))

    def decode(self, f: torch.Tensor) -> torch.Tensor:
        """The reconstruction (..., d_in) of feature activations f (..., d_sae)."""
        f = f.to(self.W_dec.dtype)
        if self.cfg.architecture in WITH_K and self.cfg.rescale_acts_by_decoder_norm:
            f = f / self.W_dec.norm(dim=-1)
        return f @ self.W_dec + self.b_dec

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(reconstruction, features, pre-activations) of x: what a training step needs."""
        z = self.pre_acts(x)
        f = self.activate(z)
        return self.decode(f), f, z

    @property
    def needs_unit_decoder(self) -> bool:
        """Whether training keeps W_dec's rows at unit norm (see UNIT_DECODER)."""
        return self.cfg.architecture in UNIT_DECODER

    @torch.no_grad()
    def normalize_decoder(self) -> None:
        """Scale each decoder row back to unit norm (after an optimiser step)."""
        self.W_dec.div_(self.W_dec.norm(dim=-1, keepdim=True).clamp_min(1e-12))

    @torch.no_grad()
    def remove_parallel_gradient(self) -> None:
        """Drop the part of W_dec's gradient along each row (before an optimiser step).

        That part would only change the row's norm, which ``normalize_decoder`` undoes;
        left in, Adam's moments would keep pushing against the constraint (Bricken et
        al. 2023).
        """
        grad = self.W_dec.grad
        if grad is None:
            return
        rows = self.W_dec / self.W_dec.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        grad.sub_((grad * rows).sum(dim=-1, keepdim=True) * rows)
