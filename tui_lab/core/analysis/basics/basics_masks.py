"""The tutorials' masks picture: padding, causal and both, and what they do to a row of attention.

On a padded batch (``basics_example``), for the typed input's row (when it is
padded; else the row with the most padding):
the padding mask (``attention.padding_mask``: no query may look at a pad), the
causal "subsequent" mask (``attention.causal_mask``: no query may look ahead)
and their combination, each a (query, key) grid, True = may attend. Then one
query row of the model's first causal self-attention, head 0: its weights
over every key as if nothing were masked, and with the combined mask (the
core's ``scaled_dot_product_attention`` both times, the module's own scale):
the masked keys drop to exactly 0 and the others share what they left.

An encoder-only model has no causal attention: its row is its first
self-attention's, masked by padding alone (``combined`` is the padding grid,
``encoder`` says so); the causal grid stays, to set a decoder's mask beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from tui_lab.core.analysis.basics.basics_example import (
    ExampleBatch,
    example_batch,
    self_attention_qk,
)
from tui_lab.core.config.shape import Shape
from tui_lab.core.errors import LabError
from tui_lab.core.model.attention import scaled_dot_product_attention
from tui_lab.core.tasks.protocol import Task


@dataclass(frozen=True)
class MaskPicture:
    """The three masks of one batch row as (T, T) grids, and one attention row before and after."""

    batch: ExampleBatch
    row: int  # the batch row shown: the typed input's if padded, else the one with the most padding
    padding: torch.Tensor  # (T, T) bool: key j is a real token (the same for every query)
    causal: torch.Tensor  # (T, T) bool: key j <= query i
    combined: torch.Tensor  # (T, T) bool: both
    module: str  # the attention module the weights are from ("decoder.0.self")
    head: int
    query: int  # the query position of the weights row
    before: torch.Tensor  # (T,) softmax of the scaled scores over every key
    after: torch.Tensor  # (T,) the same row with the combined mask
    encoder: bool = False  # an encoder-only model's: the row is masked by padding alone

    @property
    def labels(self) -> list[str]:
        """The shown row's token labels ("" at padding)."""
        return self.batch.labels[self.row]


def mask_picture(
    model: nn.Module,
    task: Task,
    arch: Shape | str,
    text: str | None = None,
    head: int = 0,
    query: int | None = None,
) -> MaskPicture:
    """The masks of the padded batch made from ``text`` and the task's examples, and one row
    of the model's first causal self-attention (``query``: default the middle real token)."""
    batch = example_batch(task, arch, text)
    padding, causal, combined = batch.masks()  # (B,1,1,T), (T,T), (B,1,T,T)
    t = batch.tokens.size(1)
    # The typed input's row when it is padded, else the row with the most padding.
    row = 0 if text and batch.lengths[0] < t else min(
        range(len(batch.lengths)), key=lambda b: (batch.lengths[b], b)
    )
    grid_padding = padding[row, 0].expand(t, t)  # (T, T): the same key columns for every query
    encoder = Shape(arch) is Shape.ENCODER_ONLY
    grid_combined = grid_padding if encoder else combined[row, 0]  # (T, T)
    found = [qk for qk in self_attention_qk(model, batch) if qk.causal or encoder]
    if not found:
        raise LabError("this model has no causal self-attention to mask")
    qk = found[0]
    n_heads = qk.q.size(1)
    if not 0 <= head < n_heads:
        raise LabError(f"head {head}: this attention has heads 0..{n_heads - 1}")
    real = batch.lengths[row]
    at = real // 2 if query is None else query
    if not 0 <= at < t:
        raise LabError(f"query {at}: the row has positions 0..{t - 1}")
    q = qk.q[row, head, at : at + 1]  # (1, d_head)
    k, v = qk.k[row, head], qk.v[row, head]  # (T, d_head)
    _, before = scaled_dot_product_attention(q, k, v, None, qk.score_scale)  # (1, T)
    _, after = scaled_dot_product_attention(q, k, v, grid_combined[at : at + 1], qk.score_scale)
    return MaskPicture(
        batch, row, grid_padding, causal, grid_combined, qk.name, head, at, before[0], after[0], encoder
    )
