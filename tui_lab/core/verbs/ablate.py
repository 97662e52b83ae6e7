"""Attention heads switched off: a run's exact match on held-out examples, or the loss of a
text (a real model, or a run fine-tuned from one); named heads together, else one row per head.

``tfx-lab ablate`` runs ``run``. ``n`` and ``mode`` are refused in the request; a typed
text past the model's context is refused before any forward pass (a text read from a
file is measured on its first context, as it always was).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tui_lab.core.checks import positive
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
    from torch import nn

    from tui_lab.core.analysis.heads.head_importance import ImportanceTable
    from tui_lab.core.analysis.heads.text_ablation import TextImportance
    from tui_lab.core.config.lab_config import LabConfig
    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.tasks.protocol import Task


@dataclass(frozen=True)
class Request:
    """The heads to switch off (none: each alone, one row per head), ``zero`` or ``mean``,
    held-out examples ``n``; ``text`` (``typed`` when the user typed it) for a text's loss;
    ``run_dir`` and ``at_step`` key the per-head table kept in the run's folder."""

    heads: tuple[str, ...] = ()
    mode: str = "zero"
    n: int = 500
    text: str | None = None
    typed: bool = True
    run_dir: str | None = None
    at_step: int | None = None

    def __post_init__(self) -> None:
        positive("--n", self.n)
        from tui_lab.core.analysis.heads.ablation import check_mode

        check_mode(self.mode)


@dataclass
class HeadsOff:
    """The named heads off together: the baseline and the score with them off (exact match,
    or a text's loss over ``n`` predicted tokens)."""

    heads: list[str]
    mode: str
    n: int
    baseline: float
    score: float
    text: bool
    step: int

    def to_json(self) -> JSON:
        if self.text:
            return {"heads": self.heads, "mode": self.mode, "n_tokens": self.n, "baseline": self.baseline,
                    "loss": self.score, "rise": self.score - self.baseline}
        return {"heads": self.heads, "mode": self.mode, "n": self.n, "baseline": self.baseline,
                "exact_match": self.score, "drop": self.baseline - self.score, "step": self.step}


@dataclass
class PerHead:
    """Each head off alone: the core's ``ImportanceTable`` (exact match; ``cached`` when read
    from the run's folder) or ``TextImportance`` (a text's loss)."""

    table: ImportanceTable | TextImportance
    text: bool
    step: int
    cached: bool = False

    def to_json(self) -> JSON:
        if self.text:
            return dict(self.table.to_json())
        return {**self.table.to_json(), "step": self.step, "cached": self.cached}


Result = HeadsOff | PerHead


def scores_a_text(model: ModelInHand) -> bool:
    """Whether ``model`` is scored on a text's loss (a model from files, a run fine-tuned from one)."""
    return model.card is not None or model.config.task.name == "token-lm"


def run(request: Request, model: ModelInHand, progress: Progress = no_progress, cancelled: Cancelled = never) -> Result:
    """Switch the heads off on the model in hand (in place, undone after: hooks only)."""
    if scores_a_text(model):
        return _on_text(request, model, progress, cancelled)
    if request.text is not None:
        raise LabError("--text and --input go with --model or a fine-tuned run (a run is scored on its task)")
    return _on_task(request, model, progress, cancelled)


def _on_task(request: Request, model: ModelInHand, progress: Progress, cancelled: Cancelled) -> Result:
    from tui_lab.core.analysis.heads.ablation import parse_head
    from tui_lab.core.analysis.heads.head_importance import (
        ablated_accuracy,
        probe_means,
        weights_key,
    )
    from tui_lab.core.tasks.base import TaskBase
    from tui_lab.core.training.evaluate import held_out_pairs

    if model.task.is_lm or not isinstance(model.task, TaskBase):  # a lab task: its held-out pairs
        raise LabError(f"{request.run_dir or model.config.name}: ablate measures exact match; "
                       f"{model.config.task.name} has no single right answer")
    heads = [parse_head(h, model.model) for h in request.heads]  # every name checked before any work
    stop_if(cancelled)
    task = model.task
    pairs = held_out_pairs(task, model.config.train, request.n)
    mode = request.mode
    if heads:
        max_new = model.config.sequence_length_needed()
        means = probe_means(model.model, task, model.config.model.arch, pairs, model.device) \
            if mode == "mean" else None
        baseline = ablated_accuracy(model.model, task, pairs, max_new)
        acc = ablated_accuracy(model.model, task, pairs, max_new, heads, mode, means)
        return HeadsOff([str(h) for h in heads], mode, len(pairs), baseline, acc, False, model.step)
    key = weights_key(request.run_dir, request.at_step) if request.run_dir is not None else None
    table, cached = importance_table(model.model, task, model.config, pairs, mode,
                                     lambda done, total: progress(done, total, "ablating head"),
                                     request.run_dir, key)
    return PerHead(table, False, model.step, cached)


def importance_table(
    model: nn.Module, task: Task, config: LabConfig, pairs: list[tuple[str, str]], mode: str,
    progress: Callable[[int, int], None] | None = None, run_dir: str | Path | None = None,
    key: str | None = None,
) -> tuple[ImportanceTable, bool]:
    """Each head of the module ``model`` off alone on ``pairs``: (the ``ImportanceTable``, whether
    it was read from ``run_dir``'s cache under weights ``key``; None: measured, not kept).
    ``tfx-lab ablate`` and the Attention pane's importance table both measure here."""
    from tui_lab.core.analysis.heads.head_importance import (
        cached_importance,
        importance,
        probe_means,
    )

    def compute() -> ImportanceTable:
        device = next(model.parameters()).device
        means = probe_means(model, task, config.model.arch, pairs, device) if mode == "mean" else None
        return importance(model, task, pairs, config.sequence_length_needed(), mode, means, progress)

    if run_dir is None:
        return compute(), False
    return cached_importance(run_dir, key, compute, mode=mode, n=len(pairs))


def text_table(model: nn.Module, task: Task, context: int, text: str, mode: str,
               progress: Callable[[int, int], None] | None = None) -> TextImportance:
    """Each head of the module ``model`` off alone: the ``TextImportance`` of ``text`` (its first
    ``context`` tokens). ``tfx-lab ablate --model`` and the Attention pane both measure here."""
    from tui_lab.core.analysis.heads.text_ablation import text_ids, text_importance

    return text_importance(model, text_ids(task, text, context), mode, progress)


def _on_text(request: Request, model: ModelInHand, progress: Progress, cancelled: Cancelled) -> Result:
    from tui_lab.core.analysis.heads.ablation import parse_head
    from tui_lab.core.analysis.heads.text_ablation import (
        loss_with_heads_off,
        text_ids,
        text_importance,
        text_means,
    )

    if request.text is None:
        if model.card is not None:
            raise LabError("ablate --model measures the loss of a text: give --text FILE or --input TEXT")
        ids = run_text_ids(model)
    else:
        if request.typed:
            check_text(model, request.text, "the input")
        ids = text_ids(model.task, request.text, model.config.model.max_len)
    heads = [parse_head(h, model.model) for h in request.heads]
    stop_if(cancelled)
    if heads:
        means = text_means(model.model, ids) if request.mode == "mean" else None
        baseline = loss_with_heads_off(model.model, ids, [])
        loss = loss_with_heads_off(model.model, ids, heads, request.mode, means)
        return HeadsOff([str(h) for h in heads], request.mode, len(ids) - 1, baseline, loss, True, model.step)
    table = text_importance(model.model, ids, request.mode,
                            lambda done, total: progress(done, total, "ablating head"))
    return PerHead(table, True, model.step)


def run_text_ids(model: ModelInHand) -> list[int]:
    """A fine-tuned run's default text: the start of its validation split, one context long."""
    from tui_lab.core.tasks.token_lm import TokenLMTask

    task = model.task
    if not isinstance(task, TokenLMTask):  # only a fine-tuned run keeps a text of its own
        raise LabError(f"{model.config.name}: no text of its own to measure; give --text FILE or --input TEXT")
    return [int(i) for i in task.data[task.split : task.split + model.config.model.max_len].tolist()]
