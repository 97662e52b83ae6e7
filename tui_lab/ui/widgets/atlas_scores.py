"""The atlas's scores of the model on show, worked out on a private copy of it (in a thread).

Which probe a model gets is the core's choice (``head_scores.atlas_for``): a lab
run's own task, the standard repeat probe for a real model's text (random tokens
of its vocabulary repeated once, as TransformerLens's ``detect_head`` does), a
translator's own translations, an encoder's masked windows or example sentences. What this module decides is the copy: a lab run's
model may be training, so it is copied whole; a real model's weights are hundreds
of megabytes and never change here, so its copy shares them.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from tui_lab.ui.state.model_copies import shared_clone

if TYPE_CHECKING:
    from torch import nn

    from tui_lab.core.analysis.heads.atlas import HeadScore
    from tui_lab.core.tasks.protocol import Task


def atlas_heads(model: nn.Module, task: Task, arch: str) -> list[HeadScore]:
    """Every head's ``HeadScore``, best first, on the probe the core picks for ``task``."""
    from tui_lab.core.analysis.heads import head_scores
    from tui_lab.core.analysis.heads.head_probes import Tokenized
    from tui_lab.core.config.shape import Shape

    lab_run = not isinstance(task, Tokenized)  # a real model's task reads through a tokenizer
    if lab_run and Shape(arch) is not Shape.ENCODER_ONLY:  # a lab run's task: its own probe
        return head_scores.score_heads(copy.deepcopy(model), task, arch)
    # A real model, or an encoder (the core scores its bidirectional patterns: atlas_for).
    clone = copy.deepcopy(model) if lab_run else shared_clone(model)
    return head_scores.atlas_for(clone, task, arch).heads
