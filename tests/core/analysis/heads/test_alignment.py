"""A translator's atlas (``analysis/alignment.py``): the cross-attention scores on hand-made
weights, and the atlas of a random-weight Marian model opened from a save_pretrained folder."""

from __future__ import annotations

import pytest
import torch

from bench.hf_factory import save_marian
from tui_lab.core.analysis.heads.alignment import monotonicity, self_patterns, sharpness
from tui_lab.core.analysis.heads.head_scores import atlas_for
from tui_lab.core.opening.from_files import open_files


def test_sharpness_is_one_for_one_hot_rows_and_chance_for_uniform_ones() -> None:
    one_hot = torch.eye(5)[None]  # (1, 5, 5)
    uniform = torch.full((1, 4, 8), 1 / 8)
    assert sharpness(one_hot).tolist() == [1.0]
    assert sharpness(uniform).tolist() == [pytest.approx(1 / 8)]


def test_monotonic_scores_a_walk_through_the_source_above_a_sink() -> None:
    walk = torch.eye(5)[None]  # target token q attends to source piece q
    sink = torch.zeros(1, 5, 5)
    sink[..., -1] = 1.0  # every target token on the final </s>
    walk_score, chance = monotonicity(walk)
    sink_score, _ = monotonicity(sink)
    # The band of a 5 x 5 pair: 2, 3, 3, 3, 2 keys of 5 -> 13 / 25.
    assert chance == pytest.approx(13 / 25)
    assert walk_score.tolist() == [1.0]
    assert sink_score.tolist() == [pytest.approx(2 / 5)]  # only the last two rows' band holds </s>
    long = torch.zeros(1, 3, 9)  # 3 target tokens over 9 source pieces: places 0, 4, 8
    long[0, 0, 0] = long[0, 1, 4] = long[0, 2, 8] = 1.0
    assert monotonicity(long)[0].tolist() == [1.0]


def test_self_patterns_and_their_chance() -> None:
    scores, chance = self_patterns(torch.eye(4)[None], causal=True)
    assert scores["diagonal"].tolist() == [1.0] and scores["previous"].tolist() == [0.0]
    assert chance["diagonal"] == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)
    assert chance["first"] == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)
    _, encoder = self_patterns(torch.full((1, 4, 4), 0.25), causal=False)
    assert encoder["diagonal"] == pytest.approx(0.25)


@pytest.fixture(scope="module")
def translator(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("marian")
    save_marian(folder)
    return open_files(str(folder))


def test_a_translators_atlas_scores_every_head(translator) -> None:
    atlas = atlas_for(translator.model, translator.task, "encoder-decoder")
    names = {(h.name, h.head) for h in atlas.heads}
    kinds = ("encoder.{}.self", "decoder.{}.self", "decoder.{}.cross")
    assert names == {(k.format(i), h) for k in kinds for i in range(2) for h in range(4)}
    for h in atlas.heads:
        assert set(h.scores) == ({"sharp", "monotonic"} if h.name.endswith("cross") else {"diagonal", "previous", "first"})
        assert all(0.0 <= v <= 1.0 for v in h.scores.values())
    # Random weights: no head lifts over chance by the floor.
    assert all(h.pattern is None for h in atlas.heads)
    assert any("sharp" in line and "monotonic" in line for line in atlas.probe_lines())
