"""Score curves over a run's history: one point per snapshot, in step order, each its snapshot's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui_lab.core.analysis.heads.head_curves import score_curves
from tui_lab.core.analysis.heads.head_scores import score_heads
from tui_lab.core.opening.from_run import load_for_inference
from tui_lab.core.runs.snapshots import list_snapshots

LEARNED = Path(__file__).resolve().parents[3] / "data" / "learned-copy"


@pytest.fixture(scope="module")
def curves():  # type: ignore[no-untyped-def]
    seen: list[int] = []
    result = score_curves(LEARNED, on_step=lambda step, heads: seen.append(step))
    return result, seen


def test_one_point_per_snapshot_in_step_order(curves):
    result, seen = curves
    steps = list_snapshots(LEARNED)
    assert len(steps) >= 10 and steps == sorted(steps)
    assert result.steps == steps and seen == steps  # reported as it goes, in order
    labels = set(result.scores)
    assert len(labels) == 10  # 5 attention modules (encoder self; 2 x decoder self and cross), 2 heads each
    for label, per in result.scores.items():
        for pattern, values in per.items():
            assert len(values) == len(steps), (label, pattern)
            assert [s for s, _ in result.curve(label, pattern)] == steps


@pytest.mark.parametrize("which", [0, -1])
def test_each_point_is_the_score_of_that_steps_own_weights(curves, which):
    result, _ = curves
    step = result.steps[which]
    alone = load_for_inference(LEARNED, at_step=step)  # built and loaded on its own
    for head in score_heads(alone.model, alone.task, alone.config.model.arch):
        for pattern, value in head.scores.items():
            assert result.scores[head.label][pattern][which] == pytest.approx(value, abs=1e-5)


def test_the_curves_move_over_training(curves):
    """Snapshots really differ: the copying heads' alignment grows from the first step to the last."""
    result, _ = curves
    gains = [per["alignment"][-1] - per["alignment"][0] for per in result.scores.values()
             if "alignment" in per]
    assert gains and max(gains) > 0.2, gains


def test_a_subset_of_steps_is_scored_in_ascending_order():
    steps = list_snapshots(LEARNED)
    result = score_curves(LEARNED, steps=[steps[-1], steps[0]])
    assert result.steps == [steps[0], steps[-1]]
