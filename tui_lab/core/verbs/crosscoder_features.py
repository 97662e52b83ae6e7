"""A crosscoder's features: which source each belongs to, the histogram, one feature's contexts.

``summary`` classifies every feature by its relative decoder norm between the
first source (A) and the last (B) (``core/sae/crosscoder_norms.py``: new at B,
gone at B, shared, in between, dead) and draws the papers' histogram; ``run``
adds the lists (``tfx-lab crosscoder features DIR``) or, for one ``feature``, its
top contexts at every source, which opens the sources named in the folder's
cfg.json and reads their activations on the same text. The Features pane's diff
view calls ``summary``, ``feature_rows``, ``source_table`` and ``feature_card``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from tui_lab.core.checks import at_least
from tui_lab.core.errors import LabError
from tui_lab.core.verbs.verb import JSON, Cancelled, Progress, Stopped, never, no_progress

if TYPE_CHECKING:
    from torch import Tensor

    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.sae.crosscoder import Crosscoder
    from tui_lab.core.sae.crosscoder_contexts import CrosscoderTable
    from tui_lab.core.verbs.sae_features import ShadedContext


@dataclass(frozen=True)
class Request:
    """The folder, and what to show: the lists (``top`` of each class) or one ``feature``'s card."""

    dir: str
    feature: int | None = None
    top: int = 10
    text: str | None = None  # for the card: a text file; None: the model's own text or task
    tokens: int = 10_000  # for the card: rows read at every source
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.feature is not None:
            at_least("--feature", self.feature, 0)
        at_least("--top", self.top, 1)
        at_least("--tokens", self.tokens, 1)


class FeatureRow(TypedDict):
    """One feature of a list: its index, relative norm, class, decoder norms and firing count."""

    index: int
    relative_norm: float
    kind: str
    norms: list[float]
    fired: int


class SourceContexts(TypedDict):
    """A feature's top contexts reading one source alone."""

    source: str
    density: float
    max_activation: float
    contexts: list[ShadedContext]


class CrosscoderCard(TypedDict):
    feature: int
    relative_norm: float
    kind: str
    norms: list[float]
    density: float
    tokens: int
    sources: list[SourceContexts]


@dataclass
class Result:
    dir: str
    hook: str
    sources: list[str]
    summary: JSON
    lists: dict[str, list[FeatureRow]] | None = None
    card: CrosscoderCard | None = None

    def to_json(self) -> JSON:
        head: JSON = {"dir": self.dir, "hook": self.hook, "sources": self.sources, **self.summary}
        if self.card is not None:
            return {**head, "card": dict(self.card)}
        return {**head, "features": self.lists}


def summary(cc: Crosscoder, fired: Tensor) -> JSON:
    """Counts of each class, the thresholds, and the histogram (``crosscoder_norms.summary``)."""
    from tui_lab.core.sae.crosscoder_norms import summary as norms_summary

    return {"d_sae": cc.cfg.d_sae, **norms_summary(cc.decoder_norms(), fired)}


def feature_rows(cc: Crosscoder, fired: Tensor) -> dict[str, list[FeatureRow]]:
    """Every feature by class: new at B (most one-sided first), gone at B, shared, in between, dead."""
    from tui_lab.core.sae.crosscoder_norms import CLASSES, classify, relative_norms

    norms = cc.decoder_norms()
    rel = relative_norms(norms, 0, cc.cfg.n_sources - 1)
    kinds = classify(rel, fired > 0)
    out: dict[str, list[FeatureRow]] = {c: [] for c in CLASSES}
    for i, kind in enumerate(kinds):
        out[kind].append({"index": i, "relative_norm": round(float(rel[i]), 4), "kind": kind,
                          "norms": [round(float(v), 4) for v in norms[i].tolist()], "fired": int(fired[i])})
    out["b_only"].sort(key=lambda r: (-r["relative_norm"], -r["fired"]))
    out["a_only"].sort(key=lambda r: (r["relative_norm"], -r["fired"]))
    for kind in ("shared", "mixed", "dead"):
        out[kind].sort(key=lambda r: -r["fired"])
    return out


def source_table(cc: Crosscoder, models: Sequence[ModelInHand], text: str | None, tokens: int,
                 progress: Progress = no_progress, cancelled: Cancelled = never) -> CrosscoderTable:
    """Every feature over ``tokens`` rows of the text at each source (one pass)."""
    from tui_lab.core.sae.crosscoder_contexts import build_table
    from tui_lab.core.sae.crosscoder_sources import check_sources, collect, shared_windows

    labels = [s.label for s in cc.cfg.sources]
    windows = shared_windows(models[0], text, tokens)
    width = check_sources(models, labels, cc.cfg.hook, windows[:1])
    if width != cc.cfg.d_in:
        raise LabError(f"the crosscoder reads d_in={cc.cfg.d_in} but {cc.cfg.hook} has width {width}")
    acts = collect(models, windows, cc.cfg.hook, progress=lambda d, t: progress(d, t, "reading contexts"),
                   should_stop=cancelled)
    if acts is None:
        raise Stopped("stopped")
    return build_table(cc, windows, acts)


def feature_card(cc: Crosscoder, fired: Tensor, table: CrosscoderTable, models: Sequence[ModelInHand],
                 i: int, top: int = 8) -> CrosscoderCard:
    """Feature ``i``: its relative norm and class, and its top contexts at every source."""
    from tui_lab.core.sae.crosscoder_norms import classify, relative_norms
    from tui_lab.core.sae.feature_table import shade_levels

    if not 0 <= i < cc.cfg.d_sae:
        raise LabError(f"--feature {i}: the crosscoder has features 0 to {cc.cfg.d_sae - 1}")
    norms = cc.decoder_norms()
    rel = relative_norms(norms, 0, cc.cfg.n_sources - 1)
    sources: list[SourceContexts] = []
    for s, spec in enumerate(cc.cfg.sources):
        shown: list[ShadedContext] = []
        for c in table.contexts(cc, i, s)[:top]:
            shown.append({"tokens": models[s].to_str_tokens(c.ids), "activations": [round(a, 4) for a in c.activations],
                          "peak": round(c.peak, 4), "peak_at": c.peak_at, "shade": shade_levels(c.activations, c.peak)})
        sources.append({"source": spec.label, "density": float(table.source_density[s, i]),
                        "max_activation": float(table.source_max[s, i]), "contexts": shown})
    return {"feature": i, "relative_norm": round(float(rel[i]), 4), "kind": classify(rel[i : i + 1],
                                                                                      fired[i : i + 1] > 0)[0],
            "norms": [round(float(v), 4) for v in norms[i].tolist()], "density": float(table.density[i]),
            "tokens": table.tokens, "sources": sources}


def run(request: Request, models: Sequence[ModelInHand] | None = None, progress: Progress = no_progress,
        cancelled: Cancelled = never) -> Result:
    """The lists, or one feature's card (its sources opened here unless ``models`` are given)."""
    from tui_lab.core.sae.crosscoder_folder import load_crosscoder
    from tui_lab.core.verbs.crosscoder_train import open_sources

    cc, fired = load_crosscoder(request.dir, request.device)
    result = Result(request.dir, cc.cfg.hook, [s.label for s in cc.cfg.sources], summary(cc, fired))
    if request.feature is None:
        result.lists = {k: rows[: request.top] for k, rows in feature_rows(cc, fired).items()}
        return result
    if not request.feature < cc.cfg.d_sae:
        raise LabError(f"--feature {request.feature}: the crosscoder has features 0 to {cc.cfg.d_sae - 1}")
    handles = list(models) if models is not None else open_sources(cc.cfg.sources, request.device)
    text = None
    if request.text is not None:
        from tui_lab.core.verbs.crosscoder_train import read_text

        text = read_text(request.text)
    table = source_table(cc, handles, text, request.tokens, progress, cancelled)
    result.card = feature_card(cc, fired, table, handles, request.feature, request.top)
    return result
