"""Which heads carry an edge: a graph edge between positions, split by the head that moved it.

Under frozen attention only heads move anything between positions, so an edge from a
source at position j to a target at position p > j travels entirely through heads. Every
path of the frozen linear system crosses positions for the LAST time at exactly one head
(layer l, head h, query p, some key): above layer l it stays at p. So the edge splits
exactly into one share per head:

    share(l, h) = E(layers > l: diagonal patterns, layer l: diagonal + head h's row p,
                    layers < l: as frozen) - E(layers >= l: diagonal, layers < l: as frozen)

where E is the edge recomputed in the replacement model with those patterns (diagonal:
each position attends only to itself, with its frozen weight). The shares over all heads
telescope to ``edge - E(every layer diagonal)``, the edge's attention-mediated part (the
whole edge when j < p; the remainder, ``same_position``, is zero then). Each share splits
further by the key position the head read from (the pattern's row p, one column at a
time), which is where to QK-trace the head.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from tui_lab.core.analysis.circuits.attribution import (
    AttributionStopped,
    Sources,
    edge_rows,
    find_sources,
)
from tui_lab.core.analysis.circuits.graph import AttributionGraph, NodeKind, PruneResult
from tui_lab.core.analysis.circuits.replacement_model import LocalReplacement, build_replacement
from tui_lab.core.errors import LabError
from tui_lab.core.opening.in_hand import ModelInHand
from tui_lab.core.sae.transcoder import TranscoderSet

Progress = Callable[[int, int, str], None]
Cancelled = Callable[[], bool]


@dataclass(frozen=True)
class Carrier:
    """One head's share of an edge, and that share by key position (largest first)."""

    layer: int
    head: int
    query: int
    share: float
    keys: list[tuple[int, float]]

    @property
    def key(self) -> int:
        """The key position carrying most of the share."""
        return self.keys[0][0] if self.keys else self.query

    @property
    def name(self) -> str:
        return f"L{self.layer}.H{self.head}"


@dataclass(frozen=True)
class EdgeCarriers:
    """Edge ``source -> target`` (graph node indices): its weight in the graph, the part
    that never changes position, and each head's share, largest first."""

    target: int
    source: int
    edge: float
    same_position: float
    carriers: list[Carrier]


@dataclass(frozen=True)
class _Edge:
    """The frozen system, the sources, the target's read (layer, position, vector) and the
    source's column in ``edge_rows``."""

    replacement: LocalReplacement
    sources: Sources
    layer: int
    pos: int
    vector: Tensor
    column: int

    def value(self, patterns: list[Tensor]) -> float:
        """The edge with every layer's attention pattern replaced by ``patterns``."""
        layers = [replace(f, attn=replace(f.attn, pattern=p)) for f, p in zip(self.replacement.layers, patterns, strict=True)]
        frozen = replace(self.replacement, layers=layers)
        rows = edge_rows(frozen, self.sources, torch.tensor([self.layer]), torch.tensor([self.pos]), self.vector[None])
        return float(rows[0, self.column])


def _edge(model: ModelInHand, graph: AttributionGraph, transcoders: TranscoderSet, target: int, source: int) -> _Edge:
    t, s = graph.node(target), graph.node(source)
    if t.kind not in (NodeKind.FEATURE, NodeKind.LOGIT):
        raise LabError(f"only features and logits have incoming edges; node {target} is a {t.kind.value}")
    if s.kind is NodeKind.LOGIT:
        raise LabError(f"a logit has no outgoing edges; node {source} is one")
    replacement = build_replacement(model, graph.tokens, transcoders)
    sources = find_sources(replacement, transcoders)
    if t.kind is NodeKind.FEATURE:
        layer, vector = t.layer, transcoders[t.layer].W_enc.detach().float()[t.id]
    else:
        unembed = replacement.unembed
        layer, vector = replacement.n_layers, unembed[t.id] - unembed.mean(0)
    n_feat, n_pos = len(sources.values), replacement.n_pos
    if s.kind is NodeKind.FEATURE:
        column = int(graph.selected_features[source])
    elif s.kind is NodeKind.ERROR:
        column = n_feat + s.layer * n_pos + s.pos
    else:
        column = n_feat + replacement.n_layers * n_pos + s.pos
    return _Edge(replacement, sources, layer, t.pos, vector, column)


def _patterns(edge: _Edge, diagonal_from: int, head: tuple[int, int] | None = None, key: int | None = None) -> list[Tensor]:
    """Frozen patterns below ``diagonal_from``, their diagonals from there up; with ``head``
    (layer, h): that head's row at the target's position added back off the diagonal (only
    column ``key`` when given)."""
    out = []
    for layer, frozen in enumerate(edge.replacement.layers):
        pattern = frozen.attn.pattern
        if layer >= diagonal_from:
            eye = torch.eye(pattern.size(-1), dtype=pattern.dtype)
            diag = pattern * eye
            if head is not None and head[0] == layer:
                off = torch.zeros_like(pattern)
                off[head[1], edge.pos] = pattern[head[1], edge.pos] * (1 - eye[edge.pos])
                if key is not None:
                    keep = torch.zeros_like(off[head[1], edge.pos])
                    keep[key] = off[head[1], edge.pos, key]
                    off[head[1], edge.pos] = keep
                diag = diag + off
            pattern = diag
        out.append(pattern)
    return out


def _no_progress(done: int, total: int, what: str) -> None:
    return None


def _never() -> bool:
    return False


def edge_carriers(
    model: ModelInHand, graph: AttributionGraph, transcoders: TranscoderSet, target: int, source: int,
    progress: Progress = _no_progress, cancelled: Cancelled = _never,
) -> EdgeCarriers:
    """The heads that carry edge ``source -> target`` of ``graph``, each with its share
    (``AttributionStopped`` when ``cancelled`` says so between heads)."""
    edge = _edge(model, graph, transcoders, target, source)
    n_layers = edge.replacement.n_layers
    full = edge.value(_patterns(edge, n_layers))
    base = [edge.value(_patterns(edge, layer)) for layer in range(n_layers + 1)]
    carriers = []
    heads = [(layer, h) for layer in range(n_layers) for h in range(edge.replacement.layers[layer].attn.n_heads)]
    for done, (layer, h) in enumerate(heads):
        if cancelled():
            raise AttributionStopped("stopped")
        progress(done, len(heads), "heads")
        share = edge.value(_patterns(edge, layer, (layer, h))) - base[layer]
        if share == 0.0:
            continue
        keys = [(k, edge.value(_patterns(edge, layer, (layer, h), k)) - base[layer]) for k in range(edge.pos)]
        keys = sorted((kv for kv in keys if kv[1] != 0.0), key=lambda kv: -abs(kv[1]))
        carriers.append(Carrier(layer, h, edge.pos, share, keys))
    progress(len(heads), len(heads), "heads")
    carriers.sort(key=lambda c: -abs(c.share))
    return EdgeCarriers(target, source, full, base[0], carriers)


def earlier_sources(graph: AttributionGraph, target: int, pruned: PruneResult | None = None) -> list[int]:
    """The target's sources at earlier positions, strongest edge first (with ``pruned``:
    only kept sources along kept edges)."""
    row = graph.adjacency[target]
    if pruned is not None:
        row = row * pruned.edge_mask[target] * pruned.node_mask
    pos = graph.node(target).pos
    found = [i for i in row.nonzero().flatten().tolist() if graph.node(i).pos < pos]
    return sorted(found, key=lambda i: -abs(float(row[i])))
