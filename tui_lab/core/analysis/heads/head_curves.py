"""Each head's scores across a run's history: the curves the atlas draws over training.

``score_curves(run_dir)`` loads every history snapshot into one model, in
step order, and scores it on the same fixed probe (``head_scores``), so a
jump in a curve is the head changing, not the probe. ``load_for_inference``
builds the model once; each snapshot only replaces its weights.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tui_lab.core.analysis.heads.atlas import HeadScore
from tui_lab.core.analysis.heads.head_scores import atlas_for
from tui_lab.core.opening.from_run import load_for_inference
from tui_lab.core.runs.snapshots import list_snapshots, load_snapshot


@dataclass
class ScoreCurves:
    """``steps`` ascending; ``scores[label][pattern]`` one value per step (``label`` = ``decoder.1.self:2``)."""

    steps: list[int] = field(default_factory=list)
    scores: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    def add(self, step: int, heads: list[HeadScore]) -> None:
        self.steps.append(step)
        for h in heads:
            per = self.scores.setdefault(h.label, {})
            for pattern, value in h.scores.items():
                per.setdefault(pattern, []).append(value)

    def curve(self, label: str, pattern: str) -> list[tuple[int, float]]:
        """(step, score) points of one head's pattern."""
        return list(zip(self.steps, self.scores.get(label, {}).get(pattern, []), strict=False))


def score_curves(
    run_dir: str | Path,
    steps: list[int] | None = None,
    on_step: Callable[[int, list[HeadScore]], None] | None = None,
) -> ScoreCurves:
    """Score every head at each history snapshot (``steps``: a subset; default all).

    ``on_step`` is called after each snapshot, so a UI worker can draw the
    curves as they grow instead of waiting for the whole history.
    """
    run = load_for_inference(run_dir, "cpu")
    wanted = list_snapshots(run_dir) if steps is None else sorted(steps)
    out = ScoreCurves()
    for step in wanted:
        load_snapshot(run_dir, step, run.model)
        heads = atlas_for(run.model, run.task, run.config.model.shape).heads  # an encoder's own patterns too
        out.add(step, heads)
        if on_step is not None:
            on_step(step, heads)
    return out
