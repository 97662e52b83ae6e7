"""An attribution graph: its nodes, its adjacency, pruning and the two scores.

The layout is circuit-tracer's (``circuit_tracer/graph.py``) so a graph means the same
number in both: nodes are ordered selected features (by layer, position, feature),
error nodes (layer-major, then position), token nodes (by position), logit nodes (by
probability); ``adjacency[target, source]`` is the source's direct effect on the
target. Pruning keeps the nodes holding ``node_threshold`` of the logits' influence,
then the edges holding ``edge_threshold`` of it, then drops nodes left without an
outgoing edge (features and errors) or an incoming one (features); the replacement
score is the share of the tokens' and errors' influence that the tokens hold, the
completeness score the influence-weighted share of each node's input that is not
error. Influence is the logit-probability-weighted sum of all powers of the
row-normalised absolute adjacency.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import torch
from torch import Tensor


class NodeKind(Enum):
    """What a node of the graph is."""

    FEATURE = "feature"
    ERROR = "error"
    TOKEN = "token"
    LOGIT = "logit"


@dataclass(frozen=True)
class Node:
    """One node: its kind, layer (tokens -1, logits n_layers), position, feature or token
    id (errors -1), label and activation (features; 0.0 otherwise)."""

    index: int
    kind: NodeKind
    layer: int
    pos: int
    id: int
    label: str
    activation: float = 0.0


@dataclass(frozen=True)
class PruneResult:
    """Which nodes and edges survive pruning, and each node's cumulative influence (the
    share of all influence held by the nodes at least as influential as it)."""

    node_mask: Tensor
    edge_mask: Tensor
    cumulative_scores: Tensor


@dataclass
class AttributionGraph:
    """A prompt's attribution graph over a transcoder set.

    ``active_features`` (n_active, 3) holds (layer, position, feature) of every active
    feature, ``activation_values`` their activations; ``selected_features`` indexes the
    ones that are nodes (all of them unless ``max_feature_nodes`` cut them);
    ``adjacency`` (N, N), N = selected + (n_layers + 1) * n_pos + logits.
    """

    text: str
    tokens: list[int]
    token_labels: list[str]
    n_layers: int
    active_features: Tensor
    activation_values: Tensor
    selected_features: Tensor
    logit_tokens: list[int]
    logit_labels: list[str]
    logit_probabilities: Tensor
    adjacency: Tensor
    scan: str = "tfx-lab"
    model_name: str = ""
    step: int | None = None
    feature_labels: dict[tuple[int, int], str] = field(default_factory=dict)
    token_texts: list[str] = field(default_factory=list)  # each token decoded (the graph file's prompt_tokens)

    @property
    def n_pos(self) -> int:
        return len(self.tokens)

    @property
    def n_features(self) -> int:
        return len(self.selected_features)

    @property
    def error_start(self) -> int:
        return self.n_features

    @property
    def token_start(self) -> int:
        return self.n_features + self.n_layers * self.n_pos

    @property
    def logit_start(self) -> int:
        return self.token_start + self.n_pos

    @property
    def n_nodes(self) -> int:
        return self.adjacency.size(0)

    def node(self, index: int) -> Node:
        """The node at ``index`` of the adjacency."""
        if index < self.error_start:
            layer, pos, feat = (int(v) for v in self.active_features[self.selected_features[index]])
            act = float(self.activation_values[self.selected_features[index]])
            label = self.feature_labels.get((layer, feat), "")
            return Node(index, NodeKind.FEATURE, layer, pos, feat, label or f"L{layer}#{feat}", act)
        if index < self.token_start:
            layer, pos = divmod(index - self.error_start, self.n_pos)
            return Node(index, NodeKind.ERROR, layer, pos, -1, f"error L{layer}")
        if index < self.logit_start:
            pos = index - self.token_start
            return Node(index, NodeKind.TOKEN, -1, pos, self.tokens[pos], self.token_labels[pos])
        k = index - self.logit_start
        return Node(index, NodeKind.LOGIT, self.n_layers, self.n_pos - 1, self.logit_tokens[k],
                    self.logit_labels[k], float(self.logit_probabilities[k]))

    def nodes(self) -> list[Node]:
        """The node table, in adjacency order."""
        return [self.node(i) for i in range(self.n_nodes)]

    def logit_weights(self) -> Tensor:
        """(N,) the logits' probabilities at their nodes, zero elsewhere."""
        weights = torch.zeros(self.n_nodes, dtype=self.adjacency.dtype)
        weights[self.logit_start:] = self.logit_probabilities.to(weights.dtype)
        return weights

    def prune(self, node_threshold: float = 0.8, edge_threshold: float = 0.98) -> PruneResult:
        """circuit-tracer's ``prune_graph`` on this graph."""
        return prune(self, node_threshold, edge_threshold)

    def scores(self) -> tuple[float, float]:
        """(replacement score, completeness score), as circuit-tracer's ``compute_graph_scores``."""
        return graph_scores(self)


def normalize_matrix(matrix: Tensor) -> Tensor:
    """|matrix| with each row summing to one (rows with nothing stay zero)."""
    absolute = matrix.abs()
    return absolute / absolute.sum(dim=1, keepdim=True).clamp(min=1e-10)


def influence(normalized: Tensor, weights: Tensor, max_iter: int = 1000) -> Tensor:
    """``weights @ (A + A^2 + ...)``: the graph is acyclic, so the powers end at zero."""
    current = weights @ normalized
    total = current.clone()
    for _ in range(max_iter):
        if not bool(current.any()):
            return total
        current = current @ normalized
        total += current
    raise RuntimeError(f"influence did not converge in {max_iter} steps (is the graph cyclic?)")


def find_threshold(scores: Tensor, threshold: float) -> Tensor:
    """The smallest score among the fewest top scores that hold ``threshold`` of the total."""
    ordered = torch.sort(scores, descending=True).values
    cumulative = torch.cumsum(ordered, dim=0) / torch.sum(ordered)
    index = min(int(torch.searchsorted(cumulative, threshold).item()), len(cumulative) - 1)
    return ordered[index]


def prune(graph: AttributionGraph, node_threshold: float = 0.8, edge_threshold: float = 0.98) -> PruneResult:
    """Nodes holding ``node_threshold`` of the influence on the logits (tokens and logits
    always), edges holding ``edge_threshold`` of it among them, then features and errors
    without a kept outgoing edge and features without a kept incoming edge dropped
    until nothing changes."""
    for name, value in (("node_threshold", node_threshold), ("edge_threshold", edge_threshold)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be between 0.0 and 1.0")
    adjacency, weights = graph.adjacency, graph.logit_weights()
    fixed = graph.token_start  # tokens and logits are kept whatever their influence
    node_influence = influence(normalize_matrix(adjacency), weights)
    node_mask = node_influence >= find_threshold(node_influence, node_threshold)
    node_mask[fixed:] = True
    kept = adjacency.clone()
    kept[~node_mask] = 0
    kept[:, ~node_mask] = 0
    normalized = normalize_matrix(kept)
    edge_scores = normalized * (influence(normalized, weights) + weights)[:, None]
    edge_mask = edge_scores >= find_threshold(edge_scores.flatten(), edge_threshold)
    # A threshold that reaches the zero scores (edge_threshold 1.0) would keep every pair of
    # nodes, edges or not, and the edges of nodes already dropped: keep only real edges between
    # kept nodes (circuit-tracer's prune_graph keeps them all there).
    edge_mask &= kept != 0
    before = node_mask.clone()
    _drop_unconnected(node_mask, edge_mask, fixed, graph.n_features)
    while not torch.equal(node_mask, before):  # each drop may strand more nodes
        before = node_mask.clone()
        edge_mask[~node_mask] = False
        edge_mask[:, ~node_mask] = False
        _drop_unconnected(node_mask, edge_mask, fixed, graph.n_features)
    ordered, order = torch.sort(node_influence, descending=True)
    cumulative = torch.zeros_like(node_influence)
    cumulative[order] = torch.cumsum(ordered, dim=0) / torch.sum(ordered)
    return PruneResult(node_mask, edge_mask, cumulative)


def _drop_unconnected(node_mask: Tensor, edge_mask: Tensor, fixed: int, n_features: int) -> None:
    """Features and errors without a kept outgoing edge, features without a kept incoming one."""
    node_mask[:fixed] &= edge_mask[:, :fixed].any(0)
    node_mask[:n_features] &= edge_mask[:n_features].any(1)


def graph_scores(graph: AttributionGraph) -> tuple[float, float]:
    """(replacement, completeness): the tokens' share of the tokens' and errors' influence;
    the influence-weighted (plus logit weight) mean share of each node's normalised input
    that does not come from error nodes."""
    weights = graph.logit_weights()
    normalized = normalize_matrix(graph.adjacency)
    node_influence = influence(normalized, weights)
    errors = slice(graph.error_start, graph.token_start)
    token_influence = node_influence[graph.token_start: graph.logit_start].sum()
    error_influence = node_influence[errors].sum()
    replacement = token_influence / (token_influence + error_influence)
    non_error = 1 - normalized[:, errors].sum(dim=-1)
    output_influence = node_influence + weights
    completeness = (non_error * output_influence).sum() / output_influence.sum()
    return float(replacement), float(completeness)
