"""Training accuracy and weight norm from metrics.jsonl: as events, and as curves for overlays."""

from __future__ import annotations

import json

from tui_lab.core.runs.curves import first_step_at, read_curves
from tui_lab.core.runs.events import event_from_record


def write(run, records):
    run.mkdir(parents=True, exist_ok=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def step(n, acc=None, norm=None, elapsed=None):
    rec = {"kind": "step", "step": n, "loss": 1.0 / n, "elapsed": elapsed if elapsed is not None else n / 10}
    if acc is not None:
        rec["train_accuracy"] = acc
    if norm is not None:
        rec["weight_norm"] = norm
    return rec


def test_step_records_carry_training_accuracy_and_weight_norm_and_older_ones_read_as_unknown():
    event = event_from_record(step(3, acc=0.75, norm=12.5))
    assert (event.train_accuracy, event.weight_norm) == (0.75, 12.5)
    old = event_from_record(step(3))
    assert (old.train_accuracy, old.weight_norm) == (None, None)


def test_curves_by_step_and_seconds_and_a_repeated_step_takes_the_later_record(tmp_path):
    run = tmp_path / "run"
    write(run, [step(1, 0.1, 30.0), step(2, 0.5, 29.0), step(3, 1.0, 28.0),
                step(2, 0.6, 27.0, elapsed=5.0), step(3, 1.0, 26.0, elapsed=6.0), step(4)])
    curves = read_curves(run)
    assert curves.train_accuracy.steps == [1, 2, 3] and curves.train_accuracy.values == [0.1, 0.6, 1.0]
    assert curves.weight_norm.values == [30.0, 27.0, 26.0]
    assert curves.train_accuracy.seconds == [0.1, 5.0, 6.0]
    assert curves.curve("weight_norm") is curves.weight_norm
    assert len(curves.train_loss.steps) == 4  # step 4 has a loss, no accuracy


def test_first_step_at_a_threshold(tmp_path):
    run = tmp_path / "run"
    write(run, [step(1, 0.2), step(2, 0.99), step(3, 1.0), step(4, 1.0)])
    acc = read_curves(run).train_accuracy
    assert first_step_at(acc, 1.0) == 3 and first_step_at(acc, 0.99) == 2
    assert first_step_at(acc, 1.5) is None
