"""Checking a graph on the real model: switch features off (or scale them) and compare.

In the REAL model (not the frozen replacement), a hook on each chosen feature's layer
output (``hook_mlp_out``) subtracts ``(1 - scale) * activation * W_dec[feature]`` at its
position; everything downstream (attention, norms, other MLPs) responds freely. The
graph's prediction for each logit node is the direct part only:
``(scale - 1) * sum of the features' edges into it``. Where the two agree the graph's
direct paths carry the effect; where they differ, indirect paths (through other
features) or the frozen parts (attention patterns, norms) matter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from tui_lab.core.analysis.circuits.graph import AttributionGraph, NodeKind
from tui_lab.core.errors import LabError
from tui_lab.core.opening.in_hand import ModelInHand
from tui_lab.core.sae.transcoder import TranscoderSet


@dataclass(frozen=True)
class LogitCheck:
    """One logit node: the real model's change of its demeaned logit, and the graph's."""

    label: str
    token: int
    real: float
    predicted: float


def _hook(rows: list[tuple[int, Tensor]]) -> Callable[[Tensor, str], Tensor]:
    def subtract(x: Tensor, name: str) -> Tensor:
        x = x.clone()
        for pos, vector in rows:
            x[0, pos] -= vector.to(x.dtype)
        return x

    return subtract


def intervene(
    model: ModelInHand, graph: AttributionGraph, transcoders: TranscoderSet, nodes: list[int], scale: float = 0.0
) -> list[LogitCheck]:
    """Each logit node's real and predicted change when feature ``nodes`` are scaled by ``scale``."""
    chosen = [graph.node(i) for i in nodes]
    if not chosen or any(n.kind is not NodeKind.FEATURE for n in chosen):
        raise LabError("choose one or more feature nodes to switch off")
    per_layer: dict[int, list[tuple[int, Tensor]]] = {}
    for node in chosen:
        row = transcoders[node.layer].W_dec.detach()[node.id] * node.activation * (1.0 - scale)
        per_layer.setdefault(node.layer, []).append((node.pos, row))
    hooks = [(transcoders.output_hook(layer), _hook(rows)) for layer, rows in per_layer.items()]
    ids = torch.tensor([graph.tokens], device=model.device)
    with torch.no_grad():
        before = model.run_with_hooks(ids)[0, -1].float()
        after = model.run_with_hooks(ids, hooks)[0, -1].float()
    change = (after - after.mean()) - (before - before.mean())
    edges = graph.adjacency[graph.logit_start:, nodes].sum(1) * (scale - 1.0)
    return [
        LogitCheck(graph.logit_labels[k], tok, float(change[tok]), float(edges[k]))
        for k, tok in enumerate(graph.logit_tokens)
    ]
