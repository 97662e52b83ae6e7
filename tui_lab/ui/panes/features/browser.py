"""The Features pane's state, free of Textual: the SAE, its feature table, the list's order,
the feature on show, and what fires on the typed text.

Everything a key changes is worked out here from tensors already in memory (the
feature table, ``core/sae/feature_table.py``), so moving between features is a
lookup: no forward pass, no encode over the text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from torch import Tensor

    from tui_lab.core.sae.feature_table import FeatureTable
    from tui_lab.core.sae.sae import SparseAutoencoder

SORTS = ("density", "max", "prompt")
SORT_TITLES = {"density": "density", "max": "largest activation", "prompt": "activation on the typed text"}


class ContextRow(TypedDict):
    """One top context: its token labels, the feature's activation on each, its peak."""

    tokens: list[str]
    activations: list[float]
    peak_at: int
    peak: float


class Effects(TypedDict):
    """The tokens the feature's decoder direction promotes and suppresses most: (label, logit)."""

    promoted: list[tuple[str, float]]
    suppressed: list[tuple[str, float]]


class Card(TypedDict):
    """What the pane shows of one feature (``card_view.card_text`` draws it)."""

    feature: int
    density: float
    max: float
    tokens: int
    histogram: list[tuple[float, float, int]]
    effects: Effects | None
    contexts: list[ContextRow]


@dataclass
class PromptRow:
    """One token of the typed text and the features firing on it, strongest first."""

    token: str
    features: list[tuple[int, float]]


@dataclass
class FeatureBrowser:
    """An SAE's feature table, the list's order and cursor, and the typed text's features."""

    sae: SparseAutoencoder
    table: FeatureTable
    label: Callable[[int], str]  # id -> the token's label (the model's vocabulary)
    w_u: Tensor | None = None  # (d_in, V) unembedding, or None (no logit effects)
    sort: str = "density"
    cursor: int = 0  # row of the list
    prompt: list[PromptRow] = field(default_factory=list)
    prompt_max: Tensor | None = None  # (d_sae,) max activation over the typed text
    order: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.resort()

    @property
    def feature(self) -> int:
        """The feature on show (the list's cursor)."""
        return self.order[self.cursor] if self.order else 0

    def key(self) -> Tensor:
        if self.sort == "max":
            return self.table.max
        if self.sort == "prompt" and self.prompt_max is not None:
            return self.prompt_max
        return self.table.density

    def resort(self, keep: bool = True) -> None:
        """Order the list by ``sort`` (largest first); the cursor stays on its feature."""
        current = self.feature if (keep and self.order) else None
        self.order = self.key().argsort(descending=True, stable=True).tolist()
        self.cursor = self.order.index(current) if current is not None else 0

    def cycle_sort(self) -> str:
        """The next sort (the typed text's only once there is one)."""
        usable = [s for s in SORTS if s != "prompt" or self.prompt_max is not None]
        self.sort = usable[(usable.index(self.sort) + 1) % len(usable)] if self.sort in usable else usable[0]
        self.resort()
        return self.sort

    def move(self, delta: int) -> None:
        self.cursor = max(0, min(len(self.order) - 1, self.cursor + delta))

    def jump_to(self, feature: int) -> None:
        """Show ``feature`` (the list keeps its order; the cursor moves to it)."""
        self.cursor = self.order.index(feature)

    def card(self, top: int = 8) -> Card:
        """What the pane shows of the feature on show: density, max, histogram, logit effects,
        top contexts (token labels, activations, peak)."""
        from tui_lab.core.sae.feature_table import logit_effects

        i = self.feature
        effects: Effects | None = None
        if self.w_u is not None and self.w_u.shape[0] == self.sae.cfg.d_in:
            found = logit_effects(self.sae, i, self.w_u, top)
            effects = {"promoted": [(self.label(t), v) for t, v in found.promoted],
                       "suppressed": [(self.label(t), v) for t, v in found.suppressed]}
        contexts: list[ContextRow] = [{"tokens": [self.label(t) for t in c.ids], "activations": c.activations,
                     "peak_at": c.peak_at, "peak": c.peak} for c in self.table.contexts(i)]
        return {"feature": i, "density": float(self.table.density[i]), "max": float(self.table.max[i]),
                "tokens": self.table.tokens, "histogram": self.table.histogram(i), "effects": effects,
                "contexts": contexts}

    def set_prompt(self, labels: list[str], features: Tensor, top: int = 3) -> None:
        """The typed text's tokens and their feature activations (T, d_sae)."""
        self.prompt = []
        for token, acts in zip(labels, features, strict=True):
            values, index = acts.topk(min(top, acts.numel()))
            self.prompt.append(PromptRow(token, [(int(j), float(v)) for v, j in
                                                 zip(values, index, strict=True) if v > 0]))
        self.prompt_max = features.max(dim=0).values
        if self.sort == "prompt":
            self.resort()

    def prompt_pairs(self) -> list[tuple[int, str, int, float]]:
        """(token index, token, feature, activation) of every feature shown on the typed text."""
        return [(t, row.token, j, v) for t, row in enumerate(self.prompt) for j, v in row.features]
