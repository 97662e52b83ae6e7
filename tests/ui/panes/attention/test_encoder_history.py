"""An encoder-only run's atlas over its history: each snapshot scored with the encoder's own
patterns (self, previous, next, first, broad), the same as the atlas of that snapshot's weights."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui_lab.core.analysis.heads.head_curves import score_curves
from tui_lab.core.analysis.heads.head_scores import atlas_for
from tui_lab.core.opening.from_run import load_for_inference
from tui_lab.core.runs.snapshots import list_snapshots, load_snapshot


def test_score_curves_of_an_encoder_only_run_use_its_patterns(mlm_run_source: Path) -> None:
    steps = list_snapshots(mlm_run_source)
    assert len(steps) >= 2
    curves = score_curves(mlm_run_source)
    assert curves.steps == steps
    run = load_for_inference(mlm_run_source, "cpu")
    load_snapshot(mlm_run_source, steps[0], run.model)
    first = atlas_for(run.model, run.task, "encoder-only").heads
    for head in first:
        label = f"{head.name}:{head.head}"
        assert label.startswith("encoder.") and {"next", "previous"} <= set(curves.scores[label])
        for pattern, value in head.scores.items():
            assert curves.scores[label][pattern][0] == pytest.approx(value, abs=1e-6)
