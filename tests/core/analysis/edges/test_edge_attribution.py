"""EAP and EAP-IG against hand-computed first-order products, and exact edge patching
against patching a reader's input by hand, on a tiny model with MLPs (tests/core/analysis/
edges/reference.py writes the model out as a sum of writers, independently of the lab's code)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.core.analysis.edges import reference as R
from tui_lab.core.analysis.edges.edge_attribution import edge_attribution
from tui_lab.core.analysis.edges.edge_forward import graph_of
from tui_lab.core.analysis.patching.attribution_patching import attribution_patch
from tui_lab.core.analysis.patching.patch_pair import PatchPair


def _diffs(lab: Any, pair: PatchPair) -> tuple[R.Ref, R.Ref]:
    with torch.no_grad():
        return (R.forward(lab.model, pair.clean, pair.answer, pair.wrong),
                R.forward(lab.model, pair.corrupt, pair.answer, pair.wrong))


def _hand_scores(lab: Any, pair: PatchPair, points: list[float]) -> torch.Tensor:
    """(W, R): (clean_w - corrupt_w) . gradient of reader r, averaged over runs from the
    input writer at corrupt + a (clean - corrupt) for each a in ``points``."""
    g = graph_of(lab.model)
    clean, corrupt = _diffs(lab, pair)
    grads: dict[str, torch.Tensor] = {}
    for a in points:
        inputs = (corrupt.writers["input"] + a * (clean.writers["input"] - corrupt.writers["input"])).requires_grad_()
        run = R.forward(lab.model, pair.corrupt, pair.answer, pair.wrong, inputs=inputs)
        found = torch.autograd.grad(run.metric, list(run.readers.values()))
        for name, grad in zip(run.readers, found, strict=True):
            grads[name] = grads.get(name, 0) + grad / len(points)
    scores = torch.zeros(g.n_writers, g.n_readers)
    for w, r in g.allowed.nonzero().tolist():
        wn, rn = g.writer_names[w], g.reader_names[r]
        scores[w, r] = ((clean.writers[wn] - corrupt.writers[wn]) * grads[rn]).sum()
    return scores


def test_eap_is_the_first_order_product(tiny: Any, pair: PatchPair) -> None:
    want = _hand_scores(tiny, pair, [0.0])
    got = edge_attribution(tiny, pair, "eap")
    assert got.method == "eap" and got.graph.n_edges == int(got.graph.allowed.sum())
    assert float(want.abs().max()) > 1e-2  # the pair moves something
    torch.testing.assert_close(got.scores, want, atol=1e-5, rtol=1e-4)


def test_eap_ig_averages_gradients_on_the_input_path(tiny: Any, pair: PatchPair) -> None:
    want = _hand_scores(tiny, pair, [k / 4 for k in range(4)])
    got = edge_attribution(tiny, pair, "eap-ig", ig_steps=4)
    torch.testing.assert_close(got.scores, want, atol=1e-5, rtol=1e-4)


def test_one_ig_step_is_eap(tiny: Any, pair: PatchPair) -> None:
    eap = edge_attribution(tiny, pair, "eap")
    ig = edge_attribution(tiny, pair, "eap-ig", ig_steps=1)
    torch.testing.assert_close(ig.scores, eap.scores, atol=1e-6, rtol=1e-5)


def test_exact_edge_patching_is_the_reader_patched_by_hand(tiny: Any, pair: PatchPair) -> None:
    g = graph_of(tiny.model)
    clean, corrupt = _diffs(tiny, pair)
    got = edge_attribution(tiny, pair, "exact")
    for w, r in g.allowed.nonzero().tolist()[::3]:
        wn, rn = g.writer_names[w], g.reader_names[r]
        delta = clean.writers[wn] - corrupt.writers[wn]
        with torch.no_grad():
            run = R.forward(tiny.model, pair.corrupt, pair.answer, pair.wrong, patch={(wn, rn): delta})
        assert float(got.scores[w, r]) == pytest.approx(float(run.metric - corrupt.metric), abs=1e-5), (wn, rn)
    assert got.clean == pytest.approx(float(clean.metric), abs=1e-5)


def test_many_ig_steps_come_closer_to_exact_than_eap(tiny: Any, pair: PatchPair) -> None:
    exact = edge_attribution(tiny, pair, "exact").scores
    eap_error = float((edge_attribution(tiny, pair, "eap").scores - exact).norm())
    ig_error = float((edge_attribution(tiny, pair, "eap-ig", ig_steps=20).scores - exact).norm())
    # measured here: EAP 0.053, EAP-IG (20 steps) 0.0086, beside exact scores of norm 0.093
    assert ig_error < 0.5 * eap_error


def test_node_scores_are_the_patch_panes_attribution(tiny: Any, pair: PatchPair) -> None:
    scores = edge_attribution(tiny, pair, "eap")
    nodes = scores.node_scores()
    g = scores.graph
    z = attribution_patch(tiny, pair, "z")  # rows L0, L1; columns the heads
    for layer in range(g.n_layers):
        for head in range(g.n_heads):
            want = z.raw[layer][head] - z.corrupt
            assert float(nodes[g.head_writer(layer, head)]) == pytest.approx(want, abs=1e-5)
    mlp = attribution_patch(tiny, pair, "mlp_out")  # rows the layers; columns the positions
    for layer in range(g.n_layers):
        want = sum(v - mlp.corrupt for v in mlp.raw[layer])
        assert float(nodes[g.mlp_writer(layer)]) == pytest.approx(want, abs=1e-5)
