"""char-lm evaluation: bits per character is the validation loss over ln 2; next-char accuracy by hand."""

from __future__ import annotations

import math

import pytest
import torch

from tests.conftest import tiny_config
from tui_lab.core.model.models import build_model
from tui_lab.core.runs.events import EvalEvent, event_from_record
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.vocab import PAD
from tui_lab.core.training.evaluate import LM_VAL_BATCHES, evaluate


def test_bits_per_char_and_next_char_accuracy():
    cfg = tiny_config(model={"arch": "decoder-only", "max_len": 64},
                      task={"name": "char-lm", "block_size": 32}, train={"batch_size": 4})
    torch.manual_seed(0)
    task = make_task(cfg.task)
    model = build_model(cfg.model, vocab_size=len(task.vocab), pad_id=PAD).eval()
    ev = evaluate(model, task, cfg, torch.device("cpu"), step=3)
    assert ev.exact_match is None
    assert ev.bits_per_char == pytest.approx(ev.val_loss / math.log(2), rel=1e-12)
    right = total = 0
    with torch.no_grad():
        for batch in task.val_batches(cfg.train.batch_size, LM_VAL_BATCHES):
            guess = model(batch.tgt_in).argmax(-1)
            scored = batch.tgt_out != -100
            right += int((guess == batch.tgt_out)[scored].sum())
            total += int(scored.sum())
    assert ev.next_char_accuracy == pytest.approx(right / total)


def test_eval_records_old_and_new_read_back():
    old = {"kind": "eval", "step": 5, "val_loss": 1.0, "exact_match": None, "n": 8, "overlap": None}
    assert event_from_record(old) == EvalEvent(5, 1.0, None, 8, None)
    new = {**old, "bits_per_char": 1.44, "next_char_accuracy": 0.5}
    ev = event_from_record(new)
    assert isinstance(ev, EvalEvent) and ev.bits_per_char == 1.44 and ev.next_char_accuracy == 0.5
    assert event_from_record({**old, "bits_per_char": "x"}) is None  # damaged: skipped, not a crash
