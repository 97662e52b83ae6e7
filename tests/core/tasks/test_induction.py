"""The induction task's batches and attention-only (d_ff 0) models."""

from __future__ import annotations

import random

import pytest
import torch

from tui_lab.core.config.lab_config import ConfigError, ModelConfig, TaskConfig
from tui_lab.core.config.presets import load_preset
from tui_lab.core.model.models import build_model
from tui_lab.core.model.params import parameter_report
from tui_lab.core.tasks import IGNORE, InductionTask, make_task


def test_loss_only_on_the_repeat_after_its_first_token():
    task = make_task(TaskConfig(name="induction", min_len=3, max_len=8, block_size=20))
    assert isinstance(task, InductionTask)
    seqs, lengths = task.sequences(random.Random(0), 64)
    assert len(set(lengths.tolist())) > 3  # the repeat's length varies
    batch = task._batch_of(seqs, lengths)
    for b in range(64):
        n = int(lengths[b])
        scored = (batch.tgt_out[b] != IGNORE).nonzero().flatten().tolist()
        assert scored == list(range(n, 2 * n - 1))  # predicts seq[n+1 .. 2n-1]
        for j in scored:  # each is the token n positions back: what an induction head copies
            assert int(batch.tgt_out[b, j]) == int(batch.tgt_in[b, j + 1 - n])
    assert batch.n_tokens == int((lengths - 1).sum())


def test_validation_batches_are_fixed():
    task = make_task(TaskConfig(name="induction", min_len=3, max_len=8, block_size=20))
    a, b = task.val_batches(4, 2), task.val_batches(4, 2)
    assert all(torch.equal(x.tgt_in, y.tgt_in) for x, y in zip(a, b, strict=True))


def test_induction_config_checks():
    with pytest.raises(ConfigError, match="block_size"):
        TaskConfig(name="induction", max_len=30, block_size=40)
    with pytest.raises(ConfigError, match="decoder-only"):
        load_preset("induction").with_values({"model.arch": "encoder-decoder", "model.n_encoder_layers": 1})


def test_attention_only_model_has_no_feed_forward():
    cfg = load_preset("induction")
    assert cfg.model.d_ff == 0 and cfg.model.n_decoder_layers == 2
    model = build_model(cfg.model, 37)
    assert not any(".ff." in name for name, _ in model.named_parameters())
    assert model(torch.randint(5, 37, (2, 40))).shape == (2, 40, 37)
    report = parameter_report(cfg.model, 37)
    assert report.total == sum(p.numel() for p in model.parameters())
    assert cfg.model.estimated_params(37) >= report.total
    ed = build_model(ModelConfig(d_ff=0, norm="post"), 16)  # encoder-decoder, post-LN too
    assert ed(torch.randint(5, 16, (2, 6)), torch.randint(5, 16, (2, 4))).shape == (2, 4, 16)
    with pytest.raises(ConfigError, match="d_ff"):
        ModelConfig(d_ff=-1)
