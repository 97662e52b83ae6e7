"""What a feature means: how often and how strongly it fires, and its top contexts in a text."""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch

from tui_lab.core.sae.sae import SparseAutoencoder


@dataclass(order=True)
class Context:
    """One window where the feature fired: its strongest activation, where, and every token's."""

    peak: float
    window: int
    position: int = field(compare=False)
    activations: list[float] = field(compare=False, default_factory=list)


class FeatureScan:
    """Density and largest activation of every feature, and the top contexts of one (if asked)."""

    def __init__(self, d_sae: int, feature: int | None = None, top: int = 10) -> None:
        self.tokens = 0
        self.fired = torch.zeros(d_sae, dtype=torch.float64)
        self.max = torch.zeros(d_sae)
        self.feature = feature
        self.top = top
        self._heap: list[Context] = []  # the ``top`` best contexts, smallest peak first

    @torch.no_grad()
    def add(self, f: torch.Tensor, first_window: int) -> None:
        """Count feature activations ``f`` (windows, T, d_sae) of windows first_window, first_window+1, ..."""
        flat = f.reshape(-1, f.shape[-1])
        self.tokens += flat.shape[0]
        self.fired += (flat > 0).sum(dim=0)
        self.max = torch.maximum(self.max, flat.max(dim=0).values)
        if self.feature is None:
            return
        acts = f[..., self.feature]  # (windows, T)
        peaks, where = acts.max(dim=1)
        for i in range(acts.shape[0]):
            if peaks[i] <= 0:
                continue
            ctx = Context(float(peaks[i]), first_window + i, int(where[i]), acts[i].tolist())
            if len(self._heap) < self.top:
                heapq.heappush(self._heap, ctx)
            elif ctx > self._heap[0]:
                heapq.heapreplace(self._heap, ctx)

    def density(self) -> torch.Tensor:
        return self.fired / max(self.tokens, 1)

    def contexts(self) -> list[Context]:
        """The top contexts of the feature, strongest first."""
        return sorted(self._heap, reverse=True)


@torch.no_grad()
def scan(sae: SparseAutoencoder, activations: Iterable[torch.Tensor], feature: int | None = None,
         top: int = 10) -> FeatureScan:
    """Every feature's density and maximum over (windows, T, d_in) activation batches, in order."""
    result = FeatureScan(sae.cfg.d_sae, feature, top)
    first = 0
    for act in activations:
        result.add(sae.encode(act), first)
        first += act.shape[0]
    return result
