"""Exact edge patching and path patching: the slow references edge attribution estimates.

Exact edge patching runs the corrupted input once per edge and delivers the
writer's clean output to that one reader only: the reader's input becomes the
corrupted run's plus ``clean_w - corrupt_w``, every other reader reads what the
corrupted run gives it (denoising, as EAP's scores: an edge's exact score is the
patched logit difference minus the corrupted one). Edges are patched in batches
(one row per edge), so a small model's every edge costs a few forwards.

Path patching (Wang et al. 2023, as an edge): one sender head's clean output
delivered to one receiver head's q, k or v input only, with everything else
corrupted; the exact effect of that path on the metric.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from tui_lab.core.analysis.edges.component_graph import QKV, Cancelled, EdgeError, Progress, stop_if
from tui_lab.core.analysis.edges.edge_forward import (
    EdgePatch,
    decoder_of,
    edge_forward,
    embed,
    graph_of,
)
from tui_lab.core.analysis.edges.edge_scores import EdgeScores
from tui_lab.core.analysis.patching.patch_pair import Metric, PatchPair
from tui_lab.core.model.models import DecoderOnly

if TYPE_CHECKING:
    from tui_lab.core.opening.in_hand import ModelInHand

BATCH = 32  # edges patched per forward


def patched_metrics(net: DecoderOnly, pair: PatchPair, edges: list[tuple[int, int]],
                    device: torch.device | str = "cpu", progress: Progress | None = None,
                    cancelled: Cancelled | None = None) -> tuple[Tensor, Metric]:
    """(edges,) the corrupted run's logit difference with each edge (writer, reader) given
    its clean writer, one edge at a time; and the clean and corrupted runs' metric."""
    g = graph_of(net)
    clean_ids, corrupt_ids = pair.ids(device)
    out: list[Tensor] = []
    with torch.no_grad():
        inputs = embed(net, torch.cat([clean_ids, corrupt_ids]))  # (2, T, d)
        base = edge_forward(net, g, inputs, pair)
        source = base.writers[:1]  # (1, T, W, d): the clean run's writers
        for start in range(0, len(edges), BATCH):
            stop_if(cancelled)
            chunk = edges[start : start + BATCH]
            matrix = torch.zeros(len(chunk), g.n_writers, g.n_readers, device=inputs.device)
            for i, (w, r) in enumerate(chunk):
                matrix[i, w, r] = 1.0
            rows = inputs[1:2].expand(len(chunk), -1, -1)
            out.append(edge_forward(net, g, rows, pair, EdgePatch(source, matrix)).metric.cpu())
            if progress is not None:
                progress(min(start + BATCH, len(edges)), len(edges), "patching edges")
    metric = Metric(float(base.metric[0]), float(base.metric[1]))
    return (torch.cat(out) if out else torch.zeros(0)), metric


def exact_edge_scores(net: DecoderOnly, pair: PatchPair, device: torch.device | str = "cpu",
                      progress: Progress | None = None, cancelled: Cancelled | None = None) -> EdgeScores:
    """Every edge's exact score: its patched logit difference minus the corrupted run's."""
    g = graph_of(net)
    edges = [(int(w), int(r)) for w, r in g.allowed.nonzero().tolist()]
    values, metric = patched_metrics(net, pair, edges, device, progress, cancelled)
    scores = torch.zeros(g.n_writers, g.n_readers)
    for (w, r), v in zip(edges, values.tolist(), strict=True):
        scores[w, r] = v - metric.corrupt
    return EdgeScores(g, scores, "exact", metric.clean, metric.corrupt)


@dataclass(frozen=True)
class PathPatch:
    """The sender's clean output read by the receiver's ``which`` input alone: the patched
    logit difference, the clean and corrupted ones, and the recovered fraction."""

    sender: str
    receiver: str
    which: str
    patched: float
    clean: float
    corrupt: float

    @property
    def recovered(self) -> float:
        return float(Metric(self.clean, self.corrupt).normalise(torch.tensor(self.patched)))

    def to_dict(self) -> dict[str, object]:
        return {"edge": f"{self.sender}->{self.receiver}<{self.which}>", "patched": self.patched,
                "clean": self.clean, "corrupt": self.corrupt, "recovered": self.recovered}


def path_patch(model: ModelInHand, pair: PatchPair, sender: tuple[int, int], receiver: tuple[int, int],
               which: str = "k") -> PathPatch:
    """Exact path patching from head ``sender`` (layer, head) to head ``receiver``'s ``which``
    (q, k or v) input; EdgeError in one line for a head out of range or a receiver not later."""
    net = decoder_of(model.model)
    g = graph_of(net)
    if which not in QKV:
        raise EdgeError(f"a receiver's input is q, k or v, got {which!r}")
    g.check_head(*sender)
    g.check_head(*receiver)
    if receiver[0] <= sender[0]:
        raise EdgeError(f"a{receiver[0]}.h{receiver[1]} reads before a{sender[0]}.h{sender[1]} writes: "
                        "the receiver must be in a later layer")
    edge = (g.head_writer(*sender), g.head_reader(*receiver, which))
    values, metric = patched_metrics(net, pair, [edge], model.device)
    return PathPatch(f"a{sender[0]}.h{sender[1]}", f"a{receiver[0]}.h{receiver[1]}", which,
                     float(values[0]), metric.clean, metric.corrupt)
