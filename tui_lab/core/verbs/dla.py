"""Direct logit attribution of one input's next token: each head's, MLP's, the embeddings'
and the biases' share of ``logit[answer]`` (less ``logit[wrong]`` when given).

``tfx-lab dla`` runs it here, the Patch pane's DLA bars call ``attribute`` on its pair;
the input is refused past the model's context before any model work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

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
    from tui_lab.core.analysis.lenses.direct_logit_attribution import DlaResult
    from tui_lab.core.analysis.patching.patch_pair import PatchPair
    from tui_lab.core.opening.in_hand import ModelInHand


@dataclass(frozen=True)
class Request:
    """The input, the answer token and (optionally) the wrong one, an encoder-decoder's target."""

    input: str
    answer: str
    wrong: str | None = None
    target: str | None = None

    def __post_init__(self) -> None:
        if not self.input:
            raise LabError("empty input: give some text")


@dataclass
class Result:
    """The core's ``DlaResult`` (components, their total, the model's own logit difference)."""

    attribution: DlaResult

    def to_json(self) -> JSON:
        return dict(self.attribution.to_dict())


def run(request: Request, model: ModelInHand, progress: Progress = no_progress, cancelled: Cancelled = never) -> Result:
    """Each component's direct contribution at the answer's position."""
    from tui_lab.core.analysis.patching.patch_pair import single_input, single_token

    check_text(model, request.input, "the input")
    check_text(model, request.target or "", "the decoder's input")
    read = single_input(model, request.input, request.target)
    answer = single_token(model, request.answer)
    wrong = None if request.wrong is None else single_token(model, request.wrong, "wrong answer")
    stop_if(cancelled)
    result = attribute(model, read, answer, wrong)
    progress(1, 1, "attribution")
    return Result(result)


def attribute(model: ModelInHand, pair: PatchPair, answer: int, wrong: int | None) -> DlaResult:
    """The ``DlaResult`` of ``pair``'s clean input (the Patch pane's pair, or one input read as
    patching reads it) for ``answer`` over ``wrong``."""
    from tui_lab.core.analysis.lenses.direct_logit_attribution import direct_logit_attribution

    ids, _ = pair.ids(model.device)
    return direct_logit_attribution(model, ids, answer, wrong, pair.target_ids(1, model.device))
