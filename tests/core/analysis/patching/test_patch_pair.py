"""Pairs: lengths and answers checked in one line each; the ready-made pairs of the lab's
tasks (induction: the repeat's next token against what the changed first copy predicts; a
decoder-only sequence task: two inputs of one length whose answers start differently)."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import tiny_config
from tui_lab.core.analysis.patching.patch_pair import (
    Metric,
    PatchError,
    PatchPair,
    make_pair,
    ready_pair,
    ready_pairs,
)
from tui_lab.core.model.models import build_model
from tui_lab.core.opening.model_in_hand import ModelInHand
from tui_lab.core.tasks import make_task
from tui_lab.core.tasks.vocab import SEP


def handle(task: str, **model: object) -> ModelInHand:
    config = tiny_config(model={"arch": "decoder-only", "n_encoder_layers": 0, **model},
                         task={"name": task, "min_len": 2, "max_len": 6} if task != "induction" else {"name": task})
    t = make_task(config.task)
    return ModelInHand(config, t, build_model(config.model, len(t.vocab)), 0, torch.device("cpu"), [])


def test_induction_pair() -> None:
    lab = handle("induction", max_len=64)
    pair = ready_pair(lab)
    letters = lab.task.vocab.decode(pair.clean)
    changed = lab.task.vocab.decode(pair.corrupt)
    assert pair.name == "induction" and len(pair.clean) == len(pair.corrupt) == 11
    assert letters[:3] == letters[8:] == changed[8:] and not set(letters[:8]) & set(changed[:8])
    assert lab.task.vocab.label(pair.answer) == letters[3]
    assert lab.task.vocab.label(pair.wrong) == changed[3]


def test_sequence_task_pair() -> None:
    lab = handle("copy")
    assert ready_pairs(lab) == ["copy"]
    pair = ready_pair(lab, "task")
    assert pair.clean[-1] == pair.corrupt[-1] == SEP and len(pair.clean) >= 4
    assert pair.answer == pair.clean[0] and pair.wrong == pair.corrupt[0] and pair.answer != pair.wrong


def test_bad_pairs_are_one_line() -> None:
    lab = handle("copy")
    with pytest.raises(PatchError, match="the clean input is 3 tokens and the corrupted one 4"):
        make_pair(lab, "123", "1234", "1", "2")
    with pytest.raises(PatchError, match="the answer '12' is 2 tokens"):
        make_pair(lab, "123", "124", "12", "2")
    with pytest.raises(PatchError, match="no ready-made pair 'ioi'"):
        ready_pair(lab, "ioi")
    with pytest.raises(PatchError, match="same length"):
        PatchPair([1, 2], [1], 1, 2)


def test_metric_normalises() -> None:
    metric = Metric(clean=3.0, corrupt=-1.0)
    torch.testing.assert_close(metric.normalise(torch.tensor([3.0, -1.0, 1.0])), torch.tensor([1.0, 0.0, 0.5]))
