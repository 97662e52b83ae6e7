"""Positional encodings against their formulas, written out in the tests."""

from __future__ import annotations

import math

import pytest
import torch

from tui_lab.core.positions import LearnedPositions, RotaryEmbedding, SinusoidalPositions


def _pe(pos: int, j: int, d: int) -> float:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d))."""
    two_i = j - (j % 2)
    angle = pos / 10000 ** (two_i / d)
    return math.sin(angle) if j % 2 == 0 else math.cos(angle)


@pytest.mark.parametrize("d_model", [8, 7])
def test_sinusoidal_table_matches_the_formula(d_model: int) -> None:
    pos = SinusoidalPositions(d_model, max_len=50)
    x = torch.zeros(1, 50, d_model)
    got = pos(x)[0]
    for p in (0, 1, 2, 17, 49):
        for j in range(d_model):
            assert float(got[p, j]) == pytest.approx(_pe(p, j, d_model), abs=1e-5)


def test_sinusoidal_adds_to_input_with_offset_and_extends_past_its_table() -> None:
    d = 6
    pos = SinusoidalPositions(d, max_len=4)
    x = torch.randn(2, 10, d)  # longer than the table
    out = pos(x)
    for p in (0, 3, 4, 9):
        expected = [_pe(p, j, d) for j in range(d)]
        assert (out[1, p] - x[1, p]).tolist() == pytest.approx(expected, abs=1e-5)
    # Offset: three tokens starting at position 20 (past the grown table too).
    x = torch.zeros(1, 3, d)
    out = pos(x, offset=20)
    for i in range(3):
        assert out[0, i].tolist() == pytest.approx([_pe(20 + i, j, d) for j in range(d)], abs=1e-5)


def test_sinusoidal_has_no_parameters_and_no_checkpoint_state() -> None:
    pos = SinusoidalPositions(8, 16)
    assert list(pos.parameters()) == []
    assert pos.state_dict() == {}


def test_learned_positions_offset_and_limit() -> None:
    pos = LearnedPositions(max_len=5, d_model=3)
    assert [n for n, _ in pos.named_parameters()] == ["weight"]
    x = torch.zeros(2, 2, 3)
    out = pos(x, offset=3)
    torch.testing.assert_close(out[0], pos.weight[3:5].detach())
    with pytest.raises(ValueError, match="max_len=5"):
        pos(torch.zeros(1, 3, 3), offset=3)


def _score(rope: RotaryEmbedding, q: torch.Tensor, k: torch.Tensor, pq: int, pk: int) -> float:
    """q . k after rotating q to position pq and k to position pk."""
    rq = rope(q[None], offset=pq)[0]  # (1, d)
    rk = rope(k[None], offset=pk)[0]
    return float((rq * rk).sum())


def test_rope_scores_depend_only_on_relative_position() -> None:
    torch.manual_seed(0)
    rope = RotaryEmbedding(8)
    q, k = torch.randn(1, 8, dtype=torch.float64), torch.randn(1, 8, dtype=torch.float64)
    rope = rope.double()
    base = _score(rope, q, k, 3, 1)
    for shift in (1, 7, 100, 1000):  # 1000 is past the cached table: it grows
        assert _score(rope, q, k, 3 + shift, 1 + shift) == pytest.approx(base, abs=1e-5)
    assert _score(rope, q, k, 5, 1) != pytest.approx(base, abs=1e-3)  # distance matters


def test_rope_by_hand_and_norm_preserved() -> None:
    # d_head = 4: pairs (0, 2) and (1, 3) rotate by p * base^(-0/4) and p * base^(-2/4).
    rope = RotaryEmbedding(4, base=10000)
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=torch.float64)
    rope = rope.double()
    p = 5
    out = rope(x, offset=p)[0].tolist()
    expected = [0.0] * 4
    for j, theta in ((0, 1.0), (1, 10000 ** (-2 / 4))):
        a, b = x[0, j].item(), x[0, j + 2].item()
        c, s = math.cos(p * theta), math.sin(p * theta)
        expected[j], expected[j + 2] = a * c - b * s, a * s + b * c
    assert out == pytest.approx(expected, abs=1e-6)  # tables are fp32
    assert math.hypot(*out) == pytest.approx(math.hypot(1, 2, 3, 4), abs=1e-6)


def test_rope_offset_equals_slice_of_full_sequence_and_keeps_dtype() -> None:
    torch.manual_seed(1)
    rope = RotaryEmbedding(6, max_len=4)
    x = torch.randn(2, 3, 9, 6)  # (B, H, T, d_head)
    full = rope(x)
    torch.testing.assert_close(rope(x[..., 5:, :], offset=5), full[..., 5:, :])
    assert rope(x.to(torch.bfloat16)).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="even"):
        RotaryEmbedding(5)


def test_tables_on_meta_device_are_not_computed() -> None:
    with torch.device("meta"):
        s = SinusoidalPositions(8, 32)
        r = RotaryEmbedding(8, max_len=32)
        lp = LearnedPositions(32, 8)
    assert s.pe.is_meta and s.pe.shape == (32, 8)
    assert r.cos.is_meta and r.cos.shape == (32, 8)
    assert lp.weight.is_meta
