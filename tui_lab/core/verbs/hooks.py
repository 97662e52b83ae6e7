"""Every hook point of a model with the shape of its activation on one input.

``tfx-lab hooks`` runs ``run``; the input (default: one of the task's examples, else a
plain phrase) is refused past the model's context before the forward pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tui_lab.core.verbs.verb import (
    JSON,
    Cancelled,
    Progress,
    check_text,
    never,
    no_progress,
    stop_if,
)

if TYPE_CHECKING:
    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.tasks.protocol import Task

DEFAULT_TEXT = "Hello world"  # a real model's text has no examples to offer


@dataclass(frozen=True)
class Request:
    """The text to run (None: one of the task's examples)."""

    input: str | None = None


@dataclass
class Result:
    """The text run, its tokens and each hook point's name and activation shape, in order."""

    input: str
    tokens: list[str]
    hooks: list[tuple[str, tuple[int, ...]]]

    def to_json(self) -> JSON:
        return {"input": self.input, "tokens": self.tokens,
                "hooks": [{"name": name, "shape": list(shape)} for name, shape in self.hooks]}


def default_input(task: Task) -> str:
    """One of the task's own examples (what the lab's Decode offers), else a plain phrase."""
    try:
        shown = task.examples_for_display(1)
    except Exception:  # noqa: BLE001 - a real model's text has no examples to offer
        shown = []
    return str(shown[0]) if shown else DEFAULT_TEXT


def run(request: Request, model: ModelInHand, progress: Progress = no_progress, cancelled: Cancelled = never) -> Result:
    """Run the model once on the input with every hook point cached."""
    import torch

    text = request.input if request.input is not None else default_input(model.task)
    check_text(model, text, "the input")
    stop_if(cancelled)
    with torch.no_grad():
        _, cache = model.run_with_cache(text)
    progress(1, 1, "hook points")
    return Result(text, list(model.to_str_tokens(text)),
                  [(name, tuple(t.shape)) for name, t in cache.items()])
