"""Faithfulness of a circuit of edges: how much of the behaviour the top k% of edges recover.

For each k, the top k% of edges by |score| (rounded to a whole number of edges) are
the circuit. The model runs on the clean input; every edge outside the circuit
reads its writer's corrupted value (the corrupted run's output of that writer) or,
with ``mean_over``, the writer's mean output over a held-out set of inputs of the
same length, instead of this run's (EAP-IG's ``evaluate_graph``). The recovered
fraction is ``(m - m_empty) / (m_clean - m_empty)`` (MIB's), ``m_empty`` the empty
circuit's metric (every edge replaced): with corrupted values that is the corrupted run,
so the fraction is ``(m - m_corrupt) / (m_clean - m_corrupt)``, 1 when the circuit alone
gives the clean behaviour and 0 when it gives the corrupted one.

MIB's circuit track sums a curve into two numbers: CPR, the area under the
recovered fraction against the fraction of edges kept, and CMD, the area between
that curve and 1 (|1 - f|). Both are trapezoids over x = k / 100 in [0, 1], with
the empty circuit (x = 0, every edge replaced: f = 0) as the first point. Higher CPR is better, lower CMD.
All k are run as one batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from tui_lab.core.analysis.edges.component_graph import EdgeError
from tui_lab.core.analysis.edges.edge_forward import (
    EdgePatch,
    decoder_of,
    edge_forward,
    embed,
    graph_of,
)
from tui_lab.core.analysis.edges.edge_scores import EdgeScores
from tui_lab.core.analysis.patching.patch_pair import Metric, PatchPair

if TYPE_CHECKING:
    from tui_lab.core.opening.in_hand import ModelInHand

PERCENTS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
FOLLOWED_SHARE = 0.8  # over training, the final circuit followed is the smallest recovering this


@dataclass(frozen=True)
class Faithfulness:
    """The recovered fraction at each percent of edges kept, with CPR and CMD."""

    percents: list[float]
    recovered: list[float]
    kept: list[int]  # edges in the circuit at each percent
    cpr: float
    cmd: float
    clean: float
    corrupt: float
    empty: float  # the empty circuit's logit difference: the corrupted run's, or the mean's

    def points(self) -> list[dict[str, float]]:
        return [{"percent": p, "recovered": r} for p, r in zip(self.percents, self.recovered, strict=True)]

    def at(self, percent: float) -> float:
        return self.recovered[self.percents.index(percent)]

    def smallest(self, share: float = FOLLOWED_SHARE) -> float:
        """The smallest percent whose circuit recovers ``share`` of the logit difference (100 if none):
        the circuit worth following over training."""
        return next((p for p, r in zip(self.percents, self.recovered, strict=True) if r >= share), 100.0)


def kept_count(percent: float, n_edges: int) -> int:
    """Edges in a top-``percent``% circuit: ``percent`` of ``n_edges``, rounded."""
    return min(n_edges, round(percent / 100 * n_edges))


def areas(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(CPR, CMD): trapezoids of f and |1 - f| over ``xs`` (fractions of edges, rising)."""
    cpr = cmd = 0.0
    for i in range(1, len(xs)):
        dx = xs[i] - xs[i - 1]
        cpr += dx * (ys[i] + ys[i - 1]) / 2
        cmd += dx * (abs(1 - ys[i]) + abs(1 - ys[i - 1])) / 2
    return cpr, cmd


def _circuit_patches(scores: EdgeScores, counts: list[int], device: torch.device) -> Tensor:
    """(K, W, R): 1 on every edge outside each top-``count`` circuit."""
    g = scores.graph
    order = scores.order()
    matrix = g.allowed.float().expand(len(counts), -1, -1).clone()
    for i, n in enumerate(counts):
        if n:
            w, r = torch.tensor(order[:n]).T
            matrix[i, w, r] = 0.0
    return matrix.to(device)


def _sources(model: ModelInHand, pair: PatchPair, mean_over: list[list[int]] | None) -> tuple[Tensor, Metric]:
    """The writers' values outside the circuit (1, T, W, d), and the clean and corrupted metric."""
    net = decoder_of(model.model)
    g = graph_of(net)
    clean_ids, corrupt_ids = pair.ids(model.device)
    with torch.no_grad():
        base = edge_forward(net, g, embed(net, torch.cat([clean_ids, corrupt_ids])), pair)
        metric = Metric(float(base.metric[0]), float(base.metric[1]))
        if mean_over is None:
            return base.writers[1:2], metric
        if not mean_over or any(len(ids) != pair.length for ids in mean_over):
            raise EdgeError(f"a mean ablation needs inputs of the pair's length ({pair.length} tokens)")
        ids = torch.tensor(mean_over, device=model.device)
        held = edge_forward(net, g, embed(net, ids), pair)
        return held.writers.mean(0, keepdim=True), metric


def faithfulness(model: ModelInHand, pair: PatchPair, edges: EdgeScores, percents: tuple[float, ...] = PERCENTS,
                 mean_over: list[list[int]] | None = None) -> Faithfulness:
    """The recovered fraction of ``pair``'s logit difference by the top k% of ``edges`` at each
    k in ``percents``; outside the circuit, the corrupted run's writers (or ``mean_over``'s mean)."""
    if not percents or any(not (0 < p <= 100) or not math.isfinite(p) for p in percents):
        raise EdgeError("percents of edges must lie in (0, 100]")
    net = decoder_of(model.model)
    g = graph_of(net)
    xs = sorted(set(percents))
    counts = [0, *(kept_count(p, g.n_edges) for p in xs)]
    source, metric = _sources(model, pair, mean_over)
    clean_ids, _ = pair.ids(model.device)
    with torch.no_grad():
        inputs = embed(net, clean_ids).expand(len(counts), -1, -1)
        patch = EdgePatch(source, _circuit_patches(edges, counts, inputs.device))
        values = edge_forward(net, g, inputs, pair, patch).metric.cpu()
    empty = Metric(metric.clean, float(values[0]))  # counts[0] = 0: the empty circuit
    recovered = [float(v) for v in empty.normalise(values)]
    cpr, cmd = areas([0.0, *(p / 100 for p in xs)], recovered)
    return Faithfulness(xs, recovered[1:], counts[1:], cpr, cmd, metric.clean, metric.corrupt, empty.corrupt)
