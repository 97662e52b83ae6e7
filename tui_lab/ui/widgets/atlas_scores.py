"""Which of the core's atlas scorings a model gets: its task's probe, or the standard one.

A lab run's model is scored on its own task's probe (``score_heads``). A real
model opened from files (task ``token-lm``) has no task to probe: it is scored
on the standard probe alone (``score_atlas_on_repeats``: random tokens of its
own vocabulary repeated once, as TransformerLens's ``detect_head`` does).
Called in the atlas's worker thread.
"""

from __future__ import annotations

import copy
from typing import Any


def shared_clone(model: Any) -> Any:
    """A copy of ``model``'s modules that shares its tensors: what a capture or a hook sets
    on a module stays on the copy, and no weight is copied (a real model's are hundreds of MB)."""
    memo: dict[int, Any] = {id(t): t for t in model.parameters()}
    memo.update({id(t): t for t in model.buffers()})
    return copy.deepcopy(model, memo)


def special_ids(task: Any) -> list[int]:
    """The tokenizer's special ids (end/start of text, padding), left out of the probe."""
    tokenizer = task.tokenizer
    found = (getattr(tokenizer, name, None) for name in ("eos_id", "bos_id", "pad_id"))
    return sorted({int(i) for i in found if i is not None})


def atlas_heads(model: Any, task: Any, arch: str) -> list[Any]:
    """Every head's ``HeadScore``, best first, on the probe that fits ``model``'s kind."""
    if getattr(task, "name", None) == "token-lm":
        from tui_lab.core.analysis.head_scores import score_atlas_on_repeats

        clone = shared_clone(model)
        return score_atlas_on_repeats(clone, len(task.vocab), special_ids(task)).heads
    from tui_lab.core.analysis.head_scores import score_heads

    return score_heads(copy.deepcopy(model), task, arch)
