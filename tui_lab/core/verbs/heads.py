"""The head atlas: every attention head scored on its task's probe batch (a real model: the
standard repeat probe over its vocabulary), best first.

``tfx-lab heads`` runs ``run``. The probe is the lab's own, so there is no text or
number to refuse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tui_lab.core.verbs.verb import JSON, Cancelled, Progress, never, no_progress, stop_if

if TYPE_CHECKING:
    from tui_lab.core.analysis.heads.atlas import Atlas
    from tui_lab.core.opening.in_hand import ModelInHand


@dataclass(frozen=True)
class Request:
    """Nothing to choose: every head, on the task's probe."""


@dataclass
class Result:
    """The core's ``Atlas`` with the step and task of the model it scored."""

    atlas: Atlas
    step: int
    task: str

    def to_json(self) -> JSON:
        return {"step": self.step, "task": self.task, **self.atlas.to_dict()}


def run(request: Request, model: ModelInHand, progress: Progress = no_progress, cancelled: Cancelled = never) -> Result:
    """Score every attention head of the model in hand."""
    from tui_lab.core.analysis.heads.head_scores import atlas_for

    stop_if(cancelled)
    atlas = atlas_for(model.model, model.task, model.config.model.arch)
    progress(1, 1, "head atlas")
    return Result(atlas, model.step, model.config.task.name)
