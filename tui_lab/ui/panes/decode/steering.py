"""The Decode pane's steering: a vector added at a hook, scaled, in every decode (Textual-free)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch-backed: a vector exists only once torch is loaded
    from torch import Tensor

    from tui_lab.core.model.hook_points import HookSpec


@dataclass(frozen=True)
class Steering:
    """``coef * vector`` added at ``hook`` on every position (``core.analysis.steering``)."""

    hook: str
    vector: Tensor  # the two prompt sets' mean activations, one less the other
    coef: float

    @property
    def label(self) -> str:
        return f"{self.hook} + {self.coef:g} x vector (norm {float(self.vector.norm()):.3g})"

    def hooks(self) -> list[HookSpec]:
        from tui_lab.core.analysis.patching.steering import steering_hooks

        return steering_hooks(self.hook, self.vector, self.coef)
