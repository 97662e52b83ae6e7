"""Evaluation of a model on its task: validation loss and exact match of greedy answers.

One function for a training run's periodic evaluation and for ``tfx-lab eval``
on a saved run, so both measure the same thing on the same held-out examples.
"""

from __future__ import annotations

import math
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from tui_lab.core.config.lab_config import LabConfig, TrainConfig
from tui_lab.core.decoding.decode import batch_greedy
from tui_lab.core.eval_mode import evaluating
from tui_lab.core.model.device import autocast_context, to_device
from tui_lab.core.runs.events import EvalEvent
from tui_lab.core.tasks.base import Batch
from tui_lab.core.tasks.protocol import PairTask, TrainingTask, ValidationBatches

HELD_OUT_SEED_OFFSET = 1_000_003  # held-out examples never share the training seed
EVAL_CHUNK = 256  # held-out examples per loss batch
LM_VAL_BATCHES = 20  # validation batches of a character language model


def held_out_pairs(task: TrainingTask, train: TrainConfig, n: int) -> list[tuple[str, str]]:
    """The run's ``n`` held-out (input, answer) pairs: the same for a seed wherever drawn."""
    return task.held_out(n, train.seed + HELD_OUT_SEED_OFFSET)


def _scored_batch(
    model: nn.Module, batch: Batch, config: LabConfig, device: torch.device
) -> tuple[float, int, int, int]:
    """(mean cross-entropy, right argmax predictions, scored tokens, rows all right) on ``batch``.

    One forward pass gives the loss, the next-token accuracy and the rows whose
    every scored token is right; padding and unscored positions (-100) are
    ignored, and there is no label smoothing.
    """
    batch = to_device(batch, device)
    with autocast_context(device, config.train.precision):
        if batch.src is None:  # decoder-only or encoder-only: one sequence
            logits = model(batch.tgt_in)  # (B, T, V)
        else:
            logits = model(batch.src, batch.tgt_in)  # (B, T, V)
    targets = batch.tgt_out
    # (B, T, V) -> (B*T, V) against (B*T,) targets
    loss = float(F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100))
    scored = targets != -100
    hits = logits.argmax(-1) == targets  # (B, T) predictions
    rows = int((hits | ~scored).all(-1).sum())
    return loss, int(hits[scored].sum()), int(scored.sum()), rows


@torch.no_grad()
def evaluate(
    model: nn.Module,
    task: TrainingTask,
    config: LabConfig,
    device: torch.device,
    *,
    step: int,
    pairs: list[tuple[str, str]] | None = None,
    seen_inputs: set[str] | None = None,
) -> EvalEvent:
    """Validation loss and (for algorithmic tasks) exact match on held-out ``pairs``.

    ``pairs`` defaults to the run's ``train.eval_examples`` held-out examples.
    ``seen_inputs``, the inputs training has drawn so far, gives the event's
    ``overlap`` (how many held-out inputs training also saw); None without it.
    A character language model has no single right answer: exact match is None;
    the loss, bits per character (loss / ln 2) and next-character accuracy come
    from the validation text.
    """
    train = config.train
    with evaluating(model):
        if task.is_lm:
            batches = cast("ValidationBatches", task).val_batches(train.batch_size, LM_VAL_BATCHES)
            results = [_scored_batch(model, b, config, device) for b in batches]
            val_loss = sum(r[0] for r in results) / max(1, len(results))
            # induction: the share of scored tokens predicted right stands in for exact match;
            # char-lm: the same share is its next-character accuracy, beside bits per character.
            scores = task.scores_tokens
            accuracy = sum(r[1] for r in results) / max(1, sum(r[2] for r in results))
            return EvalEvent(
                step, val_loss, accuracy if scores else None, len(results) * train.batch_size, None,
                bits_per_char=val_loss / math.log(2), next_char_accuracy=None if scores else accuracy,
            )
        pair_task = cast("PairTask", task)  # not a language model: a task of pairs
        if pairs is None:
            pairs = held_out_pairs(task, train, train.eval_examples)
        total, rows_right = 0.0, 0
        for i in range(0, len(pairs), EVAL_CHUNK):
            chunk = pairs[i : i + EVAL_CHUNK]
            loss, _, _, rows = _scored_batch(model, pair_task.collate(chunk, config.model.arch), config, device)
            total, rows_right = total + loss * len(chunk), rows_right + rows
        if pair_task.exact_from_forward:
            # A fixed one-token answer without EOS: the teacher-forced argmax is the greedy answer.
            correct = rows_right
        else:
            max_new = config.sequence_length_needed()
            outs = batch_greedy(model, task, [p[0] for p in pairs], max_new_tokens=max_new)
            correct = sum(o == p[1] for o, p in zip(outs, pairs, strict=False))
        overlap = sum(p[0] in seen_inputs for p in pairs) if seen_inputs else None
        return EvalEvent(step, total / len(pairs), correct / len(pairs), len(pairs), overlap)
