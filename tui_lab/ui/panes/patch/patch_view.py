"""What the Patch pane shows, Textual-free: the site, the method, the view, the grids it has,
where history stepping stands, and the head names that tie a cell to the atlas.

The pane keeps one ``PatchView``; its keys change it, its workers fill it in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tui_lab.core.analysis.heads.atlas import HeadScore
    from tui_lab.core.analysis.heads.head_curves import ScoreCurves
    from tui_lab.core.analysis.lenses.direct_logit_attribution import DlaResult
    from tui_lab.core.analysis.patching.activation_patching import PatchResult
    from tui_lab.core.analysis.patching.patching_history import HistoryPatching

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
# A head as the pane names it: ``L1H2`` (one stack), ``enc L0 H1``, ``dec L0 H1``, ``cross L0 H1``.
HEAD = re.compile(r"^(?:(enc|dec|cross) )?L(\d+) ?H(\d+)$")
# The pane's head name -> (what the atlas calls it, its score).
Atlas = dict[str, tuple[str, float]]
_STACK = {"enc": "encoder.{}.self", "dec": "decoder.{}.self", "cross": "decoder.{}.cross"}


@dataclass
class PatchView:
    """The pane's state: ``result`` the grid on show (the live model's, or ``history``'s at
    ``step_index``), ``atlas`` head -> (label, score) of the model on show."""

    site_index: int = 0
    method: str = "exact"
    view: str = "map"
    result: PatchResult | None = None  # of the model in hand
    dla: DlaResult | None = None
    history: HistoryPatching | None = None  # of this pair, site and method
    curves: ScoreCurves | None = None  # the atlas's curves over the run's history
    step_index: int | None = None  # None: the model in hand, else an index into history.steps
    atlas: Atlas = field(default_factory=dict)

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
    def shown(self) -> PatchResult | None:
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
    """The head a cell is (``L1H2``, ``cross L0 H1``), or None for a position site's cell."""
    if site in ("resid_pre", "attn_out", "mlp_out"):
        return None
    name = row if site == "z_pos" else f"{row}{' ' if ' ' in row else ''}{col}"
    return name if HEAD.match(name) else None


def atlas_labels(head: str) -> list[str]:
    """The atlas's names a pane head may have: ``L1H2`` is ``decoder.1.self:2`` (or an
    encoder-only model's ``encoder.1.self:2``); ``cross L0 H1`` is ``decoder.0.cross:1``."""
    m = HEAD.match(head)
    if m is None:
        raise ValueError(f"not a head name: {head!r}")
    stack, layer, h = m.group(1), m.group(2), m.group(3)
    if stack is None:
        return [f"decoder.{layer}.self:{h}", f"encoder.{layer}.self:{h}"]
    return [f"{_STACK[stack].format(layer)}:{h}"]


def pane_head(atlas_name: str, head: int, two_stacks: bool) -> str | None:
    """The pane's name of an atlas head (``decoder.1.self`` head 2 -> ``L1H2``)."""
    m = re.match(r"^(encoder|decoder)\.(\d+)\.(self|cross)$", atlas_name)
    if m is None:
        return None
    if not two_stacks:
        return f"L{m.group(2)}H{head}"
    stack = "cross" if m.group(3) == "cross" else m.group(1)[:3]
    return f"{stack} L{m.group(2)} H{head}"


def _two_stacks(names: list[str]) -> bool:
    return any(".cross" in n for n in names) or (
        any(n.startswith("encoder.") for n in names) and any(n.startswith("decoder.") for n in names))


def atlas_at(curves: ScoreCurves, index: int) -> Atlas:
    """Each head's best pattern and score at history index ``index`` of ``curves``."""
    out: Atlas = {}
    two = _two_stacks(list(curves.scores))
    for label, per in curves.scores.items():
        name, _, h = label.rpartition(":")
        scored = [(values[index], pattern) for pattern, values in per.items() if index < len(values)]
        head = pane_head(name, int(h), two) if h.isdigit() else None
        if head is not None and scored:
            score, pattern = max(scored)
            out[head] = (pattern, float(score))
    return out


def atlas_of(heads: list[HeadScore]) -> Atlas:
    """``HeadScore``s as the pane's head name -> (what the atlas calls it, score)."""
    two = _two_stacks([h.name for h in heads])
    out: Atlas = {}
    for h in heads:
        head = pane_head(h.name, h.head, two)
        if head is not None:
            out[head] = (h.shown, float(h.best_score))
    return out
