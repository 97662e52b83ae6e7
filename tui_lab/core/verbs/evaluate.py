"""Exact match and validation loss of a run's model on held-out examples.

``tfx-lab eval`` runs ``run``; ``--n`` is refused when not a positive whole number
before the model is opened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tui_lab.core.checks import positive
from tui_lab.core.verbs.verb import (
    JSON,
    Cancelled,
    Progress,
    never,
    no_progress,
    stop_if,
    training_task,
)

if TYPE_CHECKING:
    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.runs.events import EvalEvent


@dataclass(frozen=True)
class Request:
    """How many held-out examples to measure on; ``run_dir``: the run folder whose own last
    evaluation says whether its held-out set overlapped its training examples."""

    n: int = 500
    run_dir: str | None = None

    def __post_init__(self) -> None:
        positive("--n", self.n)


@dataclass
class Result:
    """The core's ``Evaluation`` with the step, preset, task and the training overlap."""

    evaluation: EvalEvent
    step: int
    preset: str
    task: str
    seen: object = None

    def to_json(self) -> JSON:
        ev = self.evaluation
        return {
            "exact_match": ev.exact_match,
            "bits_per_char": ev.bits_per_char,
            "next_char_accuracy": ev.next_char_accuracy,
            "val_loss": ev.val_loss,
            "n": ev.n,
            "step": self.step,
            "preset": self.preset,
            "task": self.task,
            # From the run's own last evaluation (its held-out set vs the examples it trained on).
            "held_out_seen_in_training": self.seen,
        }


def run(request: Request, model: ModelInHand, progress: Progress = no_progress, cancelled: Cancelled = never) -> Result:
    """Evaluate the model in hand on ``request.n`` held-out examples (a language model: its
    validation text)."""
    from tui_lab.core.runs.log import read_metrics
    from tui_lab.core.training.evaluate import evaluate, held_out_pairs

    task = training_task(model)
    pairs = None if task.is_lm else held_out_pairs(task, model.config.train, request.n)
    stop_if(cancelled)
    ev = evaluate(model.model, task, model.config, model.device, step=model.step, pairs=pairs)
    progress(1, 1, "evaluation")
    seen = ([m.get("overlap") for m in read_metrics(request.run_dir) if m.get("kind") == "eval"]
            if request.run_dir is not None else [])
    return Result(ev, model.step, model.config.name, model.config.task.name, seen[-1] if seen else None)
