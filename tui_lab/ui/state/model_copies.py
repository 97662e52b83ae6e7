"""The model copies the lab's workers make (Textual-free): an opened model waited for until
its weights are laid out, and a copy of a model's modules that shares its tensors."""

from __future__ import annotations

import copy
from typing import Any


def settled(run: Any) -> Any:
    """``run`` once its model is final: an opened model's background layout done (waited
    for if it runs). Before code that copies the model's modules or counts its tensors."""
    settle = getattr(run, "settle", None)
    if settle is not None:
        settle()
    return run


def shared_clone(model: Any) -> Any:
    """A copy of ``model``'s modules that shares its tensors: what a capture or a hook sets
    on a module stays on the copy, and no weight is copied (a real model's are hundreds of MB)."""
    memo: dict[int, Any] = {id(t): t for t in model.parameters()}
    memo.update({id(t): t for t in model.buffers()})
    return copy.deepcopy(model, memo)
