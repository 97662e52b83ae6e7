"""Rotary positions on a fraction of each head, with another base (GPT-NeoX's
``rotary_pct``, Llama's ``rope_theta``), against the rotation written out pair
by pair in plain Python."""

from __future__ import annotations

import math

import pytest
import torch

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.model.positions import RotaryEmbedding


def rotate_by_hand(x: list[float], pos: int, dims: int, base: float) -> list[float]:
    """Pairs (j, j + dims/2) for j < dims/2 turned by pos * base^(-2j/dims); the rest kept."""
    out = list(x)
    half = dims // 2
    for j in range(half):
        theta = pos * base ** (-2 * j / dims)
        a, b = x[j], x[j + half]
        out[j] = a * math.cos(theta) - b * math.sin(theta)
        out[j + half] = b * math.cos(theta) + a * math.sin(theta)
    return out


@pytest.mark.parametrize(("d_head", "fraction", "base"), [(8, 1.0, 10000.0), (8, 0.5, 10000.0), (12, 0.5, 500.0), (16, 0.75, 1e6)])
def test_rotation_matches_the_pairs_by_hand(d_head, fraction, base) -> None:
    rope = RotaryEmbedding(d_head, base=base, fraction=fraction)
    dims = int(d_head * fraction)
    assert rope.dims == dims
    x = torch.randn(2, 6, d_head, generator=torch.Generator().manual_seed(0), dtype=torch.float64).float()
    got = rope(x, offset=3)  # positions 3..8
    for b in range(2):
        for t in range(6):
            want = rotate_by_hand(x[b, t].tolist(), 3 + t, dims, base)
            assert got[b, t].tolist() == pytest.approx(want, abs=1e-5)


def test_the_unrotated_dims_pass_through_unchanged() -> None:
    rope = RotaryEmbedding(16, fraction=0.25)
    x = torch.randn(1, 2, 5, 16)
    got = rope(x, offset=7)
    assert torch.equal(got[..., 4:], x[..., 4:])


def test_relative_scores_survive_a_fraction() -> None:
    # rot(p) q . rot(s) k depends on s - p only, fraction or not.
    rope = RotaryEmbedding(12, base=300.0, fraction=0.5)
    q, k = torch.randn(1, 12), torch.randn(1, 12)
    a = rope(q, 2) @ rope(k, 5).T
    b = rope(q, 10) @ rope(k, 13).T
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_config_refuses_an_odd_number_of_rotated_dims() -> None:
    with pytest.raises(ValueError, match="rope_fraction"):
        ModelConfig(d_model=48, n_heads=4, positional="rope", rope_fraction=0.25)  # 3 of 12 dims
    assert ModelConfig(d_model=64, n_heads=4, positional="rope", rope_fraction=0.25).rotary_dims == 4
