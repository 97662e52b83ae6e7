"""Pruning, influence and both scores on a tiny graph worked by hand (circuit-tracer's
definitions), and the graph file's node ids and links for it.

One layer, two positions, two features, one logit (p = 1). Nodes: f0 = 0, f1 = 1,
errors (L0, pos 0) = 2 and (L0, pos 1) = 3, tokens 4 and 5, the logit 6. Edges
(target <- source: weight): logit <- f0: 3, f1: -1, error(0, 1): 2, token 1: 1;
f0 <- token 1: 2; f1 <- token 0: 1, token 1: 1.

Row-normalised |A|: logit row 3/7, 1/7, 2/7, 1/7; f0 row token 1: 1; f1 row 1/2, 1/2.
Influence (w A + w A^2): f0 3/7, f1 1/7, error1 2/7, token0 1/14, token1 1/7 + 3/7 + 1/14
= 9/14. Total 11/7; sorted 9/14, 3/7, 2/7, 1/7, 1/14 -> cumulative 9/22, 15/22, 19/22,
21/22, 1: 0.8 first reached at 19/22, so the node threshold is 2/7 and f1 goes.
Replacement: tokens (10/14) over tokens and errors (14/14) = 5/7. Completeness: the
logit row is 5/7 non-error, every other row 1; weighted by influence plus logit
weight (total 18/7): (5/7 + 11/7) / (18/7) = 8/9.
"""

from __future__ import annotations

import pytest
import torch

from tui_lab.core.analysis.circuits.graph import AttributionGraph
from tui_lab.core.analysis.circuits.graph_file import cantor, graph_json


def _tiny() -> AttributionGraph:
    a = torch.zeros(7, 7)
    a[6, 0], a[6, 1], a[6, 3], a[6, 5] = 3.0, -1.0, 2.0, 1.0
    a[0, 5] = 2.0
    a[1, 4], a[1, 5] = 1.0, 1.0
    return AttributionGraph(
        text="ab", tokens=[7, 9], token_labels=["a", "b"], n_layers=1,
        active_features=torch.tensor([[0, 1, 4], [0, 1, 11]]), activation_values=torch.tensor([0.5, 1.5]),
        selected_features=torch.tensor([0, 1]), logit_tokens=[3], logit_labels=["c"],
        logit_probabilities=torch.tensor([1.0]), adjacency=a,
    )


def test_scores_by_hand() -> None:
    replacement, completeness = _tiny().scores()
    assert replacement == pytest.approx(5 / 7, abs=1e-6)
    assert completeness == pytest.approx(8 / 9, abs=1e-6)


def test_prune_by_hand() -> None:
    pruned = _tiny().prune(0.8, 0.98)
    assert pruned.node_mask.tolist() == [True, False, False, True, True, True, True]
    kept = {(int(t), int(s)) for t, s in pruned.edge_mask.nonzero().tolist()}
    assert kept == {(6, 0), (6, 3), (6, 5), (0, 5)}
    expected = torch.tensor([15 / 22, 21 / 22, 1.0, 19 / 22, 1.0, 9 / 22, 1.0])
    assert torch.allclose(pruned.cumulative_scores, expected, atol=1e-6)


def test_a_tighter_node_threshold_drops_the_error_too() -> None:
    pruned = _tiny().prune(0.5, 0.98)  # 0.5 first reached at 15/22: threshold 3/7
    assert pruned.node_mask.tolist() == [True, False, False, False, True, True, True]
    kept = {(int(t), int(s)) for t, s in pruned.edge_mask.nonzero().tolist()}
    assert kept == {(6, 0), (6, 5), (0, 5)}


def test_keeping_every_edge_keeps_only_real_edges_between_kept_nodes() -> None:
    """edge_threshold 1.0 with weights whose running share stops a rounding short of 1: the
    threshold falls on the zero scores, which must not bring in non-edges or dropped nodes."""
    graph = _tiny()
    weights = [2.5907554626464844, 0.4783327281475067, 2.82240891456604, 2.559781074523926,
               -2.8603100776672363, 0.449935644865036, 0.5931745767593384]  # the same edges, reweighted
    graph.adjacency[graph.adjacency != 0] = torch.tensor(weights)
    pruned = graph.prune(0.8, 1.0)
    edges = {(int(t), int(s)) for t, s in pruned.edge_mask.nonzero().tolist()}
    nodes = set(pruned.node_mask.nonzero().flatten().tolist())
    assert edges and all(t in nodes and s in nodes and graph.adjacency[t, s] != 0 for t, s in edges)


def test_thresholds_outside_zero_to_one_are_refused() -> None:
    with pytest.raises(ValueError):
        _tiny().prune(1.5)


def test_graph_file_has_circuit_tracers_ids() -> None:
    data = graph_json(_tiny(), "tiny")
    ids = [n["node_id"] for n in data["nodes"]]  # type: ignore[index, union-attr]
    assert ids == ["0_4_1", "0_0_1", "E_7_0", "E_9_1", "2_3_1"]
    feature = data["nodes"][0]  # type: ignore[index]
    assert feature["feature"] == cantor(0, 4) == 14 and feature["activation"] == 0.5
    logit = data["nodes"][-1]  # type: ignore[index]
    assert logit["is_target_logit"] and logit["clerp"] == 'Output "c" (p=1.000)' and logit["layer"] == "2"
    links = {(link["source"], link["target"], link["weight"]) for link in data["links"]}  # type: ignore[index, union-attr]
    assert links == {("0_4_1", "2_3_1", 3.0), ("0_0_1", "2_3_1", 2.0), ("E_9_1", "2_3_1", 1.0), ("E_9_1", "0_4_1", 2.0)}
    assert data["metadata"]["prompt_tokens"] == ["a", "b"]  # type: ignore[index]
