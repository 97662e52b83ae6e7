"""Steering: a vector from two prompt sets (their mean activations at a hook, one less the
other), added with a coefficient while the model continues an input.

``tfx-lab steer`` runs ``run`` (the vector, then the plain and the steered continuations);
the Decode pane's steering dialog asks for a ``Steering`` and its worker builds the
vector with ``vector``. The coefficient is refused when NaN or infinite, and every
prompt past the model's context, before any model work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tui_lab.core.checks import at_least, finite
from tui_lab.core.errors import LabError
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
    from torch import Tensor

    from tui_lab.core.analysis.patching.steering import SteerResult
    from tui_lab.core.opening.in_hand import ModelInHand


@dataclass(frozen=True)
class Steering:
    """The hook, the two prompt sets (the vector: mean(positive) - mean(negative)), the coefficient."""

    hook: str
    positive: tuple[str, ...]
    negative: tuple[str, ...]
    coef: float

    def __post_init__(self) -> None:
        finite("--coef", self.coef)
        if not self.positive or not self.negative:
            raise LabError("give at least one positive and one negative prompt")


@dataclass(frozen=True)
class Request:
    """An input to continue, steered, and the number of tokens to generate."""

    input: str
    steering: Steering
    max_new: int = 20

    def __post_init__(self) -> None:
        at_least("--max-new", self.max_new, 1)


@dataclass
class Result:
    """The core's ``SteerResult``: the plain and the steered continuations."""

    steered: SteerResult

    def to_json(self) -> JSON:
        return dict(self.steered.to_dict())


def vector(steering: Steering, model: ModelInHand, cancelled: Cancelled = never) -> Tensor:
    """The steering vector at the hook (a tensor); the hook checked, then every prompt refused
    past the context, before the prompts are run."""
    from tui_lab.core.analysis.patching.steering import _check_hook, steering_vector

    _check_hook(model, steering.hook)  # a wrong hook is the first thing to say
    for what, prompts in (("a positive prompt", steering.positive), ("a negative prompt", steering.negative)):
        for prompt in prompts:
            check_text(model, prompt, what)
    stop_if(cancelled)
    return steering_vector(model, steering.hook, list(steering.positive), list(steering.negative))


def run(request: Request, model: ModelInHand, progress: Progress = no_progress, cancelled: Cancelled = never) -> Result:
    """Build the vector, then decode plainly and steered."""
    from tui_lab.core.analysis.patching.steering import steer

    check_text(model, request.input, "the input")
    s = request.steering
    built = vector(s, model, cancelled)
    progress(1, 2, "the vector")
    stop_if(cancelled)
    result = steer(model, request.input, s.hook, built, s.coef, max_new_tokens=request.max_new)
    progress(2, 2, "decoding")
    return Result(result)
