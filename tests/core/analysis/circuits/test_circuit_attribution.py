"""Every edge of an attribution graph is its source's direct effect on its target: switch
the source off in the frozen replacement model (``conftest.Reference``, run forward
through the real model's hook points) and the target moves by exactly the edge; each
logit's incoming edges plus the constant terms (everything switched off) add up to its
demeaned logit. gpt2 (LayerNorm), llama (RMSNorm, grouped key/value heads) and
gpt_neox (parallel residual), each with skip transcoders."""

from __future__ import annotations

import pytest
import torch

from tests.core.analysis.circuits.conftest import PROMPT, Off, make_reference
from tui_lab.core.analysis.circuits.attribution import attribute
from tui_lab.core.analysis.circuits.graph import AttributionGraph, NodeKind

ACT_RTOL = 1e-3  # relative to the largest edge into the feature
LOGIT_RTOL = 1e-5  # relative to the largest edge into the logit


def _targets(graph: AttributionGraph, pre: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """The graph's target values (features' pre-activations, demeaned logits) in row order."""
    values = torch.zeros(graph.n_nodes, dtype=torch.float64)
    for i in range(graph.n_features):
        layer, pos, feat = graph.active_features[graph.selected_features[i]].tolist()
        values[i] = pre[layer, pos, feat]
    values[graph.logit_start:] = logits[graph.logit_tokens]
    return values


def _sources(graph: AttributionGraph, every: int) -> list[tuple[int, Off]]:
    picked: list[tuple[int, Off]] = []
    for node in graph.nodes():
        if node.kind is NodeKind.FEATURE and node.index % every == 0:
            picked.append((node.index, Off(features=((node.layer, node.pos, node.id),))))
        elif node.kind is NodeKind.ERROR and node.pos > 0:
            picked.append((node.index, Off(errors=((node.layer, node.pos),))))
        elif node.kind is NodeKind.TOKEN:
            picked.append((node.index, Off(tokens=(node.pos,))))
    return picked


def _check_columns(graph: AttributionGraph, ref: object, every: int) -> None:
    base = _targets(graph, *ref.run())  # type: ignore[attr-defined]
    rows = graph.adjacency
    feature_scale = rows[: graph.n_features].double().abs().amax(1).clamp(min=1e-6)
    logit_scale = rows[graph.logit_start:].double().abs().amax(1)
    for index, off in _sources(graph, every):
        effect = base - _targets(graph, *ref.run(off))  # type: ignore[attr-defined]
        col = rows[:, index].double()
        feats = (col[: graph.n_features] - effect[: graph.n_features]).abs() / feature_scale
        assert float(feats.max()) < ACT_RTOL, (index, off)
        logit = (col[graph.logit_start:] - effect[graph.logit_start:]).abs() / logit_scale
        assert float(logit.max()) < LOGIT_RTOL, (index, off, logit)


def test_every_edge_is_the_sources_direct_effect(family) -> None:  # type: ignore[no-untyped-def]
    name, model, ts = family
    graph = attribute(model, PROMPT, ts)
    assert graph.n_features > 20 and len(graph.logit_tokens) >= 1
    _check_columns(graph, make_reference(model, ts, PROMPT), every=3)


def test_logit_edges_plus_constants_are_the_demeaned_logit(family) -> None:  # type: ignore[no-untyped-def]
    name, model, ts = family
    graph = attribute(model, PROMPT, ts)
    ref = make_reference(model, ts, PROMPT)
    _, demeaned = ref.run()
    everything = Off(
        features=tuple(tuple(f) for f in graph.active_features.tolist()),
        errors=tuple((lay, pos) for lay in range(graph.n_layers) for pos in range(graph.n_pos)),
        tokens=tuple(range(graph.n_pos)),
    )
    _, constant = ref.run(everything)
    total = graph.adjacency[graph.logit_start:].double().sum(1) + constant[graph.logit_tokens]
    assert torch.allclose(total, demeaned[graph.logit_tokens], atol=1e-4)
    # and the replacement is exact: its forward pass is the model's
    logits = model.run_with_hooks(torch.tensor([PROMPT]))[0, -1]
    assert torch.allclose(demeaned.float(), logits - logits.mean(), atol=1e-4)


def test_a_capped_graph_keeps_the_same_edges(family) -> None:  # type: ignore[no-untyped-def]
    name, model, ts = family
    full = attribute(model, PROMPT, ts)
    capped = attribute(model, PROMPT, ts, max_feature_nodes=10, batch_size=4, update_interval=1)
    assert capped.n_features == 10
    keep = torch.cat([capped.selected_features, torch.arange(full.n_features, full.n_nodes)])
    rows = torch.cat([capped.selected_features, torch.arange(full.logit_start, full.n_nodes)])
    expected = full.adjacency[rows][:, keep]
    got = torch.cat([capped.adjacency[: capped.n_features], capped.adjacency[capped.logit_start:]])
    assert torch.allclose(got, expected, atol=1e-5, rtol=1e-4)


def test_progress_counts_feature_rows_and_cancel_stops(gpt2) -> None:  # type: ignore[no-untyped-def]
    from tui_lab.core.analysis.circuits.attribution import AttributionStopped

    _, model, ts = gpt2
    seen: list[tuple[int, int]] = []
    graph = attribute(model, PROMPT, ts, max_feature_nodes=9, batch_size=4,
                      progress=lambda done, total, what: seen.append((done, total)))
    assert seen[0] == (0, 9) and seen[-1] == (9, 9) and graph.n_features == 9
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    with pytest.raises(AttributionStopped):
        attribute(model, PROMPT, ts, cancelled=lambda: True)
