"""How good a transcoder set is, per layer and as the whole replacement.

Per layer, over held-out windows of the clean model: explained variance of the
MLP's output by the transcoder's prediction from the MLP's input, L0, the share of
features that never fired, and CE loss recovered with that layer's MLP replaced
(zero-ablating that MLP is the floor). The whole replacement: every MLP replaced
at once in one forward pass (``run_with_hooks``; each transcoder reads the input
the replaced model gives it), CE loss recovered against every MLP zeroed; its
explained variance pools the layers' errors and variances, its L0 is the features
active per token summed over layers, its dead fraction is over every feature.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from tui_lab.core.sae.evaluation import ReconstructionStats
from tui_lab.core.sae.metrics import ce_loss_recovered
from tui_lab.core.sae.transcoder_data import IGNORE, Windows, pair_hooks, replacing_hooks
from tui_lab.core.sae.transcoder_layers import TranscoderSet

if TYPE_CHECKING:
    from tui_lab.core.sae.activations import HookedLike


@dataclass(frozen=True)
class ReplacementScore:
    """Explained variance, L0, dead fraction and the three CEs of one layer or of the whole."""

    explained_variance: float
    l0: float
    dead_fraction: float
    ce_clean: float
    ce_zero_ablated: float
    ce_replaced: float

    @property
    def ce_loss_recovered(self) -> float:
        return ce_loss_recovered(self.ce_clean, self.ce_zero_ablated, self.ce_replaced)

    def to_json(self) -> dict[str, float]:
        return {**asdict(self), "ce_loss_recovered": self.ce_loss_recovered}


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> tuple[float, int]:
    """(sum of CE over scored positions, their count) of logits (n, T, V) for targets (n, T)."""
    flat = targets.reshape(-1)
    total = F.cross_entropy(logits.reshape(flat.numel(), -1).float(), flat, ignore_index=IGNORE, reduction="sum")
    return float(total), int((flat != IGNORE).sum())


class _CE:
    """Running CE (sum, count) of named runs."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.count: dict[str, int] = {}

    def add(self, key: str, logits: torch.Tensor, targets: torch.Tensor) -> None:
        total, n = cross_entropy(logits, targets)
        self.sums[key] = self.sums.get(key, 0.0) + total
        self.count[key] = self.count.get(key, 0) + n

    def mean(self, key: str) -> float:
        return self.sums[key] / max(self.count[key], 1)


def _zero(_layer: int, act: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(act)


@torch.no_grad()
def _ce_runs(model: HookedLike, tset: TranscoderSet, ids: torch.Tensor, targets: torch.Tensor, ce: _CE) -> None:
    """Add the batch's CE clean, and with each layer's and every MLP zeroed and replaced."""

    def transcoded(layer: int, x: torch.Tensor) -> torch.Tensor:
        return tset[layer](x)

    every = list(range(tset.n_layers))
    ce.add("clean", model.run_with_hooks(ids, hooks=[]), targets)
    for key, layers in [("all", every)] + [(str(layer), [layer]) for layer in every]:
        ce.add(f"zero:{key}", model.run_with_hooks(ids, hooks=replacing_hooks(tset, layers, _zero)), targets)
        ce.add(f"tc:{key}", model.run_with_hooks(ids, hooks=replacing_hooks(tset, layers, transcoded)), targets)


@dataclass(frozen=True)
class TranscoderMetrics:
    """Each layer's score and the whole replacement's, over ``tokens`` held-out tokens."""

    layers: list[ReplacementScore]
    whole: ReplacementScore
    tokens: int

    def to_json(self) -> dict[str, object]:
        return {"tokens": self.tokens, "whole": self.whole.to_json(),
                "layers": [{"layer": i, **score.to_json()} for i, score in enumerate(self.layers)]}


@torch.no_grad()
def evaluate_transcoders(model: HookedLike, tset: TranscoderSet, windows: Windows, batch: int = 32
                         ) -> TranscoderMetrics:
    """The set's metrics on ``windows`` (read ``batch`` windows a forward pass)."""
    stats = [ReconstructionStats(tc.d_model, tc.d_tc) for tc in tset]
    ce = _CE()
    names = pair_hooks(tset)
    for start in range(0, len(windows), batch):
        ids, targets = windows.ids[start : start + batch], windows.targets[start : start + batch]
        _, cache = model.run_with_cache(ids, names=names)
        for layer, tc in enumerate(tset):
            x = cache[tset.input_hook(layer)].reshape(-1, tc.d_model).float()
            y = cache[tset.output_hook(layer)].reshape(-1, tc.d_model).float()
            f = tc.encode(x)
            stats[layer].add(y, tc.decode(f) + tc.skip(x), f)
        _ce_runs(model, tset, ids, targets, ce)
    per = [s.metrics() for s in stats]
    layers = [ReplacementScore(m["explained_variance"], m["l0"], m["dead_fraction"], ce.mean("clean"),
                               ce.mean(f"zero:{i}"), ce.mean(f"tc:{i}")) for i, m in enumerate(per)]
    return TranscoderMetrics(layers, _whole(stats, ce), stats[0].n)


def _whole(stats: list[ReconstructionStats], ce: _CE) -> ReplacementScore:
    """The pooled numbers of every layer, with the every-MLP CE runs."""
    err = sum(float(s.sum_err2) for s in stats)
    var = sum(float(s.sum_x2 - s.sum_x.pow(2).sum() / max(s.n, 1)) for s in stats)
    n = max(stats[0].n, 1)
    fired = torch.cat([s.fired for s in stats])
    return ReplacementScore(1.0 - err / var if var > 0 else float("nan"), sum(s.active for s in stats) / n,
                            float((~fired).float().mean()), ce.mean("clean"), ce.mean("zero:all"),
                            ce.mean("tc:all"))
