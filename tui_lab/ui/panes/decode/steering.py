"""The Decode pane's steering: a vector added at a hook, scaled, in every decode (Textual-free)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Steering:
    """``coef * vector`` added at ``hook`` on every position (``core.analysis.steering``)."""

    hook: str
    vector: Any  # a torch tensor: the two prompt sets' mean activations, one less the other
    coef: float

    @property
    def label(self) -> str:
        return f"{self.hook} + {self.coef:g} x vector (norm {float(self.vector.norm()):.3g})"

    def hooks(self) -> list[Any]:
        from tui_lab.core.analysis.patching.steering import steering_hooks

        return steering_hooks(self.hook, self.vector, self.coef)
