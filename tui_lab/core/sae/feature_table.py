"""Every feature of an SAE over one text, in one pass: what the feature browser shows.

For each feature: its density (share of tokens it fires on), its largest
activation, a histogram of its non-zero activations, and its ``top`` contexts
(the windows of the text where it peaks highest, with its activation on every
token of each). One pass over the text's activations builds all of it, so
moving from one feature to the next is a lookup, never another pass:

- a running top-``top`` of windows per feature, merged batch by batch
  (``topk`` over the kept windows and the batch's, per feature);
- the histogram on fixed log-spaced bins (``EDGES``), the same for every
  feature, so no feature's range has to be known before the pass ends.

Logit effects are apart: the feature's decoder direction through the
unembedding (``logit_effects``), with no text needed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn

from tui_lab.core.sae.sae import SparseAutoencoder

# Histogram bins: log10 of the activation from -3 to 2 in 40 steps; anything
# outside lands in the first or last bin.
HIST_BINS = 40
HIST_LOG_RANGE = (-3.0, 2.0)
EDGES = torch.logspace(HIST_LOG_RANGE[0], HIST_LOG_RANGE[1], HIST_BINS + 1)

Progress = Callable[[int, int], None]  # (tokens done, tokens in all)


@dataclass
class FeatureTable:
    """What the browser knows of every feature over a text's ``windows`` (n, T) of ids.

    The features' activations are kept sparse (every non-zero one, in token
    order: for TopK, k per token), so any feature's activation on any token of
    the text, such as its top contexts', is a lookup.
    """

    windows: torch.Tensor  # (n, T) the text's ids, window by window
    tokens: int  # tokens scanned: n · T
    density: torch.Tensor  # (d_sae,) share of tokens each feature fires on
    max: torch.Tensor  # (d_sae,) largest activation
    top_windows: torch.Tensor  # (d_sae, top) window index of each top context, −1 where none
    hist: torch.Tensor  # (d_sae, HIST_BINS) counts of non-zero activations per EDGES bin
    at_token: torch.Tensor  # (nnz,) int32 token index (n·T order) of each non-zero activation
    at_feature: torch.Tensor  # (nnz,) int32 its feature
    at_value: torch.Tensor  # (nnz,) float32 its value

    @property
    def d_sae(self) -> int:
        return int(self.density.numel())

    def activations(self, feature: int, window: int) -> torch.Tensor:
        """(T,) the feature's activation on each token of window ``window``."""
        t = self.windows.shape[1]
        lo, hi = torch.searchsorted(self.at_token, torch.tensor([window * t, (window + 1) * t],
                                                                dtype=self.at_token.dtype)).tolist()
        here = self.at_feature[lo:hi] == feature
        out = torch.zeros(t)
        out[(self.at_token[lo:hi][here] - window * t).long()] = self.at_value[lo:hi][here]
        return out

    def contexts(self, feature: int) -> list[Context]:
        """The feature's top contexts, strongest first (only windows where it fired)."""
        out = []
        for window in self.top_windows[feature].tolist():
            if window < 0:
                continue
            acts = self.activations(feature, window)
            peak_at = int(acts.argmax())
            out.append(Context(window, self.windows[window].tolist(), acts.tolist(), peak_at,
                               float(acts[peak_at])))
        return out

    def histogram(self, feature: int) -> list[tuple[float, float, int]]:
        """(low, high, count) of each bin from the first to the last non-empty one."""
        counts = self.hist[feature].tolist()
        used = [i for i, c in enumerate(counts) if c]
        if not used:
            return []
        edges = EDGES.tolist()
        return [(edges[i], edges[i + 1], int(counts[i])) for i in range(used[0], used[-1] + 1)]

    def tensors(self) -> dict[str, torch.Tensor]:
        """Its tensors by name (for the cache's safetensors file)."""
        return {"windows": self.windows, "density": self.density, "max": self.max,
                "top_windows": self.top_windows, "hist": self.hist, "at_token": self.at_token,
                "at_feature": self.at_feature, "at_value": self.at_value,
                "tokens": torch.tensor([self.tokens])}

    @classmethod
    def from_tensors(cls, t: dict[str, torch.Tensor]) -> FeatureTable:
        return cls(t["windows"], int(t["tokens"][0]), t["density"], t["max"], t["top_windows"],
                   t["hist"], t["at_token"], t["at_feature"], t["at_value"])


@dataclass
class Context:
    """One top context: the window's ids, the feature's activation on each, and its peak."""

    window: int
    ids: list[int]
    activations: list[float]
    peak_at: int
    peak: float


@torch.no_grad()
def sparse_features(sae: SparseAutoencoder, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(row, feature, value) of every non-zero feature activation of x (N, d_in), by row.

    TopK takes its k from the pre-activations directly (no dense (N, d_sae) tensor);
    the others encode and keep the non-zeros.
    """
    if sae.cfg.architecture == "topk" and isinstance(sae.cfg.k, int):
        values, cols = sae.pre_acts(x).topk(sae.cfg.k, dim=-1, sorted=False)  # (N, k)
        rows = torch.arange(x.shape[0])[:, None].expand_as(cols)
        on = values > 0
        return rows[on], cols[on], values[on]
    f = sae.encode(x)
    rows, cols = f.nonzero(as_tuple=True)
    return rows, cols, f[rows, cols]


class _Builder:
    """Running counts, the non-zero activations and each feature's top windows, batch by batch."""

    def __init__(self, d_sae: int, top: int) -> None:
        self.d, self.top = d_sae, top
        self.fired = torch.zeros(d_sae, dtype=torch.long)
        self.max = torch.zeros(d_sae)
        self.hist = torch.zeros(d_sae * HIST_BINS, dtype=torch.long)
        self.peaks = torch.zeros(top, d_sae)  # the kept windows' peaks, (top, d_sae)
        self.windows = torch.full((top, d_sae), -1, dtype=torch.long)
        self.parts: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        self.tokens = 0
        self.log_edges = torch.log10(EDGES[1:-1])

    @torch.no_grad()
    def add(self, act: torch.Tensor, sae: SparseAutoencoder, first_window: int) -> None:
        """Count the activations ``act`` (B, T, d_in) of windows first_window, first_window+1, ..."""
        b, t, _ = act.shape
        d = self.d
        rows, cols, vals = sparse_features(sae, act.reshape(b * t, -1).float())
        self.parts.append(((rows + self.tokens).int(), cols.int(), vals.float()))
        self.tokens += b * t
        self.fired += torch.bincount(cols, minlength=d)
        bins = torch.bucketize(torch.log10(vals), self.log_edges)  # 0 .. HIST_BINS-1
        self.hist.index_add_(0, cols * HIST_BINS + bins, torch.ones_like(bins))
        # Each window's peak per feature, (B, d_sae), then each feature's top of kept ∪ batch.
        peaks = torch.zeros(b * d).scatter_reduce_(0, (rows // t) * d + cols, vals, "amax").reshape(b, d)
        self.max = torch.maximum(self.max, peaks.max(dim=0).values)
        best, idx = torch.cat([self.peaks, peaks]).topk(self.top, dim=0)  # (top, d_sae)
        ids = torch.cat([self.windows, torch.arange(first_window, first_window + b)[:, None].expand(b, d)])
        self.windows, self.peaks = ids.gather(0, idx), best

    def table(self, windows: torch.Tensor) -> FeatureTable:
        top_windows = torch.where(self.peaks > 0, self.windows, torch.full_like(self.windows, -1))
        at = [torch.cat(p) if p else torch.zeros(0) for p in zip(*self.parts, strict=True)] if self.parts \
            else [torch.zeros(0, dtype=torch.int32), torch.zeros(0, dtype=torch.int32), torch.zeros(0)]
        return FeatureTable(
            windows=windows[: self.tokens // windows.shape[1]].clone(), tokens=self.tokens,
            density=(self.fired.double() / max(self.tokens, 1)).float(), max=self.max.clone(),
            top_windows=top_windows.T.contiguous(), hist=self.hist.reshape(-1, HIST_BINS).clone(),
            at_token=at[0], at_feature=at[1], at_value=at[2],
        )


@torch.no_grad()
def build_feature_table(sae: SparseAutoencoder, windows: torch.Tensor, activations: Iterable[torch.Tensor],
                        top: int = 10, progress: Progress | None = None,
                        should_stop: Callable[[], bool] | None = None) -> FeatureTable | None:
    """The table of every feature over ``windows`` (n, T), from their activations (B, T, d_in),
    in window order; None when ``should_stop()`` says so first."""
    n, t = windows.shape
    built = _Builder(sae.cfg.d_sae, top)
    done = 0
    for act in activations:
        if should_stop is not None and should_stop():
            return None
        act = act[: n - done]
        built.add(act, sae, done)
        done += act.shape[0]
        if progress is not None:
            progress(done * t, n * t)
        if done >= n:
            break
    return built.table(windows)


def unembedding(model: nn.Module) -> torch.Tensor | None:
    """(d_model, V): the output head's weight, with the final norm's scale folded in
    (as TransformerLens folds it); None for a model with no ``lm_head``."""
    # By name, tied weights included (lm_head.weight may be tgt_embed.weight).
    state = model.state_dict(keep_vars=True)
    weight = state.get("lm_head.weight")
    if not isinstance(weight, torch.Tensor):
        return None
    w_u = weight.detach().T.float()  # (d_model, V)
    scale = state.get("decoder.norm.weight")
    if isinstance(scale, torch.Tensor) and scale.shape == w_u.shape[:1]:
        w_u = scale.detach().float()[:, None] * w_u
    return w_u


@dataclass
class LogitEffects:
    """The tokens a feature's decoder direction promotes and suppresses most: (id, logit) each."""

    promoted: list[tuple[int, float]]
    suppressed: list[tuple[int, float]]


@torch.no_grad()
def logit_effects(sae: SparseAutoencoder, feature: int, w_u: torch.Tensor, top: int = 10) -> LogitEffects:
    """W_dec[feature] · W_U (V,): its ``top`` largest and smallest entries."""
    effect = sae.W_dec[feature].detach().float().to(w_u.device) @ w_u  # (V,)
    k = min(top, effect.numel())
    hi, lo = effect.topk(k), (-effect).topk(k)
    return LogitEffects(
        promoted=[(int(i), float(v)) for v, i in zip(hi.values, hi.indices, strict=True)],
        suppressed=[(int(i), -float(v)) for v, i in zip(lo.values, lo.indices, strict=True)],
    )


def shade_levels(activations: list[float], peak: float, levels: int = 5) -> list[int]:
    """Each activation as a level 0 (silent) .. levels−1 (the peak), for shading."""
    if not peak > 0 or not math.isfinite(peak):
        return [0 for _ in activations]
    return [0 if a <= 0 else max(1, min(levels - 1, math.ceil(a / peak * (levels - 1))))
            for a in activations]
