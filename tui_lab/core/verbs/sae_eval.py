"""An SAE's metrics at its hook on held-out text: L0, MSE, explained variance, FVU, dead
features and CE loss recovered (``tfx-lab sae eval``); with ``saebench``, SAEBench's core
evaluation too, written in its JSON layout (``core/sae/saebench.py``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tui_lab.core.checks import at_least
from tui_lab.core.errors import LabError
from tui_lab.core.verbs.verb import JSON, Cancelled, Progress, never, no_progress, stop_if

if TYPE_CHECKING:
    from torch import Tensor

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
    saebench: str | None = None  # a JSON file to write SAEBench's core evaluation to
    prompts: int = 16  # SAEBench's batch_size_prompts: windows per batch
    recon_batches: int = 10  # SAEBench's n_eval_reconstruction_batches (CE and KL)
    sparsity_batches: int = 1  # SAEBench's n_eval_sparsity_variance_batches

    def __post_init__(self) -> None:
        at_least("--tokens", self.tokens, 1)
        at_least("--saebench-prompts", self.prompts, 1)
        at_least("--saebench-batches", self.recon_batches, 1)
        at_least("--saebench-sparsity-batches", self.sparsity_batches, 1)
        if self.saebench is not None:
            out = Path(self.saebench)
            if out.is_dir() or not out.name.endswith(".json"):
                raise LabError(f"--saebench {self.saebench}: a file name ending in .json")


@dataclass
class Result:
    """The SAE, its hook and ``evaluate_sae``'s numbers (``tokens`` and KEYS)."""

    sae: str
    hook: str
    metrics: dict[str, object] = field(default_factory=dict)
    saebench: dict[str, object] | None = None  # SAEBench's core output, when asked for
    saebench_file: str | None = None

    def to_json(self) -> JSON:
        out: JSON = {"sae": self.sae, "hook": self.hook, **self.metrics}
        if self.saebench is not None:
            out["saebench"] = {"file": self.saebench_file, **self.saebench["eval_result_metrics"]}  # type: ignore[dict-item]
        return out


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
    progress(1, 2 if request.saebench else 1, "evaluated")
    result = Result(str(request.sae), hook, dict(metrics))
    if request.saebench is not None:
        stop_if(cancelled)
        result.saebench = saebench_core(request, sae, model, held_out, hook)
        result.saebench_file = str(write_json(Path(request.saebench), result.saebench))
        progress(2, 2, "SAEBench core evaluation written")
    return result


def saebench_core(request: Request, sae: SparseAutoencoder, model: ModelInHand, held_out: Tensor,
                  hook: str) -> dict[str, object]:
    """SAEBench's core evaluation of ``sae`` on the held-out windows, in its JSON layout."""
    from tui_lab.core.sae.saebench import CoreEvalConfig
    from tui_lab.core.sae.saebench_output import core_output, run_core

    config = CoreEvalConfig(model_name=request.model_name or "", batch_size_prompts=request.prompts,
                            n_eval_reconstruction_batches=request.recon_batches,
                            n_eval_sparsity_variance_batches=request.sparsity_batches,
                            dataset=request.text or "the model's own held-out text", context_size=held_out.shape[1])
    numbers, features = run_core(sae.eval(), model, held_out, hook, config)
    return core_output(config, numbers, features, sae.cfg.to_dict(), str(request.sae))


def write_json(path: Path, data: dict[str, object]) -> Path:
    """``data`` as indented JSON at ``path``, written whole (a temporary file, then replaced)."""
    from tui_lab.core.sae.folder import write_files

    write_files(path.parent, {path.name: (json.dumps(data, indent=2) + "\n").encode()})
    return path
