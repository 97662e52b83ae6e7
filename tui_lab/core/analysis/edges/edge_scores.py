"""Edge scores: every edge's score as a (writers, readers) tensor, ranked and named as
EAP-IG and MIB name them (``a0.h1->a1.h3<k>``); what EAP, EAP-IG and exact edge patching
all return."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from tui_lab.core.analysis.edges.component_graph import ComponentGraph


@dataclass(frozen=True)
class Edge:
    """One scored edge, named as EAP-IG and MIB name it."""

    source: str
    target: str
    score: float

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    def to_dict(self) -> dict[str, object]:
        return {"from": self.source, "to": self.target, "score": self.score}


@dataclass(frozen=True)
class EdgeScores:
    """Every edge's score as a (writers, readers) tensor (0 where no edge), by ``method``;
    ``clean`` and ``corrupt``: the two runs' logit differences."""

    graph: ComponentGraph
    scores: Tensor
    method: str
    clean: float
    corrupt: float

    def order(self) -> list[tuple[int, int]]:
        """The edges (writer, reader), largest |score| first (EAP-IG's ``absolute`` top-n)."""
        allowed = self.graph.allowed
        flat = torch.where(allowed, self.scores.abs(), -1.0).flatten()
        ranked = torch.argsort(flat, descending=True, stable=True)[: self.graph.n_edges]
        readers = self.graph.n_readers
        return [(int(i) // readers, int(i) % readers) for i in ranked]

    def top(self, k: int | None = None) -> list[Edge]:
        """The ``k`` strongest edges (all when None)."""
        g = self.graph
        picked = self.order() if k is None else self.order()[:k]
        return [Edge(g.writer_names[w], g.reader_names[r], float(self.scores[w, r])) for w, r in picked]

    def score_of(self, name: str) -> float:
        w, r = self.graph.edge_index(name)
        return float(self.scores[w, r])

    def node_scores(self) -> Tensor:
        """(writers,) each writer's outgoing edges summed: its node attribution score."""
        return torch.where(self.graph.allowed, self.scores, 0.0).sum(1)
