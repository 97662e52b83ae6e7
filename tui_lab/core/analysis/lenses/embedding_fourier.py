"""The Fourier spectrum of a modular-arithmetic model's embedding (Nanda et al. 2023).

A model that has grokked ``(a + b) mod p`` represents each residue ``a`` by
``cos(2 pi k a / p)`` and ``sin(2 pi k a / p)`` for a few key frequencies
``k``, and adds by rotating. So the embedding's rows for the residues
``0..p-1``, read as ``d_model`` signals over ``a``, put their power into a
few frequencies: the share in the 8 strongest rises from near uniform to
most of it as the model generalises, and it starts rising before held-out
accuracy does.

``power[k]`` is frequency ``k``'s share of the embedding's power, for
``k = 0..p // 2`` (k and p - k are one real frequency, counted together, so
the shares sum to 1, Parseval's theorem). A key frequency is one with more
than ``KEY_FACTOR`` times the mean share (a random embedding has none).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from tui_lab.core.errors import LabError
from tui_lab.core.model.models import EmbeddingsAndHead
from tui_lab.core.tasks.modular import ModularTask
from tui_lab.core.tasks.protocol import Task
from tui_lab.core.tasks.vocab import N_SPECIALS

TOP = 8
KEY_FACTOR = 2.0


class FourierError(LabError):
    """The spectrum cannot be taken (a run of another task)."""


@dataclass(frozen=True)
class Spectrum:
    """An embedding's power per frequency, its key frequencies and its top-8 share."""

    p: int
    power: list[float]  # share per frequency 0..p // 2, summing to 1
    key_frequencies: list[int]  # ascending; never 0 (the constant)
    top8_share: float

    def to_dict(self) -> dict[str, object]:
        """The JSON of ``tfx-lab fourier --json``."""
        return {
            "p": self.p,
            "key_frequencies": self.key_frequencies,
            "top8_share": round(self.top8_share, 6),
            "power": [round(x, 6) for x in self.power],
        }


def spectrum(rows: Tensor) -> Spectrum:
    """The spectrum of ``rows`` (p, d): row ``a`` is residue ``a``'s vector."""
    p = rows.shape[0]
    if p < 2:
        raise FourierError(f"a spectrum needs at least 2 residues, got {p}")
    coeffs = torch.fft.rfft(rows.detach().double().cpu(), dim=0)  # (p // 2 + 1, d) complex
    power = coeffs.abs().pow(2).sum(-1)  # (p // 2 + 1,)
    # Frequencies 1 .. (p - 1) // 2 stand for k and p - k: count both halves.
    # (An even p's Nyquist frequency p / 2 has no partner.)
    power[1 : (p - 1) // 2 + 1] *= 2
    total = float(power.sum())
    shares = (power / total).tolist() if total > 0 else [0.0] * power.numel()
    top = sorted(shares, reverse=True)[:TOP]
    mean = 1.0 / len(shares)
    keys = [k for k, share in enumerate(shares) if k > 0 and share > KEY_FACTOR * mean]
    return Spectrum(p, shares, keys, float(sum(top)))


def residue_rows(model: nn.Module, p: int) -> Tensor:
    """The input embedding's rows for residues 0..p-1 (p, d_model)."""
    embed = model.tgt_embed if isinstance(model, EmbeddingsAndHead) else None
    if not isinstance(embed, nn.Embedding) or embed.num_embeddings < N_SPECIALS + p:
        raise FourierError(f"the model has no embedding for {p} residues")
    return embed.weight[N_SPECIALS : N_SPECIALS + p]


def model_spectrum(model: nn.Module, task: Task) -> Spectrum:
    """The spectrum of a modular-arithmetic model's input embedding."""
    if not isinstance(task, ModularTask) or task.name != "modular-addition":
        raise FourierError(f"fourier needs a modular-addition run, this one is {task.name}")
    return spectrum(residue_rows(model, task.p))
