"""Positional encodings against their formulas, written out in the tests."""

from __future__ import annotations

import math

import pytest
import torch

from tui_lab.core.model.positions import LearnedPositions, RotaryEmbedding, SinusoidalPositions


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


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    """The reference layout: (x1, x2) -> (-x2, x1) on the two halves."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rope_equals_the_rotate_half_formula(dtype: torch.dtype) -> None:
    # The module rotates with roll + a signed sin table; the reference formula is
    # x * cos + rotate_half(x) * sin with angles p * base^(-2j/d), computed here.
    torch.manual_seed(2)
    d, base = 8, 10000.0
    rope = RotaryEmbedding(d, base=base, max_len=4)
    x = torch.randn(2, 3, 6, d, dtype=dtype)  # (B, H, T, d_head)
    for offset in (0, 3, 50):  # 50 is past the table: it grows
        pos = torch.arange(offset, offset + 6, dtype=torch.float64)[:, None]  # (T, 1)
        inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
        angles = torch.cat((pos * inv, pos * inv), dim=-1)  # (T, d)
        want = x.double() * angles.cos() + _rotate_half(x.double()) * angles.sin()
        got = rope(x, offset)
        assert got.dtype == dtype
        torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5)
        # angles() + rotate() is the forward, as a layer stack uses it.
        torch.testing.assert_close(RotaryEmbedding.rotate(x, *rope.angles(offset, 6)), got)


def test_tables_grown_during_inference_mode_serve_training_later() -> None:
    rope = RotaryEmbedding(8, max_len=2)
    sin = SinusoidalPositions(8, max_len=2)
    with torch.inference_mode():  # how decoding runs
        rope(torch.randn(1, 1, 5, 8), offset=20)
        sin(torch.randn(1, 5, 8), offset=20)
    assert rope.cos.size(0) >= 25 and sin.pe.size(0) >= 25
    assert not rope.cos.is_inference() and not rope.sin_signed.is_inference() and not sin.pe.is_inference()
    x = torch.randn(1, 1, 4, 8, requires_grad=True)
    y = torch.randn(1, 4, 8, requires_grad=True)
    (rope(x, offset=21).sum() + sin(y, offset=21).sum()).backward()  # saved for backward: must not raise
    assert x.grad is not None and y.grad is not None
