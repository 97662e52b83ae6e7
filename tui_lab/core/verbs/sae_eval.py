"""An SAE's metrics at its hook on held-out text: L0, MSE, explained variance, FVU, dead
features and CE loss recovered (``tfx-lab sae eval``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tui_lab.core.checks import at_least
from tui_lab.core.errors import LabError
from tui_lab.core.verbs.verb import JSON, Cancelled, Progress, never, no_progress

if TYPE_CHECKING:
    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.sae.sae import SparseAutoencoder

KEYS = ("l0", "explained_variance", "fvu", "mse", "dead_fraction", "ce_loss_recovered")


@dataclass(frozen=True)
class Request:
    """The SAE (a folder, or ORG/REPO/SUBFOLDER in the hub cache), the text, the rows to measure."""

    sae: str
    text: str | None = None  # a text file (its last tenth is held out); None: the model's own
    tokens: int = 50_000
    device: str = "cpu"
    model_name: str | None = None  # named in refusals

    def __post_init__(self) -> None:
        at_least("--tokens", self.tokens, 1)


@dataclass
class Result:
    """The SAE, its hook and ``evaluate_sae``'s numbers (``tokens`` and KEYS)."""

    sae: str
    hook: str
    metrics: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> JSON:
        return {"sae": self.sae, "hook": self.hook, **self.metrics}


def hook_of(sae: SparseAutoencoder) -> str:
    """The hook the SAE's cfg.json names; LabError when it names none."""
    hook = sae.cfg.metadata.hook_name
    if not hook:
        raise LabError("the SAE's cfg.json names no hook_name (metadata.hook_name)")
    return str(hook)


def run(request: Request, model: ModelInHand, progress: Progress = no_progress, cancelled: Cancelled = never) -> Result:
    """Measure the SAE on the held-out windows at its hook."""
    from tui_lab.core.sae.activations import check_width, hook_activations, site_width
    from tui_lab.core.sae.evaluation import evaluate_sae
    from tui_lab.core.sae.recipe import ce_scorer, read_texts, rows_per_pass, text_windows
    from tui_lab.core.sae.source import open_sae

    sae = open_sae(request.sae, device=request.device)
    hook = hook_of(sae)
    held_out = text_windows(model, read_texts(model, request.text, request.model_name or "the model")[1])
    check_width(sae, hook, site_width(model, hook, held_out[:1]))
    acts = hook_activations(model, held_out, hook, rows_per_pass(held_out))
    metrics = evaluate_sae(sae, acts, request.tokens, ce_scorer(model, hook, held_out)(sae))
    progress(1, 1, "evaluated")
    return Result(str(request.sae), hook, dict(metrics))
