"""What the Patch pane shows, Textual-free: the site, the method, the view, the grids it has,
where history stepping stands, and the head names that tie a cell to the atlas.

The pane keeps one ``PatchView``; its keys change it, its workers fill it in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# The sites the pane cycles through (the core's names, without resid_final).
SITES = ("resid_pre", "attn_out", "mlp_out", "z", "z_pos", "pattern", "q", "k", "v")
AXES = {
    "resid_pre": ("layer", "position"), "attn_out": ("layer", "position"),
    "mlp_out": ("layer", "position"), "z": ("layer", "head"), "z_pos": ("head", "position"),
    "pattern": ("layer", "head"), "q": ("layer", "head"), "k": ("layer", "head"),
    "v": ("layer", "head"),
}
METHODS = ("exact", "attribution")
VIEWS = ("map", "dla", "history")
HEAD = re.compile(r"^L(\d+)H(\d+)$")


@dataclass
class PatchView:
    """The pane's state: ``result`` the grid on show (the live model's, or ``history``'s at
    ``step_index``), ``atlas`` head -> (label, score) of the model on show."""

    site_index: int = 0
    method: str = "exact"
    view: str = "map"
    result: Any = None  # PatchResult of the model in hand
    dla: Any = None  # DlaResult
    history: Any = None  # HistoryPatching of this pair, site and method
    curves: Any = None  # the atlas's ScoreCurves of the run
    step_index: int | None = None  # None: the model in hand, else an index into history.steps
    atlas: dict[str, tuple[str, float]] = field(default_factory=dict)

    @property
    def site(self) -> str:
        return SITES[self.site_index]

    def cycle_site(self, step: int) -> str:
        """The next (or previous) site; what was patched for the old one is dropped."""
        self.site_index = (self.site_index + step) % len(SITES)
        self.forget()
        return self.site

    def toggle_method(self) -> str:
        """Exact patching <-> attribution patching."""
        self.method = METHODS[(METHODS.index(self.method) + 1) % len(METHODS)]
        self.forget()
        return self.method

    def forget(self) -> None:
        """The grids no longer match the site, method or pair: drop them (not the atlas)."""
        self.result = None
        self.history = None
        self.step_index = None

    @property
    def shown(self) -> Any:
        """The grid on show: a history step's, or the model in hand's."""
        if self.history is not None and self.step_index is not None:
            return self.history.results[self.step_index]
        return self.result

    @property
    def step(self) -> int | None:
        """The history step on show (None: the model in hand)."""
        if self.history is None or self.step_index is None:
            return None
        return int(self.history.steps[self.step_index])

    def move(self, where: str) -> int | None:
        """Step through ``history``: prev, next (past the last: the model in hand), first, last."""
        n = len(self.history.steps) if self.history is not None else 0
        if not n:
            return None
        i = self.step_index
        targets = {
            "first": 0, "last": n - 1,
            "prev": n - 1 if i is None else max(0, i - 1),
            "next": None if i is None or i >= n - 1 else i + 1,
        }
        self.step_index = targets[where]
        return self.step_index


def head_name(site: str, row: str, col: str) -> str | None:
    """The head a cell is (``L1H2``), or None for a position site's cell."""
    if site in ("resid_pre", "attn_out", "mlp_out"):
        return None
    name = row if site == "z_pos" else f"{row}{col}"
    return name if HEAD.match(name) else None


def atlas_label(head: str) -> str:
    """``L1H2`` as the atlas names it: ``decoder.1.self:2``."""
    m = HEAD.match(head)
    if m is None:
        raise ValueError(f"not a head name: {head!r}")
    return f"decoder.{m.group(1)}.self:{m.group(2)}"


def atlas_at(curves: Any, index: int) -> dict[str, tuple[str, float]]:
    """Each head's best pattern and score at history index ``index`` of ``curves``."""
    out: dict[str, tuple[str, float]] = {}
    for label, per in curves.scores.items():
        m = re.match(r"^decoder\.(\d+)\.self:(\d+)$", label)
        scored = [(values[index], pattern) for pattern, values in per.items() if index < len(values)]
        if m is not None and scored:
            score, pattern = max(scored)
            out[f"L{m.group(1)}H{m.group(2)}"] = (pattern, float(score))
    return out


def atlas_of(heads: list[Any]) -> dict[str, tuple[str, float]]:
    """``HeadScore``s of decoder self-attention as head name -> (what the atlas calls it, score)."""
    out: dict[str, tuple[str, float]] = {}
    for h in heads:
        m = re.match(r"^decoder\.(\d+)\.self$", h.name)
        if m is not None:
            out[f"L{m.group(1)}H{h.head}"] = (h.shown, float(h.best_score))
    return out
