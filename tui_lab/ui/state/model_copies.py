"""Copy or share the model: the one place the lab's workers decide it (Textual-free).

A model opened from files never changes here: a worker shares its weights (hundreds
of MB) and, where a capture or a hook sets state on modules, takes modules of its own
around them (``shared_clone``). Any other run's model may change under the worker: a
run in training steps it, and history stepping loads other weights into it, so the
worker takes a whole copy (``ModelInHand.private_copy`` for a model already in hand).
Torch is imported by the callers' workers, never when this module is.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import nn

    from tui_lab.core.opening.model_handle import ModelHandle
    from tui_lab.core.opening.model_in_hand import ModelInHand


def settled(run: ModelHandle) -> ModelHandle:
    """``run`` once its model is final: an opened model's background layout done (waited
    for if it runs). Before code that copies the model's modules or counts its tensors."""
    from tui_lab.core.opening.model_in_hand import ModelInHand

    if isinstance(run, ModelInHand):  # only a model in hand is ever opened with its layout left for later
        run.settle()
    return run


def shared_clone(model: nn.Module) -> nn.Module:
    """A copy of ``model``'s modules that shares its tensors: what a capture or a hook sets
    on a module stays on the copy, and no weight is copied (a real model's are hundreds of MB)."""
    memo: dict[int, object] = {id(t): t for t in model.parameters()}
    memo.update({id(t): t for t in model.buffers()})
    return copy.deepcopy(model, memo)


def model_to_read(run: ModelHandle, training: bool) -> tuple[nn.Module, bool]:
    """(the model a decode reads, whether it is a copy of its own): a run in training
    copied (the trainer steps its weights meanwhile), any other the model itself."""
    return (copy.deepcopy(run.model), True) if training else (run.model, False)


def in_hand(run: ModelHandle) -> ModelInHand:
    """``run`` as a model in hand, its model shared as it is: one already in hand unchanged,
    a run in training seen through its hook points (for reading its hook names)."""
    from tui_lab.core.opening.model_in_hand import ModelInHand

    if isinstance(run, ModelInHand):
        return run
    return _wrapped(run, run.model)


def private_in_hand(run: ModelHandle) -> ModelInHand:
    """``run``'s model for a worker that must not share it: a model opened from files as
    modules of its own around its shared weights (they never change here); any other
    run's model copied whole (it may be training, or history stepping loads other
    weights into it)."""
    from tui_lab.core.opening.model_handle import opened_from_files
    from tui_lab.core.opening.model_in_hand import ModelInHand

    if opened_from_files(run):
        return _wrapped(run, shared_clone(settled(run).model))
    if isinstance(run, ModelInHand):
        return run.private_copy()
    return _wrapped(run, copy.deepcopy(run.model))


def _wrapped(run: ModelHandle, model: nn.Module) -> ModelInHand:
    from tui_lab.core.opening.model_in_hand import ModelInHand

    device = next(model.parameters()).device
    return ModelInHand(run.config, run.task, model, run.step, device, [], run.card)
