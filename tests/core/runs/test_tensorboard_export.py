"""export_run read back with TensorBoard's own reader: every metric at its step, and the config."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tui_lab.core.runs.run_files import RunError
from tui_lab.core.runs.tensorboard_export import export_run

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import (  # noqa: E402
    EventAccumulator,
)

LEARNED = Path(__file__).resolve().parents[2] / "data" / "learned-copy"


def _metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line]


def _read_back(folder: Path) -> EventAccumulator:
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    return events


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    out = tmp_path_factory.mktemp("tensorboard")
    result = export_run(LEARNED, out)
    return result, _read_back(out / "learned-copy")


def test_every_step_and_evaluation_metric_is_there_at_its_step(exported):
    result, events = exported
    records = _metrics(LEARNED)
    steps = [r for r in records if r["kind"] == "step"]
    evals = [r for r in records if r["kind"] == "eval"]
    assert result.folder.name == "learned-copy" and set(result.tags) == set(events.Tags()["scalars"])
    assert (result.steps, result.evals) == (len(steps), len(evals))
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "train/lr", "train/grad_norm", "val/loss", "val/exact_match"} <= tags
    for tag, key, rows in (("train/loss", "loss", steps), ("train/lr", "lr", steps),
                           ("train/grad_norm", "grad_norm", steps),
                           ("val/loss", "val_loss", evals), ("val/exact_match", "exact_match", evals)):
        points = events.Scalars(tag)
        assert [p.step for p in points] == [r["step"] for r in rows], tag
        assert [p.value for p in points] == pytest.approx([r[key] for r in rows], rel=1e-6), tag
    assert result.points == sum(len(events.Scalars(t)) for t in tags)


def test_the_config_is_written_as_text(exported):
    _, events = exported
    texts = events.Tensors("config/text_summary")
    assert len(texts) == 1
    text = texts[0].tensor_proto.string_val[0].decode()
    assert "learned-copy" in text and "d_model: 32" in text and "n_decoder_layers: 2" in text


def test_exporting_again_replaces_the_events_instead_of_doubling_them(tmp_path):
    export_run(LEARNED, tmp_path)
    again = export_run(LEARNED, tmp_path)
    assert again.replaced >= 1
    events = _read_back(tmp_path / "learned-copy")
    assert len(events.Scalars("val/exact_match")) == again.evals


def test_a_folder_without_metrics_is_one_line(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(LEARNED, run, ignore=shutil.ignore_patterns("history"))
    (run / "metrics.jsonl").unlink()
    with pytest.raises(RunError) as info:
        export_run(run, tmp_path / "out")
    assert "\n" not in str(info.value) and str(run) in str(info.value)
