"""The tutorials' positional-encoding picture, read off the model's own position module.

What the model adds (or rotates) for each position, as a (position, dimension)
table, and the dot product of every position's encoding with every other's:

- sinusoidal: the rows of the model's ``SinusoidalPositions`` buffer (built by
  ``positions.sinusoid_table``), ``PE[pos, 2i] = sin(pos / 10000^(2i/d))``;
- learned: the model's ``LearnedPositions.weight`` rows (trained in a run,
  the initial random rows for a preset never trained);
- rotary: nothing is added; the table is the angle each position rotates each
  dimension pair by (``RotaryEmbedding.angles``, wrapped to [0, 2 pi)), and
  the similarity is that of the (cos, sin) rows, ``sum_j cos((p - s) w_j)``:
  exactly what a rotated query and key keep of their positions.

Nearby positions look alike in all three: the similarity falls off the diagonal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from tui_lab.core.model.models import EmbeddingsAndHead
from tui_lab.core.model.positions import LearnedPositions, RotaryEmbedding, SinusoidalPositions

PositionModule = SinusoidalPositions | LearnedPositions | RotaryEmbedding

DEFAULT_LENGTH = 32  # positions shown: enough to see the stripes, small enough for a terminal


@dataclass(frozen=True)
class PositionPicture:
    """A model's positional table (length, dims) and its (length, length) dot products."""

    kind: str  # "sinusoidal", "learned", "rope" or "none"
    table: torch.Tensor  # (L, D): added rows, or rotary angles in [0, 2 pi) of (L, pairs)
    similarity: torch.Tensor  # (L, L) dot products of the positions' encodings
    what: str  # one line saying what the table's values are
    base: float | None = None  # rotary only: the frequency base
    rotated_dims: int | None = None  # rotary only: dims rotated per head (2 x pairs)

    @property
    def length(self) -> int:
        """Positions in the table."""
        return int(self.table.size(0))


def position_module(model: nn.Module) -> PositionModule | None:
    """The model's own position module: the additive one (``model.pos``), else its RoPE."""
    pos = model.pos if isinstance(model, EmbeddingsAndHead) else None
    if pos is not None:
        return pos
    for module in model.modules():
        if isinstance(module, RotaryEmbedding):
            return module
    return None


def rope_angles(rope: RotaryEmbedding, length: int) -> torch.Tensor:
    """(length, pairs) angle of each position and pair, wrapped to [0, 2 pi), from the
    module's own cos/sin tables (``angles``), so the picture is the rotation the model applies."""
    cos, sin_signed = rope.angles(0, length)  # (L, dims) each; pair j is (j, j + dims/2)
    half = rope.dims // 2
    angle = torch.atan2(sin_signed[:, half:], cos[:, :half])  # (L, pairs), in (-pi, pi]
    return torch.remainder(angle, 2 * math.pi)


def position_picture(model: nn.Module, length: int = DEFAULT_LENGTH) -> PositionPicture:
    """The picture of ``model``'s positional encoding over its first ``length`` positions."""
    module = position_module(model)
    with torch.no_grad():
        if isinstance(module, SinusoidalPositions):
            # The module grows its table on demand; ask it for the rows it would add.
            zeros = torch.zeros(1, length, module.d_model, device=module.pe.device)
            table = module(zeros, 0)[0].float().cpu()  # (L, D)
            return PositionPicture(
                "sinusoidal", table, table @ table.T,
                "PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(...)",
            )
        if isinstance(module, LearnedPositions):
            length = min(length, module.max_len)
            table = module.weight[:length].detach().float().cpu()  # (L, D)
            return PositionPicture(
                "learned", table, table @ table.T, "the model's learned row for each position"
            )
        if isinstance(module, RotaryEmbedding):
            cos, sin_signed = module.angles(0, length)
            half = module.dims // 2
            rows = torch.cat((cos[:, :half], sin_signed[:, half:]), dim=-1).float().cpu()  # (L, dims)
            return PositionPicture(
                "rope", rope_angles(module, length).float().cpu(), rows @ rows.T,
                "rotation angle p * base^(-2j/dims) of pair j, mod 2 pi",
                base=module.base, rotated_dims=module.dims,
            )
    empty = torch.zeros(0, 0)
    return PositionPicture("none", empty, empty, "this model adds no positional information")
