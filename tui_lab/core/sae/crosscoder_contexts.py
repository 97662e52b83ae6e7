"""A crosscoder's features over a text at each of its sources: density and top contexts.

A feature's contexts "at a source" are where it fires when the encoder reads
that source alone: ``ReLU(x_s · W_enc[s] + b_enc)`` (activations scaled as in
training). For a feature new at B this asks whether B's activations carry
what it reads and A's do not; for a shared feature both lists look alike. The
crosscoder's own (joint) activation, reading every source at once, gives each
feature's density. One pass builds everything; a feature's card is then a
lookup plus one small encode of its top windows.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tui_lab.core.sae.crosscoder import Crosscoder
from tui_lab.core.sae.feature_table import Context

TOP = 8  # contexts kept per feature and source


def alone(cc: Crosscoder, acts: torch.Tensor, source: int) -> torch.Tensor:
    """(..., F) activations when the encoder reads only ``source`` of acts (..., n, d)."""
    xs = cc.scaled(acts.to(cc.W_enc.device))[..., source, :]
    return torch.relu(xs @ cc.W_enc[source] + cc.b_enc).cpu()


@dataclass
class CrosscoderTable:
    """Every feature over ``windows`` (w, T): joint density, density and top windows per source."""

    windows: torch.Tensor  # (w, T) ids
    acts: torch.Tensor  # (w·T, n, d) the sources' activations, kept for the cards
    density: torch.Tensor  # (F,) share of tokens the joint activation fires on
    source_density: torch.Tensor  # (n, F) the same, reading each source alone
    source_max: torch.Tensor  # (n, F) largest activation reading each source alone
    top_windows: torch.Tensor  # (n, F, top) windows of each source's top contexts, −1 where none

    @property
    def tokens(self) -> int:
        return int(self.windows.numel())

    def contexts(self, cc: Crosscoder, feature: int, source: int) -> list[Context]:
        """The feature's top contexts reading ``source`` alone, strongest first."""
        t = self.windows.shape[1]
        out = []
        for w in self.top_windows[source, feature].tolist():
            if w < 0:
                continue
            with torch.no_grad():
                a = alone(cc, self.acts[w * t : (w + 1) * t], source)[:, feature]
            peak_at = int(a.argmax())
            out.append(Context(w, self.windows[w].tolist(), a.tolist(), peak_at, float(a[peak_at])))
        return out


def build_table(cc: Crosscoder, windows: torch.Tensor, acts: torch.Tensor, top: int = TOP,
                chunk: int = 4096) -> CrosscoderTable:
    """The table of ``cc`` over ``windows`` (w, T) and their activations acts (w·T, n, d)."""
    w, t = windows.shape
    n, f = cc.cfg.n_sources, cc.cfg.d_sae
    fires = torch.zeros(f)
    src_fires = torch.zeros(n, f)
    win_max = torch.zeros(n, w, f)
    step = max(t, chunk - chunk % t)  # whole windows per chunk
    with torch.no_grad():
        for lo in range(0, w * t, step):
            part = acts[lo : lo + step]
            fires += (cc.encode(part.to(cc.W_enc.device)) > 0).float().sum(0).cpu()
            for s in range(n):
                a = alone(cc, part, s)  # (rows, F)
                src_fires[s] += (a > 0).float().sum(0)
                win_max[s, lo // t : lo // t + a.shape[0] // t] = a.reshape(-1, t, f).amax(1)
    k = min(top, w)
    values, index = win_max.topk(k, dim=1)  # (n, k, F)
    index = torch.where(values > 0, index, torch.full_like(index, -1)).transpose(1, 2)  # (n, F, k)
    return CrosscoderTable(windows, acts, fires / (w * t), src_fires / (w * t), win_max.amax(1), index)
