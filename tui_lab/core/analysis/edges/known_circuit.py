"""The known-circuit check on an induction run: do the previous-token heads' edges into the
induction heads' key inputs rank among the top edges, carrying the answer?

In a two-layer attention-only model trained on repeated blocks (Olsson et al. 2022) a
layer-0 head attends to the previous token and writes it at each position; a layer-1
induction head's key reads that, so the query "the current token" matches the position
after the token's earlier copy. The heads are found with the lab's head atlas, never by
index: the previous-token heads are the layer-0 heads the atlas labels previous (else the
one with the highest previous-token score), the induction heads the layer-1 heads it labels
induction. The check passes when an edge ``a0.h{prev}->a1.h{ind}<k>`` with a positive score
ranks within the top ``fraction`` of edges by |score|.

Which pair asks the question matters. The ready ``induction`` pair changes the whole first
copy while the answer and the wrong token sit at the same position: it tests what the
induction heads copy (their value inputs), and its key edges may even work against the
answer. ``known_circuit`` scores the pairs that move only where the heads look
(``induction_key_pair``), averaged over several (as EAP-IG scores a dataset), so only the
key path carries the difference. An edge into a key can rank no higher than the two ends of
its own path: the layer-0 heads reading the moved token (their value input) and the
induction head's output, which carry all the key edge does and more.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from tui_lab.core.analysis.edges.component_graph import Cancelled, EdgeError, Progress, stop_if
from tui_lab.core.analysis.edges.edge_scores import EdgeScores

if TYPE_CHECKING:
    from tui_lab.core.opening.in_hand import ModelInHand

KEY_PAIRS = 8  # induction-key pairs (seeds 0..7) the check averages the scores over


@dataclass(frozen=True)
class KnownCircuit:
    """The heads the atlas found, the wanted edge that ranks best with a positive score (None:
    none has one), its rank (1 = strongest) and score, how many edges above it are its path's
    ends, and the verdict."""

    previous: list[str]
    induction: list[str]
    edge: str | None
    rank: int
    score: float
    ends_above: int
    top: int  # ranks up to this pass
    n_edges: int
    pairs: str = "the edges on show"

    @property
    def found(self) -> bool:
        return self.edge is not None and self.rank <= self.top

    def to_dict(self) -> dict[str, object]:
        return {"found": self.found, "edge": self.edge, "rank": self.rank if self.edge else None,
                "score": self.score if self.edge else None, "ends_above": self.ends_above, "top": self.top,
                "n_edges": self.n_edges, "previous": self.previous, "induction": self.induction,
                "scored_over": self.pairs}

    def line(self) -> str:
        heads = f"previous-token heads {_names(self.previous)}, induction heads {_names(self.induction)}; over {self.pairs}"
        if self.edge is None:
            return ("known circuit NOT found: no previous-token head's edge into an induction head's key carries "
                    f"the answer (a pair that moves where the heads look does: induction-key); {heads}")
        verdict = "found" if self.found else "NOT found"
        if self.rank == 1:
            where = "first"
        elif self.ends_above == self.rank - 1:
            where = f"after only its path's {self.ends_above} ends"
        else:
            where = f"{self.ends_above} of the {self.rank - 1} above it its path's ends"
        return (f"known circuit {verdict}: {self.edge} ({self.score:+.3f}) ranks {self.rank} of {self.n_edges} "
                f"(top {self.top} pass), {where}; {heads}")


def _names(heads: list[str]) -> str:
    """a0.h0, a0.h1, a0.h2 as a0.h0/h1/h2 (one layer's heads)."""
    layer, _, first = heads[0].partition(".")
    return heads[0] + "".join("/" + h.partition(".")[2] for h in heads[1:]) if layer and first else ", ".join(heads)


def _heads(model: ModelInHand) -> tuple[list[int], list[int]]:
    """(the layer-0 previous-token heads, the layer-1 induction heads) by the atlas."""
    from tui_lab.core.analysis.heads.head_scores import atlas_for

    atlas = atlas_for(model.model, model.task, model.shape)
    layer0 = [h for h in atlas.heads if h.name.endswith(".0.self")]
    inducers = sorted(h.head for h in atlas.heads if h.name.endswith(".1.self") and h.best == "induction")
    if not layer0 or not inducers:
        raise EdgeError("the atlas finds no induction head in layer 1: the check is for a trained induction run")
    previous = sorted(h.head for h in layer0 if h.best == "previous")
    return previous or [max(layer0, key=lambda h: h.scores.get("previous", 0.0)).head], inducers


def induction_check(model: ModelInHand, scores: EdgeScores, fraction: float = 0.2,
                    pairs: str = "the edges on show") -> KnownCircuit:
    """The check on ``scores`` of an induction run; EdgeError in one line when the atlas finds
    no induction head in layer 1 (not an induction run, or not trained yet)."""
    g = scores.graph
    if g.n_layers < 2:
        raise EdgeError("the induction check needs two layers or more")
    previous, inducers = _heads(model)
    order = [e.name for e in scores.top()]
    rank = {name: i + 1 for i, name in enumerate(order)}
    wanted = [f"a0.h{p}->a1.h{i}<k>" for p in previous for i in inducers]
    carrying = [name for name in wanted if scores.score_of(name) > 0]
    best = min(carrying, key=lambda name: rank[name]) if carrying else None
    ends = {f"input->a0.h{p}<v>" for p in previous} | {f"a1.h{i}->logits" for i in inducers}
    at = rank[best] if best else g.n_edges + 1
    return KnownCircuit([f"a0.h{p}" for p in previous], [f"a1.h{i}" for i in inducers], best, at,
                        scores.score_of(best) if best else 0.0, sum(name in ends for name in order[: at - 1]),
                        max(1, round(fraction * g.n_edges)), g.n_edges, pairs)


def key_path_scores(model: ModelInHand, pairs: int = KEY_PAIRS, method: str = "eap-ig", ig_steps: int = 5,
                    progress: Progress | None = None, cancelled: Cancelled | None = None) -> EdgeScores:
    """Every edge's score averaged over the induction-key pairs of seeds 0 .. ``pairs`` - 1."""
    from tui_lab.core.analysis.edges.edge_attribution import edge_attribution
    from tui_lab.core.analysis.patching.patch_pair import induction_key_pair

    found: list[EdgeScores] = []
    for seed in range(pairs):
        stop_if(cancelled)
        if progress is not None:
            progress(seed, pairs, "induction-key pairs")
        found.append(edge_attribution(model, induction_key_pair(model, seed=seed), method, ig_steps,
                                      cancelled=cancelled))
    n = len(found)
    return dataclasses.replace(found[0], scores=torch.stack([f.scores for f in found]).mean(dim=0),
                               clean=sum(f.clean for f in found) / n, corrupt=sum(f.corrupt for f in found) / n)


def known_circuit(model: ModelInHand, pairs: int = KEY_PAIRS, method: str = "eap-ig", fraction: float = 0.2,
                  progress: Progress | None = None, cancelled: Cancelled | None = None) -> KnownCircuit:
    """The check over the key path: scores averaged over ``pairs`` induction-key pairs."""
    scores = key_path_scores(model, pairs, method, progress=progress, cancelled=cancelled)
    return induction_check(model, scores, fraction, f"{pairs} induction-key pairs ({method})")
