"""Metrics records read back as events: what a real run writes, and damaged or old lines."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

import pytest

from tests.conftest import tiny_config
from tui_lab.core.runs.events import EvalEvent, StepEvent, event_from_record
from tui_lab.core.runs.log import read_metrics
from tui_lab.core.training.train import TrainingRun


@pytest.fixture(scope="module")
def written_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    """A real (tiny) run's folder and the events it emitted while it trained."""
    config = tiny_config(train={"steps": 8, "eval_every": 4, "eval_examples": 8})
    out = tmp_path_factory.mktemp("events") / "run"
    emitted: list = []
    TrainingRun(config, out, on_event=emitted.append).run()
    return out, emitted


def test_a_real_runs_records_read_back_as_the_events_it_emitted(written_run) -> None:
    out, emitted = written_run
    live = [e for e in emitted if isinstance(e, (StepEvent, EvalEvent))]
    records = read_metrics(out)
    assert [r["step"] for r in records if r["kind"] == "optimizer"] == list(range(1, 9))  # read elsewhere
    read = [event_from_record(r) for r in records if r["kind"] != "optimizer"]
    assert [type(e) for e in read] == [type(e) for e in live]
    assert [e.step for e in read] == [e.step for e in live]
    assert sum(isinstance(e, EvalEvent) for e in read) == 2  # at steps 4 and 8
    # The same figures, compared as written (JSON keeps floats exactly; eta may be None).
    assert [asdict(e) for e in read] == [json.loads(json.dumps(asdict(e))) for e in live]


def test_extra_keys_are_ignored_and_missing_figures_read_as_unknown() -> None:
    event = event_from_record({"kind": "step", "step": 7, "loss": 1.25, "added_later": [1, 2]})
    assert isinstance(event, StepEvent)
    assert (event.step, event.loss, event.total_steps, event.tokens_per_s, event.eta) == (
        7, 1.25, 0, 0.0, None,
    )
    assert math.isnan(event.lr) and math.isnan(event.grad_norm) and math.isnan(event.elapsed)
    old_eval = event_from_record({"kind": "eval", "step": 20, "val_loss": 0.5})  # no n/overlap
    assert old_eval == EvalEvent(step=20, val_loss=0.5, exact_match=None, n=0, overlap=None)
    whole = event_from_record({"kind": "step", "step": 3.0, "loss": 2})  # 3.0 is a step
    assert isinstance(whole, StepEvent) and whole.step == 3 and isinstance(whole.step, int)
    assert whole.loss == 2.0 and isinstance(whole.loss, float)


@pytest.mark.parametrize(
    "record",
    [
        {"kind": "step", "loss": 1.0},  # no step
        {"kind": "step", "step": 3},  # no loss: nothing to draw
        {"kind": "eval", "step": 3},  # no val loss
        {"kind": "step", "step": "3", "loss": 1.0},  # text where a number belongs
        {"kind": "step", "step": 2.5, "loss": 1.0},  # not a whole step
        {"kind": "step", "step": True, "loss": 1.0},
        {"kind": "step", "step": float("inf"), "loss": 1.0},
        {"kind": "eval", "step": 3, "val_loss": 1.0, "exact_match": "high"},
        {"kind": "checkpoint", "step": 3},  # not a metrics event
        {"step": 3, "loss": 1.0},  # no kind
        [1, 2, 3],
        None,
    ],
)
def test_damaged_records_stand_for_no_event(record) -> None:
    assert event_from_record(record) is None


def test_a_damaged_metrics_file_still_reads(written_run, tmp_path: Path) -> None:
    out, _ = written_run
    lines = (out / "metrics.jsonl").read_text().splitlines()
    damaged = [lines[0], '{"kind": "step", "step": 99', '{"kind": "eval"}', "[]", *lines[1:]]
    (tmp_path / "metrics.jsonl").write_text("\n".join(damaged) + "\n")
    events = [e for e in map(event_from_record, read_metrics(tmp_path)) if e is not None]
    assert len(events) == sum(json.loads(line)["kind"] != "optimizer" for line in lines)
