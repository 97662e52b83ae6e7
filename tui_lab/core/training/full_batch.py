"""Full-batch training and the figures measured on each update's batch.

``train.full_batch: true`` makes every update use the task's whole training
set (a task with a finite one: ``Task.training_set()``), built once and kept
on the device, as in the grokking papers; each rank of a distributed run
takes its share of the rows. ``batch_accuracy`` and ``weight_norm`` are the
step's training accuracy and the size of the weights that weight decay
shrinks.
"""

from __future__ import annotations

import torch
from torch import nn

from tui_lab.core.config.error import field_error
from tui_lab.core.config.shape import Shape
from tui_lab.core.model.device import to_device
from tui_lab.core.tasks.base import IGNORE, Batch
from tui_lab.core.tasks.protocol import PairTask


def full_batch(task: PairTask, arch: Shape | str, device: torch.device, rank: int = 0, world: int = 1) -> Batch:
    """The task's whole training set as one batch on ``device`` (this rank's rows of it)."""
    pairs = task.training_set()
    if not pairs:
        raise field_error("train.full_batch", f"task {task.name} has no finite training set")
    mine = pairs[rank::world] if world > 1 else pairs
    batch: Batch = to_device(task.collate(mine, arch), device)
    return batch


@torch.no_grad()
def batch_accuracy(logits: torch.Tensor, targets: torch.Tensor, per_token: bool = False) -> tuple[int, int]:
    """(right, counted): rows whose every scored token is the argmax, or scored tokens (``per_token``)."""
    right = logits.argmax(-1) == targets  # (B, T)
    scored = targets != IGNORE
    if per_token:
        return int(right[scored].sum()), int(scored.sum())
    rows = scored.any(-1)  # a row with nothing scored does not count
    return int(((right | ~scored).all(-1) & rows).sum()), int(rows.sum())


@torch.no_grad()
def weight_norm(model: nn.Module) -> float:
    """The L2 norm of every parameter together (tied weights once)."""
    return float(torch.nn.utils.get_total_norm([p.detach() for p in model.parameters()]))
