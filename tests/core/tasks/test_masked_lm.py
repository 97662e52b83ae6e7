"""The masked-language task: BERT's 15 / 80 / 10 / 10 rule in proportion, the loss read
only at chosen positions, batches and validation, and the config's pairing with encoder-only."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

from tui_lab.core.config.error import ConfigError
from tui_lab.core.config.lab_config import TaskConfig, from_dict
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.base import IGNORE
from tui_lab.core.tasks.masked_lm import MASK_VOCAB, MaskedLMTask, mask_tokens


def test_masking_proportions_over_100k_positions() -> None:
    ids = torch.randint(5, 100, (100_000,))
    mask_id = 200
    inputs, targets = mask_tokens(ids, mask_id, (5, 100), torch.Generator().manual_seed(0))
    chosen = targets != IGNORE
    n = int(chosen.sum())
    assert abs(n / ids.numel() - 0.15) < 0.01
    masked = chosen & (inputs == mask_id)
    changed = chosen & (inputs != mask_id) & (inputs != ids)
    kept = chosen & (inputs == ids)
    # A random replacement equal to the original counts as kept: 1/95 of the random tenth.
    assert abs(int(masked.sum()) / n - 0.80) < 0.01
    assert abs(int(changed.sum()) / n - 0.10 * 94 / 95) < 0.01
    assert abs(int(kept.sum()) / n - (0.10 + 0.10 / 95)) < 0.01
    assert torch.equal(inputs[~chosen], ids[~chosen])  # unchosen positions are untouched
    assert torch.equal(targets[chosen], ids[chosen])


def test_no_loss_on_unchosen_positions() -> None:
    task = MaskedLMTask(TaskConfig(name="masked-lm", block_size=32))
    batch = task.batch(random.Random(0), 64, "encoder-only")
    logits = torch.randn(*batch.tgt_in.shape, len(task.vocab), requires_grad=True)
    F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=IGNORE).backward()
    assert logits.grad is not None
    unchosen = batch.tgt_out == IGNORE
    assert unchosen.any() and (~unchosen).any()
    assert logits.grad[unchosen].abs().max() == 0
    assert logits.grad[~unchosen].abs().sum(-1).min() > 0
    assert batch.n_tokens == int((~unchosen).sum())
    # Scored are the chosen positions: about 15% of 2,048, every masked one among them.
    assert abs(batch.n_tokens / unchosen.numel() - 0.15) < 0.03
    assert (batch.tgt_out[batch.tgt_in == task.mask_id] != IGNORE).all()


def test_batches_vocab_and_validation() -> None:
    task = make_task(TaskConfig(name="masked-lm", block_size=16))
    assert isinstance(task, MaskedLMTask) and task.is_lm and task.scores_tokens
    assert len(task.vocab) == len(MASK_VOCAB) == MASK_VOCAB.mask_id + 1
    assert task.vocab.label(task.mask_id) == "⟨mask⟩"
    batch = task.batch(random.Random(1), 4, "encoder-only")
    assert batch.src is None and batch.tgt_in.shape == (4, 16) and int(batch.tgt_in.max()) <= task.mask_id
    first, again = task.val_batches(4, 2), task.val_batches(4, 2)
    assert all(torch.equal(a.tgt_in, b.tgt_in) and torch.equal(a.tgt_out, b.tgt_out) for a, b in zip(first, again, strict=True))
    with pytest.raises(ValueError, match="encoder-only"):
        task.batch(random.Random(0), 2, "decoder-only")
    assert task.validate_input("a_c") is None and "empty" in (task.validate_input("") or "")
    assert all("_" in e for e in task.examples_for_display(3))


def test_masked_lm_pairs_only_with_encoder_only() -> None:
    with pytest.raises(ConfigError, match="encoder-only"):
        from_dict({"model": {"arch": "decoder-only"}, "task": {"name": "masked-lm"}})
    with pytest.raises(ConfigError, match="masked-lm"):
        from_dict({"model": {"arch": "encoder-only"}, "task": {"name": "copy"}})


def test_collate_typed_masks() -> None:
    task = MaskedLMTask(TaskConfig(name="masked-lm", block_size=16))
    batch = task.collate([("a_c", "b"), ("_x_yz", "wq")])
    assert batch.tgt_in.tolist()[0][:4] == [*task.vocab.encode("a"), task.mask_id, *task.vocab.encode("c"), 0]
    assert batch.tgt_out[1].tolist()[:3] == [task.vocab.encode("w")[0], IGNORE, task.vocab.encode("q")[0]]
    assert batch.n_tokens == 3
