"""The head atlas's probes: the standard repeat probe's layout, and the lab tasks' own."""

from __future__ import annotations

import pytest
import torch

from tui_lab.core.analysis.heads.head_probes import REPEAT, TASK_REPEATS, make_probe, standard_probe
from tui_lab.core.config.lab_config import TaskConfig
from tui_lab.core.config.shape import Shape
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.vocab import N_SPECIALS

SPECIALS = [0, 1, 2, 50_256]  # a BOS/EOS at the end of the vocabulary too, as GPT-2's


def test_standard_probe_repeats_each_block_once_right_after_itself():
    probe = standard_probe(50_257, SPECIALS, n=6, length=20, seed=3)
    assert probe.tokens.shape == (6, 40) and probe.tokens.dtype == torch.long
    assert probe.lengths.tolist() == [20] * 6
    first, second = probe.tokens[:, :20], probe.tokens[:, 20:]
    assert torch.equal(first, second)
    for row in first.tolist():  # distinct within a block: the repeat is the only place a token comes back
        assert len(set(row)) == 20
    assert probe.kind == REPEAT and "seed 3" in probe.description


def test_standard_probe_draws_no_special_id_and_stays_in_the_vocabulary():
    probe = standard_probe(12, SPECIALS, n=200, length=8, seed=0)  # 9 ordinary ids: 3..11
    seen = set(probe.tokens.flatten().tolist())
    assert seen == set(range(3, 12))  # every ordinary id drawn, no special, nothing out of range
    assert "9 ordinary ids (3 special ids left out)" in probe.description
    assert all(len(set(row)) == 8 for row in probe.tokens[:, :8].tolist())  # 8 of the 9, no repeat


def test_standard_probe_is_seeded():
    a, b = (standard_probe(1000, SPECIALS, n=4, length=16, seed=7) for _ in range(2))
    assert torch.equal(a.tokens, b.tokens)
    assert not torch.equal(a.tokens, standard_probe(1000, SPECIALS, n=4, length=16, seed=8).tokens)


def test_a_small_vocabulary_gets_shorter_blocks_and_too_small_a_clear_error():
    probe = standard_probe(10, [0, 1, 2, 3, 4], n=2, length=16, seed=0)  # 5 ordinary ids
    assert probe.lengths.tolist() == [5, 5] and probe.tokens.shape == (2, 10)
    with pytest.raises(ValueError, match="2 ordinary tokens"):
        standard_probe(4, [0, 1, 2], n=2, length=8, seed=0)


def test_a_lab_task_without_repeats_gets_the_standard_probe_over_its_ordinary_ids():
    task = make_task(TaskConfig(name="copy", min_len=3, max_len=6))
    probe = make_probe(task, "decoder-only", n=8, seed=0)
    assert probe.repeated is not None and probe.repeated.kind == REPEAT
    tokens, length = probe.repeated.tokens, int(probe.repeated.lengths[0])
    assert length == len(task.vocab) - N_SPECIALS < 16  # distinct tokens: no longer than the ordinary ids
    assert torch.equal(tokens[:, :length], tokens[:, length:])
    assert int(tokens.min()) >= N_SPECIALS
    assert probe.description == "copy: 8 held-out examples, seed 0"
    assert make_probe(task, "encoder-decoder", n=8, seed=0).repeated is None


def test_the_induction_task_brings_its_own_repeats():
    task = make_task(TaskConfig(name="induction", min_len=3, max_len=8, block_size=20))
    probe = make_probe(task, "decoder-only", n=16, seed=0)
    rep = probe.repeated
    assert rep is not None and rep.kind == TASK_REPEATS
    assert len(set(rep.lengths.tolist())) > 1  # the task's own varying lengths
    for row, length in zip(rep.tokens, rep.lengths.tolist(), strict=True):
        assert torch.equal(row[length : 2 * length], row[:length])


@pytest.mark.parametrize("shape", list(Shape))
def test_a_probe_asked_by_shape_is_the_one_asked_by_the_presets_spelling(shape: Shape):
    """Callers name the model's shape either way (``config.model.arch`` or ``Shape``); the probe
    is the same: the repeats for a decoder-only model only, the source for an encoder-decoder only."""
    task = make_task(TaskConfig(name="copy", min_len=3, max_len=6))
    by_shape, by_text = make_probe(task, shape, n=4, seed=0), make_probe(task, shape.value, n=4, seed=0)
    assert by_shape.shape is by_text.shape is shape
    assert (by_text.repeated is not None) == (shape is Shape.DECODER_ONLY) == (by_shape.repeated is not None)
    assert len(by_text.inputs) == len(by_shape.inputs) == (2 if shape is Shape.ENCODER_DECODER else 1)
    for a, b in zip(by_shape.inputs, by_text.inputs, strict=True):
        assert torch.equal(a, b)
