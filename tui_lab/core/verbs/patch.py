"""Patching a site over a clean / corrupted pair: exact, attribution, both, or an SAE's features.

The pair is a ready-made one (``pair``: its name, None for the model's first) or
four typed texts; ``tfx-lab patch`` and the Patch pane's worker both run it here.
The typed inputs are refused past the model's context before any model work.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tui_lab.core.analysis.patching.patch_pair import PatchError, PatchPair, make_pair, ready_pair
from tui_lab.core.verbs.verb import JSON, Cancelled, Progress, check_text, never, no_progress

if TYPE_CHECKING:
    from tui_lab.core.analysis.patching.activation_patching import PatchResult
    from tui_lab.core.opening.in_hand import ModelInHand

METHODS = ("exact", "attribution", "both")
PAIR_FIELDS = ("clean", "corrupt", "answer", "wrong")
OPTION = {"clean": "--clean", "corrupt": "--corrupt", "answer": "--answer", "wrong": "--wrong"}


@dataclass(frozen=True)
class Request:
    """A site, a method and where the pair comes from (``pair`` or the four texts, not both)."""

    site: str = "resid_pre"
    method: str = "exact"
    pair: str | None = None
    clean: str | None = None
    corrupt: str | None = None
    answer: str | None = None
    wrong: str | None = None
    target: str | None = None  # an encoder-decoder's decoder input after its start token
    stack: str | None = None  # an encoder-decoder's stack patched by position
    sae: str | None = None  # site "sae": the SAE folder whose features are patched

    def __post_init__(self) -> None:
        from tui_lab.core.analysis.patching.activation_patching import site_named

        if self.method not in METHODS:
            raise PatchError(f"unknown method {self.method!r}: exact, attribution or both")
        if (self.site == "sae") != (self.sae is not None):
            raise PatchError("--site sae and --sae DIR go together")
        if self.site == "sae" and self.method != "exact":
            raise PatchError("--site sae is patched exactly (--method exact)")
        if self.site != "sae":
            site_named(self.site)
        given = self.typed()
        if given and self.pair is not None:
            raise PatchError("give either --pair or --clean/--corrupt/--answer/--wrong, not both")
        missing = [OPTION[name] for name in PAIR_FIELDS if given and name not in given]
        if missing:
            raise PatchError(f"a pair needs --clean, --corrupt, --answer and --wrong (missing {', '.join(missing)})")
        if not given and self.target is not None:
            raise PatchError("--target goes with --clean/--corrupt/--answer/--wrong (a ready-made pair has its own)")

    def typed(self) -> list[str]:
        """The pair's fields given as text."""
        return [name for name in PAIR_FIELDS if getattr(self, name) is not None]


@dataclass
class Result:
    """The pair and its grids: one (exact, attribution or sae) or exact beside attribution."""

    pair: PatchPair
    grids: list[PatchResult] = field(default_factory=list)

    @property
    def correlation(self) -> float | None:
        from tui_lab.core.analysis.patching.attribution_patching import correlation

        return correlation(*self.grids) if len(self.grids) == 2 else None

    def to_json(self) -> JSON:
        head: JSON = {"pair": self.pair.name}
        if len(self.grids) == 1:
            return {**head, **self.grids[0].to_dict()}
        return {**head, "exact": self.grids[0].to_dict(), "attribution": self.grids[1].to_dict(),
                "correlation": self.correlation}


def pair_of(request: Request, model: ModelInHand) -> PatchPair:
    """The request's pair on ``model`` (typed inputs past the context refused first)."""
    if not request.typed():
        return ready_pair(model, request.pair)
    for name, what in (("clean", "the clean input"), ("corrupt", "the corrupted input"),
                       ("target", "the decoder's input")):
        check_text(model, getattr(request, name) or "", what)
    assert request.clean is not None and request.corrupt is not None
    assert request.answer is not None and request.wrong is not None
    return make_pair(model, request.clean, request.corrupt, request.answer, request.wrong, request.target)


def run(request: Request, model: ModelInHand, progress: Progress = no_progress, cancelled: Cancelled = never) -> Result:
    """Patch every cell of the site over the request's pair (exact runs are cancellable between batches)."""
    return grids(request, model, pair_of(request, model), progress, cancelled)


def grids(request: Request, model: ModelInHand, pair: PatchPair, progress: Progress = no_progress,
          cancelled: Cancelled = never) -> Result:
    """The request's grids over ``pair`` (a pair already made: the Patch pane keeps its own)."""
    from tui_lab.core.analysis.patching.activation_patching import activation_patch
    from tui_lab.core.analysis.patching.attribution_patching import attribution_patch

    def cells(done: int, total: int) -> None:
        progress(done, total, "patching")

    result = Result(pair)
    if request.site == "sae":
        from tui_lab.core.analysis.patching.feature_patching import feature_patch
        from tui_lab.core.sae.source import open_sae

        assert request.sae is not None
        result.grids.append(feature_patch(model, pair, open_sae(request.sae), progress=cells, cancelled=cancelled))
        return result
    if request.method in ("exact", "both"):
        result.grids.append(activation_patch(model, pair, request.site, stack=request.stack, progress=cells,
                                             cancelled=cancelled))
    if request.method in ("attribution", "both"):
        result.grids.append(attribution_patch(model, pair, request.site, stack=request.stack))
        cells(1, 1)
    return result
