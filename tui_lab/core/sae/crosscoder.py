"""An acausal crosscoder: one dictionary read and written at the same hook of n sources.

Anthropic's crosscoders (Lindsey et al. 2024, "Sparse Crosscoders for
Cross-Layer Features and Model Diffing") and dictionary_learning's
``CrossCoder``: with x (..., n, d) the activations of the same tokens at the
same hook of n sources (two snapshots of a run, a model and its fine-tune),

    f     = ReLU(Σ_s x_s · W_enc[s] + b_enc)          W_enc (n, d, F), b_enc (F)
    x̂_s   = f · W_dec[:, s] + b_dec[s]                 W_dec (F, n, d), b_dec (n, d)

The encoder reads every source; each source has its own decoder. Training
(``crosscoder_training.py``) penalises each feature's activation by the sum of
its decoder norms over the sources, so a feature the reconstruction at one
source does not need lets its decoder there shrink to zero: the relative norm
``||d_B|| / (||d_A|| + ||d_B||)`` says which source a feature belongs to.

Activations are scaled per source (``scale``, (n,)) so that their mean squared
norm is d, as the model-diffing replication does: the sparsity coefficient
then means the same at every hook and snapshot. ``encode`` takes and ``decode``
returns activations in the model's own units; the scale is applied inside.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from tui_lab.core.sae.errors import SAEError

ARCHITECTURE = "crosscoder"
DEC_INIT_NORM = 0.08  # each decoder row's norm at the start (the model-diffing replication's)


@dataclass(frozen=True)
class SourceSpec:
    """One source: a run folder (``at_step``: its history snapshot, None: its final weights) or a model."""

    source: str
    at_step: int | None = None

    @property
    def label(self) -> str:
        """How the source reads in lists: ``step 200`` or the folder's name."""
        return f"step {self.at_step}" if self.at_step is not None else self.source.rstrip("/").split("/")[-1]

    def to_dict(self) -> dict[str, object]:
        return {"source": self.source, "at_step": self.at_step}


@dataclass(frozen=True)
class CrosscoderConfig:
    """What the crosscoder is (its sizes) and what it was trained on (hook, sources, context)."""

    d_in: int
    d_sae: int
    hook: str
    sources: tuple[SourceSpec, ...]
    context_size: int = 0
    l1_coefficient: float = 0.0
    model_name: str | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def n_sources(self) -> int:
        return len(self.sources)

    def __post_init__(self) -> None:
        if self.d_in < 1 or self.d_sae < 1:
            raise SAEError(f"a crosscoder needs d_in and d_sae >= 1, got {self.d_in} and {self.d_sae}")
        if len(self.sources) < 2:
            raise SAEError(f"a crosscoder reads two or more sources, got {len(self.sources)}")


class Crosscoder(nn.Module):
    """The acausal crosscoder of the module docstring."""

    def __init__(self, cfg: CrosscoderConfig, device: torch.device | str = "cpu", seed: int | None = 0) -> None:
        super().__init__()
        self.cfg = cfg
        n, d, f = cfg.n_sources, cfg.d_in, cfg.d_sae
        self.W_enc = nn.Parameter(torch.empty(n, d, f, device=device))
        self.b_enc = nn.Parameter(torch.zeros(f, device=device))
        self.W_dec = nn.Parameter(torch.empty(f, n, d, device=device))
        self.b_dec = nn.Parameter(torch.zeros(n, d, device=device))
        self.register_buffer("scale", torch.ones(n, device=device))
        self.scale: torch.Tensor
        if seed is not None:
            self.initialize(seed)

    @torch.no_grad()
    def initialize(self, seed: int = 0) -> None:
        """Decoder rows in random directions of norm DEC_INIT_NORM; the encoder their transpose."""
        g = torch.Generator().manual_seed(seed)
        w = torch.randn(self.W_dec.shape, generator=g)  # (F, n, d)
        w = w / w.norm(dim=-1, keepdim=True) * DEC_INIT_NORM
        self.W_dec.copy_(w.to(self.W_dec))
        self.W_enc.copy_(w.permute(1, 2, 0).to(self.W_enc))  # (n, d, F)
        self.b_enc.zero_()
        self.b_dec.zero_()

    def check_input(self, x: torch.Tensor) -> None:
        """SAEError (one line) unless x is (..., n, d) with this crosscoder's n and d."""
        want = (self.cfg.n_sources, self.cfg.d_in)
        if x.dim() < 2 or tuple(x.shape[-2:]) != want:
            raise SAEError(f"the crosscoder reads (..., {want[0]}, {want[1]}) activations, got {tuple(x.shape)}")

    def scaled(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., n, d) in the units training works in (each source times its scale)."""
        return x.to(self.W_enc.dtype) * self.scale[:, None]

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """(..., F) feature activations of x (..., n, d), in the model's units."""
        self.check_input(x)
        return self.encode_scaled(self.scaled(x))

    def encode_scaled(self, xs: torch.Tensor) -> torch.Tensor:
        """(..., F) feature activations of already scaled activations."""
        return torch.relu(torch.einsum("...nd,ndf->...f", xs, self.W_enc) + self.b_enc)

    def decode_scaled(self, f: torch.Tensor) -> torch.Tensor:
        """(..., n, d) the reconstruction at every source, in training's units."""
        return torch.einsum("...f,fnd->...nd", f.to(self.W_dec.dtype), self.W_dec) + self.b_dec

    def decode(self, f: torch.Tensor) -> torch.Tensor:
        """(..., n, d) the reconstruction at every source, in the model's units."""
        return self.decode_scaled(f) / self.scale[:, None]

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(reconstruction, features) of x (..., n, d), in the model's units."""
        f = self.encode(x)
        return self.decode(f), f

    def decoder_norms(self) -> torch.Tensor:
        """(F, n) each feature's decoder norm at each source (on the CPU, where the lists are made)."""
        return self.W_dec.detach().norm(dim=-1).cpu()
