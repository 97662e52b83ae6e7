"""ROME's causal tracing: the answer's probability with the subject's embeddings noised and
each (token, layer) state restored in turn, as a fraction of the clean probability.

``tfx-lab trace`` runs it here; the input is refused past the model's context and the
noise and sample counts out of range, before any model work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tui_lab.core.checks import in_range, positive
from tui_lab.core.errors import LabError
from tui_lab.core.verbs.verb import JSON, Cancelled, Progress, check_text, never, no_progress

if TYPE_CHECKING:
    from tui_lab.core.analysis.patching.causal_tracing import TraceResult
    from tui_lab.core.opening.in_hand import ModelInHand

MAX_SAMPLES = 10_000  # noise samples: each is a forward pass per cell


@dataclass(frozen=True)
class Request:
    """The input, the subject to noise, the answer token, and the noise's scale, samples and seed."""

    input: str
    subject: str
    answer: str
    target: str | None = None  # an encoder-decoder's decoder input after its start token
    noise: float = 3.0  # times the embeddings' standard deviation
    samples: int = 10
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.input:
            raise LabError("empty input: give some text")
        positive("--noise", self.noise)
        in_range("--samples", self.samples, 1, MAX_SAMPLES)


@dataclass
class Result:
    """The input, the subject's token span and the core's ``TraceResult``."""

    input: str
    span: tuple[int, int]
    trace: TraceResult

    def to_json(self) -> JSON:
        return {"input": self.input, **self.trace.to_dict()}


def run(request: Request, model: ModelInHand, progress: Progress = no_progress, cancelled: Cancelled = never) -> Result:
    """Restore each state in turn (cancellable between cells)."""
    import torch

    from tui_lab.core.analysis.patching.activation_patching import Reading
    from tui_lab.core.analysis.patching.causal_tracing import causal_trace, subject_span
    from tui_lab.core.analysis.patching.patch_pair import single_input, single_token

    check_text(model, request.input, "the input")
    check_text(model, request.target or "", "the decoder's input")
    read = single_input(model, request.input, request.target)
    ids = read.clean
    span = subject_span(model, ids, request.subject)
    answer = single_token(model, request.answer)

    def cells(done: int, total: int) -> None:
        progress(done, total, "tracing")

    result = causal_trace(model, torch.tensor([ids], device=model.device), span, answer,
                          reading=Reading(read.position, read.target_ids(1, model.device)),
                          noise=request.noise, samples=request.samples, seed=request.seed,
                          progress=cells, cancelled=cancelled)
    return Result(request.input, span, result)
