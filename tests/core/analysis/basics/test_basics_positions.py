"""The positions picture against the formulas: the sinusoidal table, the rotary angles, dot products.

Expected values are written out with ``math`` here; the picture is read off the
model's own position module, so these pin what the model adds.
"""

from __future__ import annotations

import math

import pytest
import torch

from tui_lab.core.analysis.basics.basics_example import fresh_model
from tui_lab.core.analysis.basics.basics_positions import position_picture
from tui_lab.core.config.presets import load_preset


def _model(**values: object) -> torch.nn.Module:
    config = load_preset("copy").with_values({"model.d_model": 32, "model.n_heads": 2, **values})
    return fresh_model(config)[0]


def test_sinusoidal_table_is_the_papers_formula() -> None:
    picture = position_picture(_model(**{"model.positional": "sinusoidal"}), length=24)
    d = 32
    assert picture.kind == "sinusoidal" and tuple(picture.table.shape) == (24, d)
    for pos, i in ((0, 0), (1, 0), (5, 3), (17, 7), (23, 15)):
        angle = pos / 10000 ** (2 * i / d)
        assert picture.table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
        assert picture.table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)
    # PE_p . PE_s = sum_i sin(p w_i) sin(s w_i) + cos(p w_i) cos(s w_i) = sum_i cos((p - s) w_i)
    for p, s in ((3, 3), (3, 4), (10, 2), (0, 23)):
        expected = sum(math.cos((p - s) / 10000 ** (2 * i / d)) for i in range(d // 2))
        assert picture.similarity[p, s].item() == pytest.approx(expected, abs=1e-4)
    # Nearby positions look alike: the dot product falls away from the diagonal.
    assert picture.similarity[8, 9] > picture.similarity[8, 14] > picture.similarity[8, 20]


def test_learned_table_is_the_models_rows() -> None:
    model = _model(**{"model.arch": "decoder-only", "model.positional": "learned"})
    with torch.no_grad():
        model.pos.weight[2] = torch.arange(32.0)
    picture = position_picture(model, length=8)
    assert picture.kind == "learned"
    assert picture.table[2].tolist() == list(range(32))
    assert picture.similarity[2, 2].item() == pytest.approx(sum(x * x for x in range(32)))


def test_rotary_angles_are_position_times_frequency() -> None:
    # d_head 16, rotating its first half (rope_fraction 0.5): 4 pairs, w_j = base^(-2j/8).
    model = _model(**{"model.positional": "rope", "model.rope_fraction": 0.5})
    picture = position_picture(model, length=20)
    dims = 8
    assert picture.kind == "rope" and tuple(picture.table.shape) == (20, dims // 2)
    for p in (0, 1, 7, 19):
        for j in range(dims // 2):
            theta = p * 10000 ** (-2 * j / dims)
            got = picture.table[p, j].item()
            assert 0.0 <= got < 2 * math.pi
            # compare on the circle: the table is wrapped to [0, 2 pi)
            assert math.cos(got) == pytest.approx(math.cos(theta), abs=1e-4)
            assert math.sin(got) == pytest.approx(math.sin(theta), abs=1e-4)
    for p, s in ((4, 4), (4, 5), (2, 17)):
        expected = sum(math.cos((p - s) * 10000 ** (-2 * j / dims)) for j in range(dims // 2))
        assert picture.similarity[p, s].item() == pytest.approx(expected, abs=1e-4)
