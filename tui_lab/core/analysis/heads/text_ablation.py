"""What each head does for a text: the language-modelling loss with one head switched off.

A real model has no task with a right answer to score exact match on; what
it does is predict the next token of a text. ``text_loss`` is the mean
cross-entropy of those predictions over a text (teacher-forced, one pass);
``text_importance`` switches each head off in turn (``ablation.ablate``: zero,
or its mean output over the same text) and reports how much the loss rises,
largest first. A rise means the head helps predict this text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tui_lab.core.analysis.heads.ablation import HeadRef, ablate, all_heads, head_means
from tui_lab.core.errors import LabError
from tui_lab.core.eval_mode import evaluating
from tui_lab.core.tasks.base import Batch
from tui_lab.core.tasks.protocol import Task

Progress = Callable[[int, int], None]  # (done, total) heads


@dataclass
class LossRow:
    head: str  # "decoder.3.self:7"
    loss: float
    rise: float  # loss - baseline (positive: the head helps predict the text)


@dataclass
class TextImportance:
    mode: str
    n_tokens: int  # predicted tokens the loss averages over
    baseline: float
    rows: list[LossRow] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def text_ids(task: Task, text: str, context: int) -> list[int]:
    """``text``'s token ids, at most ``context`` of them; LabError if it has fewer than two."""
    if task.name == "translation":
        raise LabError(
            "a text's loss is a language model's measure; for a translator, turn heads off in the "
            "Attention pane (a) and watch the translation change"
        )
    ids = list(task.vocab.encode(text))[:context]
    if len(ids) < 2:
        raise LabError("the text is shorter than two tokens: there is nothing to predict")
    return ids


@torch.no_grad()
def text_loss(model: nn.Module, ids: Sequence[int]) -> float:
    """Mean next-token cross-entropy of a decoder-only ``model`` over ``ids`` (nats)."""
    device = next(model.parameters()).device
    tokens = torch.tensor([list(ids)], device=device)  # (1, T)
    with evaluating(model):
        logits = model(tokens[:, :-1])  # (1, T-1, V)
    return float(F.cross_entropy(logits[0].float(), tokens[0, 1:]))


def text_means(model: nn.Module, ids: Sequence[int]) -> dict[str, Tensor]:
    """Each module's mean per-head output over the text (``mode='mean'``)."""
    tokens = torch.tensor([list(ids)])
    batch = Batch(src=None, tgt_in=tokens, tgt_out=tokens, n_tokens=tokens.numel())
    return head_means(model, batch, next(model.parameters()).device, pad_id=None)


def loss_with_heads_off(
    model: nn.Module,
    ids: Sequence[int],
    heads: Sequence[HeadRef],
    mode: str = "zero",
    means: dict[str, Tensor] | None = None,
) -> float:
    """``text_loss`` with ``heads`` switched off (none: the baseline)."""
    with ablate(model, heads, mode, means):
        return text_loss(model, ids)


def text_importance(
    model: nn.Module,
    ids: Sequence[int],
    mode: str = "zero",
    progress: Progress | None = None,
) -> TextImportance:
    """Every head switched off alone: the loss and its rise over the baseline, largest rise first."""
    means = text_means(model, ids) if mode == "mean" else None
    baseline = text_loss(model, ids)
    heads = all_heads(model)
    rows = []
    for i, ref in enumerate(heads):
        loss = loss_with_heads_off(model, ids, [ref], mode, means)
        rows.append(LossRow(str(ref), loss, loss - baseline))
        if progress is not None:
            progress(i + 1, len(heads))
    rows.sort(key=lambda r: -r.rise)
    return TextImportance(mode, len(ids) - 1, baseline, rows)
