"""The atlas's label floor: worked by hand, and on trained heads with and without a pattern."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tui_lab.core.analysis.heads.atlas import NO_PATTERN
from tui_lab.core.analysis.heads.head_floor import LABEL_FLOOR, clears_floor, lift
from tui_lab.core.analysis.heads.head_scores import (
    atlas_for,
    score_atlas,
    score_atlas_on_repeats,
    special_ids_of,
)
from tui_lab.core.config.lab_config import ModelConfig
from tui_lab.core.model.models import build_model
from tui_lab.core.opening.from_run import load_for_inference
from tui_lab.core.tasks.vocab import N_SPECIALS

DATA = Path(__file__).resolve().parents[3] / "data"


def test_lift_over_chance_worked_by_hand():
    assert lift(0.25, 0.25) == 0.0  # a head spread evenly
    assert lift(1.0, 0.25) == 1.0
    assert lift(0.5, 0.25) == pytest.approx(1 / 3)  # (0.5 - 0.25) / 0.75
    assert lift(0.1, 0.25) == 0.0  # below chance is no pattern, not a negative one
    assert lift(1.0, 1.0) == 0.0  # a single allowed key: every head scores 1, it says nothing


def test_the_floor():
    assert LABEL_FLOOR == 0.3
    assert clears_floor(0.5, 0.25)  # lift 1/3
    assert not clears_floor(0.4, 0.25)  # lift 0.2
    # 0.19 on a long probe (chance 0.06): the one-layer control's level, no label
    assert not clears_floor(0.19, 0.06)


@pytest.fixture(scope="module")
def control():  # type: ignore[no-untyped-def]
    return load_for_inference(DATA / "induction-control", "cpu")


def test_the_one_layer_control_has_no_induction_head(control):
    """Trained 2,000 steps, its heads' best is induction, weakly: none is called induction."""
    atlas = score_atlas(control.model, control.task, "decoder-only")
    assert len(atlas.heads) == 4
    for head in atlas.heads:
        assert head.best == "induction" and 0.1 < head.best_score < 0.3, head
        assert head.pattern is None and head.shown == NO_PATTERN
    # The standard probe (blocks of 16 here, the task's longest prefix): no label either.
    standard = score_atlas_on_repeats(control.model, len(control.task.vocab), range(N_SPECIALS), length=16)
    assert len(standard.heads) == 4 and all(h.pattern is None for h in standard.heads), standard.heads


def test_trained_heads_with_a_pattern_keep_their_label():
    learned = load_for_inference(DATA / "learned-copy", "cpu")
    heads = score_atlas(learned.model, learned.task, learned.config.model.arch).heads
    cross = [h for h in heads if h.name.endswith(".cross")]
    assert len(cross) == 4 and all(h.pattern == "alignment" for h in cross), cross


class _Text:
    """A real model's text task as the atlas sees it: a name, a vocabulary and a tokenizer's special ids."""

    name = "token-lm"

    def __init__(self, size: int, eos: int) -> None:
        self.vocab = range(size)
        self.tokenizer = SimpleNamespace(eos_id=eos, bos_id=eos, pad_id=None)


def test_random_weight_heads_on_the_standard_probe_get_no_label():
    """A task with no examples of its own gets the standard probe; random heads stay unlabelled."""
    torch.manual_seed(0)
    config = ModelConfig(
        arch="decoder-only", n_encoder_layers=0, n_decoder_layers=2, d_model=32, n_heads=4,
        d_ff=64, positional="learned", max_len=64, scale_embeddings=False,
    )
    model = build_model(config, 500)
    task = _Text(500, eos=499)
    assert special_ids_of(task) == [499]
    atlas = atlas_for(model, task, "decoder-only")
    assert set(atlas.probes) == {"repeat"} and "1 special ids left out" in atlas.probes["repeat"]
    assert len(atlas.heads) == 8
    for head in atlas.heads:
        assert set(head.scores) == {"previous", "first", "duplicate", "induction"}
        assert set(head.probes.values()) == {"repeat"}
        assert head.pattern is None, head
