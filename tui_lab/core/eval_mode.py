"""``evaluating(model)``: a model in eval mode for a block, then back in the mode it was in.

Decoding, evaluation and every analysis read a model without dropout; a model
the trainer holds must go back to training mode after, whatever happens inside.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn


@contextmanager
def evaluating(model: nn.Module) -> Iterator[nn.Module]:
    """``model`` in eval mode inside the block; its own mode (training or not) restored after."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)
