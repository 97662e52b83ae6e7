"""train.full_batch: every update on the whole training set; training accuracy and weight norm."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from tui_lab.core.config.lab_config import from_dict
from tui_lab.core.tasks.vocab import N_SPECIALS, SEP
from tui_lab.core.training.train import TrainingRun

P = 11


def modular_config(**train):
    return from_dict({
        "model": {"arch": "decoder-only", "n_encoder_layers": 0, "n_decoder_layers": 1, "d_model": 16,
                  "n_heads": 2, "d_ff": 32, "positional": "learned", "max_len": 4, "tie_embeddings": False},
        "task": {"name": "modular-addition", "p": P, "train_fraction": 0.5},
        "train": {"full_batch": True, "steps": 4, "batch_size": 3, "clip": 0, "eval_every": 2,
                  "eval_examples": 1000, "device": "cpu", "threads": 1, "warmup_steps": 0, **train},
    })


def by_hand(task):
    """The training set's ids and targets built from the arithmetic, not from the task's batches."""
    pairs = [tuple(int(x) for x in i.split()) for i, _ in task.training_set()]
    ids = torch.tensor([[a + N_SPECIALS, b + N_SPECIALS, SEP] for a, b in pairs])  # (N, 3)
    targets = torch.tensor([(a + b) % P + N_SPECIALS for a, b in pairs])  # (N,)
    return ids, targets


@pytest.fixture(scope="module")
def run():
    return TrainingRun(modular_config(), None)


def test_full_batch_gives_the_gradient_of_the_whole_training_set(run):
    reference = copy.deepcopy(run.model)
    ids, targets = by_hand(run.task)
    F.cross_entropy(reference(ids)[:, -1], targets).backward()  # mean over every training pair
    run.optimizer.step = lambda: None  # keep the weights: compare the gradients alone
    run._train_step()
    for (name, p), q in zip(run.model.named_parameters(), reference.parameters(), strict=True):
        assert torch.allclose(p.grad, q.grad, atol=1e-6, rtol=1e-4), name
    assert len(ids) != run.config.train.batch_size  # batch_size plays no part


def test_step_reports_training_accuracy_and_weight_norm():
    run = TrainingRun(modular_config(), None)
    ids, targets = by_hand(run.task)
    with torch.no_grad():
        right = (run.model(ids)[:, -1].argmax(-1) == targets).sum().item() / len(targets)
    events = []
    run.on_event = events.append
    run.config = run.config.with_values({"train.steps": 1})
    run.run()
    step = next(e for e in events if type(e).__name__ == "StepEvent")
    assert step.train_accuracy == pytest.approx(right, abs=1e-9)  # the batch before the update
    by_sum = math.sqrt(sum(float((p.detach().double() ** 2).sum()) for p in run.model.parameters()))
    assert step.weight_norm == pytest.approx(by_sum, rel=1e-5)  # after the update


def test_held_out_exact_match_is_the_answer_at_equals_on_every_held_out_pair(run):
    held = run.task.held_out(10_000, seed=0)
    ev = run.evaluate(record=False)
    assert ev.n == len(held) == P * P - len(run.task.training_set())
    ids = torch.tensor([[int(x) + N_SPECIALS for x in i.split()] + [SEP] for i, _ in held])
    targets = torch.tensor([int(a) + N_SPECIALS for _, a in held])
    run.model.eval()
    with torch.no_grad():
        right = (run.model(ids)[:, -1].argmax(-1) == targets).sum().item() / len(targets)
    assert ev.exact_match == pytest.approx(right, abs=1e-9)


def test_the_first_step_at_full_training_accuracy_is_kept_in_the_history(tmp_path):
    run = TrainingRun(modular_config(steps=3, eval_every=100, history=True), tmp_path / "run")
    seen = []
    run._note_solved = lambda acc, keep=run._note_solved: (seen.append(run.step), keep(1.0 if run.step == 3 else 0.5))
    run.run()
    from tui_lab.core.runs.snapshots import list_snapshots

    assert 3 in list_snapshots(tmp_path / "run")
    assert "training accuracy reached 100% at step 3" in (tmp_path / "run" / "log.txt").read_text()


def test_a_resumed_run_keeps_its_first_step_at_full_training_accuracy(tmp_path, monkeypatch):
    from tui_lab.core.training import train as train_module
    from tui_lab.core.training.train import open_run

    monkeypatch.setattr(train_module, "batch_accuracy", lambda logits, targets, per_token=False: (3, 3))
    TrainingRun(modular_config(steps=2, eval_every=100), tmp_path / "run").run()
    open_run(tmp_path / "run", {"train.steps": 4}).run()
    log = (tmp_path / "run" / "log.txt").read_text()
    assert log.count("training accuracy reached 100%") == 1 and "at step 1" in log
