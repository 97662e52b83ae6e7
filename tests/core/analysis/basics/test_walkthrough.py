"""The tutorial's worked example (DESIGN.md) through the project's attention and walkthrough.

The expected numbers come from the formula written out in plain Python here
(``_by_hand``), and row 0 is also worked to four places below; the tutorial's
own printed intermediates contain slips, so none of them is copied.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from tui_lab.core.analysis.basics.walkthrough import Projections, walk
from tui_lab.core.model.attention import causal_mask, scaled_dot_product_attention

Q = [[0.8, 0.2], [0.5, 0.6], [0.1, 0.9]]
K = [[0.9, 0.1], [0.4, 0.7], [0.2, 0.8]]
V = [[0.5, 0.1], [0.4, 0.8], [0.9, 0.3]]

# Row 0 by hand: q0.k_j = 0.8*0.9+0.2*0.1, 0.8*0.4+0.2*0.7, 0.8*0.2+0.2*0.8;
# / sqrt(2) = 0.5233, 0.3253, 0.2263; exp = 1.6874, 1.3844, 1.2539 (sum 4.3257);
# softmax = 0.3901, 0.3200, 0.2899; output = 0.3901*V0 + 0.3200*V1 + 0.2899*V2.
ROW0_RAW = [0.74, 0.46, 0.32]
ROW0_WEIGHTS = [0.3901, 0.3200, 0.2899]
ROW0_OUT = [0.3901 * 0.5 + 0.3200 * 0.4 + 0.2899 * 0.9, 0.3901 * 0.1 + 0.3200 * 0.8 + 0.2899 * 0.3]


def _by_hand(row: int, causal: bool = False) -> tuple[list[float], list[float], list[float], list[float]]:
    """The formula in plain Python: q.k, / sqrt(2), softmax over the allowed keys, weighted V."""
    q = Q[row]
    raw = [q[0] * k[0] + q[1] * k[1] for k in K]
    scaled = [r / math.sqrt(2) for r in raw]
    allowed = [not causal or j <= row for j in range(len(K))]
    exps = [math.exp(s) if ok else 0.0 for s, ok in zip(scaled, allowed, strict=True)]
    weights = [e / sum(exps) for e in exps]
    out = [sum(w * v[j] for w, v in zip(weights, V, strict=True)) for j in range(2)]
    return raw, scaled, weights, out


def _tensors() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.tensor([Q]), torch.tensor([K]), torch.tensor([V])  # (H=1, T=3, d=2)


def test_row_zero_worked_by_hand_is_what_attention_computes():
    q, k, v = _tensors()
    out, weights = scaled_dot_product_attention(q, k, v)
    assert weights[0, 0].tolist() == pytest.approx(ROW0_WEIGHTS, abs=1e-4)
    assert out[0, 0].tolist() == pytest.approx(ROW0_OUT, abs=1e-4)
    w = walk(Projections(q, k, v, causal=False), _captured(weights), "encoder.0.self", 0, 0)
    assert w.raw == pytest.approx(ROW0_RAW, abs=1e-6)
    assert w.weights == pytest.approx(ROW0_WEIGHTS, abs=1e-4)
    assert w.output == pytest.approx(ROW0_OUT, abs=1e-4)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_matches_the_formula_on_every_row(causal):
    q, k, v = _tensors()
    mask = causal_mask(3) if causal else None
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    for row in range(3):
        _, _, hand_weights, hand_out = _by_hand(row, causal)
        assert weights[0, row].tolist() == pytest.approx(hand_weights, abs=1e-6)
        assert out[0, row].tolist() == pytest.approx(hand_out, abs=1e-6)


def _captured(weights: torch.Tensor) -> SimpleNamespace:
    """What a decode hands the walkthrough: the captured weights and the tokens' labels."""
    return SimpleNamespace(
        attention={"encoder.0.self": weights},
        labels={"encoder.0.self": (["a", "b", "c"], ["a", "b", "c"])},
    )


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("row", [0, 1, 2])
def test_walk_writes_out_the_formula_and_agrees_with_the_captured_weights(row, causal):
    q, k, v = _tensors()
    _, captured = scaled_dot_product_attention(q, k, v, causal_mask(3) if causal else None)
    raw, scaled, weights, out = _by_hand(row, causal)
    w = walk(Projections(q, k, v, causal=causal), _captured(captured), "encoder.0.self", 0, row)
    assert w.raw == pytest.approx(raw, abs=1e-6)
    assert w.scaled == pytest.approx(scaled, abs=1e-6)
    assert w.weights == pytest.approx(weights, abs=1e-6)
    assert w.output == pytest.approx(out, abs=1e-6)
    assert w.masked == [causal and j > row for j in range(3)]
    assert w.captured == pytest.approx(weights, abs=1e-6) and w.max_diff < 1e-6
    assert w.d_head == 2 and w.query == "abc"[row] and w.keys == ["a", "b", "c"]


def test_walk_reports_how_far_the_captured_weights_are():
    """A decode whose captured weights differ from the formula shows the gap (the lab flags it)."""
    q, k, v = _tensors()
    _, captured = scaled_dot_product_attention(q, k, v)
    off = captured.clone()
    off[0, 1] = torch.tensor([1.0, 0.0, 0.0])
    w = walk(Projections(q, k, v, causal=False), _captured(off), "encoder.0.self", 0, 1)
    _, _, weights, _ = _by_hand(1)
    assert w.max_diff == pytest.approx(1.0 - weights[0], abs=1e-6)
