"""A transcoder set's metrics on held-out windows: per layer and with every MLP replaced at once
(explained variance, L0, dead fraction, CE loss recovered; ``tfx-lab transcoder eval``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tui_lab.core.checks import at_least
from tui_lab.core.verbs.verb import JSON, Cancelled, Progress, never, no_progress

if TYPE_CHECKING:
    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.sae.transcoder_metrics import TranscoderMetrics

KEYS = ("explained_variance", "l0", "dead_fraction", "ce_loss_recovered")  # the whole replacement's


@dataclass(frozen=True)
class Request:
    """The set's folder (either format), the text (None: the model's own text or task), the tokens."""

    transcoders: str
    text: str | None = None
    tokens: int = 8_192
    seed: int = 0
    device: str = "cpu"
    model_name: str | None = None  # named in refusals

    def __post_init__(self) -> None:
        at_least("--tokens", self.tokens, 1)


@dataclass
class Result:
    """The set's folder, its hooks and ``evaluate_transcoders``'s numbers."""

    transcoders: str
    feature_input_hook: str
    feature_output_hook: str
    metrics: TranscoderMetrics

    def to_json(self) -> JSON:
        whole = self.metrics.whole.to_json()
        return {"transcoders": self.transcoders, "feature_input_hook": self.feature_input_hook,
                "feature_output_hook": self.feature_output_hook, **{key: whole[key] for key in KEYS},
                **self.metrics.to_json()}


def run(request: Request, model: ModelInHand, progress: Progress = no_progress, cancelled: Cancelled = never) -> Result:
    """Open the set (checked to fit the model) and measure it on held-out windows."""
    from tui_lab.core.sae.transcoder import open_transcoders
    from tui_lab.core.sae.transcoder_data import windows_of
    from tui_lab.core.sae.transcoder_metrics import evaluate_transcoders

    tset = open_transcoders(request.transcoders, model).to(request.device)
    held = windows_of(model, request.text, request.tokens, request.seed, request.model_name or "the model",
                      held_out=True)
    metrics = evaluate_transcoders(model, tset, held)
    progress(1, 1, "evaluated")
    return Result(request.transcoders, tset.feature_input_hook, tset.feature_output_hook, metrics)
