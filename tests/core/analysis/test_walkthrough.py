"""The attention walkthrough against the tutorial's worked example, computed by hand here."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from tui_lab.core.analysis.walkthrough import Projections, walk

Q = [[0.8, 0.2], [0.5, 0.6], [0.1, 0.9]]
K = [[0.9, 0.1], [0.4, 0.7], [0.2, 0.8]]
V = [[0.5, 0.1], [0.4, 0.8], [0.9, 0.3]]


def _by_hand(row: int) -> tuple[list[float], list[float], list[float], list[float]]:
    """The formula in plain Python: q.k, / sqrt(2), softmax, weighted sum of V."""
    q = Q[row]
    raw = [q[0] * k[0] + q[1] * k[1] for k in K]
    scaled = [r / math.sqrt(2) for r in raw]
    exps = [math.exp(s) for s in scaled]
    weights = [e / sum(exps) for e in exps]
    out = [sum(w * v[j] for w, v in zip(weights, V, strict=True)) for j in range(2)]
    return raw, scaled, weights, out


@pytest.mark.parametrize("row", [0, 1, 2])
def test_walk_matches_the_hand_worked_example(row):
    # One head: (H=1, T=3, d=2); the "captured" weights are the hand-computed ones.
    proj = Projections(torch.tensor([Q]), torch.tensor([K]), torch.tensor([V]), causal=False)
    raw, scaled, weights, out = _by_hand(row)
    result = SimpleNamespace(
        attention={"encoder.0.self": torch.tensor([[_by_hand(r)[2] for r in range(3)]])},
        labels={"encoder.0.self": (["a", "b", "c"], ["a", "b", "c"])},
    )
    w = walk(proj, result, "encoder.0.self", 0, row)
    assert w.raw == pytest.approx(raw, abs=1e-6)
    assert w.scaled == pytest.approx(scaled, abs=1e-6)
    assert w.weights == pytest.approx(weights, abs=1e-6)
    assert w.output == pytest.approx(out, abs=1e-6)
    assert w.max_diff < 1e-6
    assert w.d_head == 2 and w.query == "abc"[row]


def test_row_zero_numbers_written_out():
    # q0.k = 0.74, 0.46, 0.32 (0.8*0.9+0.2*0.1, 0.8*0.4+0.2*0.7, 0.8*0.2+0.2*0.8)
    raw, scaled, weights, _ = _by_hand(0)
    assert raw == pytest.approx([0.74, 0.46, 0.32])
    assert scaled == pytest.approx([0.523259, 0.325269, 0.226274], abs=1e-6)
    assert sum(weights) == pytest.approx(1.0)
