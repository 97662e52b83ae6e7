"""The known-circuit check on an induction run: is the previous-token head's edge into an
induction head's key input among the top edges?

In a two-layer attention-only model trained on repeated blocks (Olsson et al. 2022) a
layer-0 head attends to the previous token and writes it at each position; a layer-1
induction head's key reads that, so the query "the current token" matches the position
after the token's earlier copy. The heads are found with the lab's head atlas, never by
index: the previous-token head is the layer-0 head with the highest previous-token score,
the induction heads the layer-1 heads the atlas labels induction. The check passes when
one edge ``a0.h{prev}->a1.h{ind}<k>`` ranks within the top ``fraction`` of edges by |score|.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tui_lab.core.analysis.edges.component_graph import EdgeError
from tui_lab.core.analysis.edges.edge_scores import EdgeScores

if TYPE_CHECKING:
    from tui_lab.core.opening.in_hand import ModelInHand


@dataclass(frozen=True)
class KnownCircuit:
    """The heads the atlas found, the wanted edges' best rank (1 = strongest) and the verdict."""

    previous: str
    induction: list[str]
    edge: str  # the wanted edge that ranks best
    rank: int
    top: int  # ranks up to this pass
    n_edges: int

    @property
    def found(self) -> bool:
        return self.rank <= self.top

    def line(self) -> str:
        verdict = "found" if self.found else "NOT found"
        return (f"known circuit {verdict}: {self.edge} ranks {self.rank} of {self.n_edges} edges "
                f"(top {self.top} pass); previous-token head {self.previous}, induction heads "
                f"{', '.join(self.induction)}")


def induction_check(model: ModelInHand, scores: EdgeScores, fraction: float = 0.2) -> KnownCircuit:
    """The check on ``scores`` of an induction run; EdgeError in one line when the atlas finds
    no induction head in layer 1 (not an induction run, or not trained yet)."""
    from tui_lab.core.analysis.heads.head_scores import atlas_for

    g = scores.graph
    if g.n_layers < 2:
        raise EdgeError("the induction check needs two layers or more")
    atlas = atlas_for(model.model, model.task, model.shape)
    layer0 = [h for h in atlas.heads if h.name.endswith(".0.self")]
    inducers = sorted(h.head for h in atlas.heads if h.name.endswith(".1.self") and h.best == "induction")
    if not layer0 or not inducers:
        raise EdgeError("the atlas finds no induction head in layer 1: the check is for a trained induction run")
    previous = max(layer0, key=lambda h: h.scores.get("previous", 0.0)).head
    ranks = {e.name: i + 1 for i, e in enumerate(scores.top())}
    wanted = [f"a0.h{previous}->a1.h{i}<k>" for i in inducers]
    best = min(wanted, key=lambda name: ranks[name])
    return KnownCircuit(f"a0.h{previous}", [f"a1.h{i}" for i in inducers], best, ranks[best],
                        max(1, round(fraction * g.n_edges)), g.n_edges)
