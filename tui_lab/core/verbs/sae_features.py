"""An SAE's features on a model: the list by density or largest activation, one feature's
card (contexts, histogram, logit effects), or the features firing on each token of a text.

``tfx-lab sae features`` runs ``run``; the Features pane's workers call ``windows_for``,
``feature_table`` and ``on_text``. Numbers are refused in the request, typed text
past the model's context before the model reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from tui_lab.core.checks import at_least
from tui_lab.core.errors import LabError
from tui_lab.core.verbs.sae_eval import hook_of
from tui_lab.core.verbs.verb import JSON, Cancelled, Progress, check_text, never, no_progress

if TYPE_CHECKING:
    from torch import Tensor

    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.sae.feature_table import FeatureTable
    from tui_lab.core.sae.sae import SparseAutoencoder

CONTEXTS = 10  # top contexts kept per feature in the cached table (more with --top)
SORTS = ("density", "max")


@dataclass(frozen=True)
class Request:
    """The SAE, and what to show: the list (``sort``), one ``feature``, or the features on ``input``."""

    sae: str
    text: str | None = None  # a text file to scan (its first nine tenths); None: the model's own
    input: str | None = None  # typed text: the features on each of its tokens
    feature: int | None = None
    top: int = 10
    tokens: int = 100_000
    sort: str = "density"
    use_cache: bool = True
    device: str = "cpu"
    model_name: str | None = None  # named in refusals

    def __post_init__(self) -> None:
        if self.text is not None and self.input is not None:
            raise LabError("--text and --input: give one")
        if self.feature is not None:
            at_least("--feature", self.feature, 0)
        if self.top < 1:
            raise LabError(f"--top {self.top}: show at least 1")
        at_least("--tokens", self.tokens, 1)
        if self.sort not in SORTS:
            raise LabError(f"--sort {self.sort}: density or max")


class FeatureRow(TypedDict):
    """One feature of the list: its index, how often it fires, its largest activation."""

    index: int
    density: float
    max_activation: float


class TokenRow(TypedDict):
    """One token of the input and its firing features, ``[index, activation]`` strongest first."""

    token: str
    features: list[list[int | float]]


class ShadedContext(TypedDict):
    """One of a feature's top contexts: its tokens, their activations and shades, the peak."""

    tokens: list[str]
    activations: list[float]
    peak: float
    peak_at: int
    shade: list[int]


class HistogramBin(TypedDict):
    low: float
    high: float
    count: int


class TokenLogit(TypedDict):
    token: str
    logit: float


class LogitEffects(TypedDict):
    """The tokens the feature's decoder direction promotes and suppresses most."""

    promoted: list[TokenLogit]
    suppressed: list[TokenLogit]


class FeatureCard(TypedDict):
    """One feature as ``sae features --feature I --json`` prints it."""

    feature: int
    density: float
    max_activation: float
    tokens: int
    histogram: list[HistogramBin]
    logit_effects: LogitEffects | None
    contexts: list[ShadedContext]


@dataclass
class Result:
    """One of: the feature list (``features``), one feature's ``card``, the ``on_input`` rows."""

    sae: str
    hook: str
    table_tokens: int = 0
    sort: str = "density"
    features: list[FeatureRow] | None = None
    card: FeatureCard | None = None
    on_input: list[TokenRow] | None = None

    def to_json(self) -> JSON:
        head: JSON = {"sae": self.sae, "hook": self.hook}
        if self.card is not None:
            return {**head, **self.card}
        if self.on_input is not None:
            return {**head, "tokens": self.on_input}
        return {**head, "tokens": self.table_tokens, "sort": self.sort, "features": self.features}


def windows_for(sae: SparseAutoencoder, hook: str, model: ModelInHand, text: str | None = None,
                name: str = "the model") -> Tensor:
    """The text's training windows (``text``: a file, None: the model's own), the SAE's width
    checked against the model's at ``hook`` on the first."""
    from tui_lab.core.sae.activations import check_width, site_width
    from tui_lab.core.sae.recipe import read_texts, text_windows

    windows = text_windows(model, read_texts(model, text, name)[0])
    check_width(sae, hook, site_width(model, hook, windows[:1]))
    return windows


def feature_table(model: ModelInHand, sae: SparseAutoencoder, windows: Tensor, hook: str, tokens: int, top: int = CONTEXTS,
                  use_cache: bool = True, progress: Progress = no_progress,
                  cancelled: Cancelled = never) -> tuple[FeatureTable | None, bool]:
    """(every feature's table over the first ``tokens`` of ``windows``, whether it was cached);
    the table is None when cancelled."""
    from tui_lab.core.sae.feature_cache import cached_feature_table

    def rows(done: int, total: int) -> None:
        progress(done, total, "reading contexts")

    windows = windows[: max(1, tokens // windows.shape[1])]
    return cached_feature_table(model, sae, windows, hook, top=top, use_cache=use_cache, progress=rows,
                                should_stop=cancelled)


def on_text(model: ModelInHand, sae: SparseAutoencoder, hook: str, text: str) -> tuple[list[str], Tensor]:
    """(the text's token labels, its (T, d_sae) feature activations); refused past the context."""
    import torch

    from tui_lab.core.sae.activations import check_width, flat_site

    check_text(model, text, "the text")
    ids = model.to_tokens(text)
    with torch.no_grad():
        _, cache = model.run_with_cache(ids, names=[hook])
        act = flat_site(cache[hook])[0].float()
        check_width(sae, hook, act.shape[-1])
        features = sae.encode(act)
    return model.to_str_tokens(ids), features


def run(request: Request, model: ModelInHand, progress: Progress = no_progress, cancelled: Cancelled = never) -> Result:
    """The list, the card or the features on the input, as the request asks."""
    from tui_lab.core.sae.source import open_sae

    if request.input is not None:
        check_text(model, request.input, "--input")
    sae = open_sae(request.sae, device=request.device)
    hook = hook_of(sae)
    if request.feature is not None and not request.feature < sae.cfg.d_sae:
        raise LabError(f"--feature {request.feature}: the SAE has features 0 to {sae.cfg.d_sae - 1}")
    result = Result(str(request.sae), hook, sort=request.sort)
    if request.input is not None:
        result.on_input = _on_input(model, sae, hook, request.input, request.top)
        return result
    windows = windows_for(sae, hook, model, request.text, request.model_name or "the model")
    table, _cached = feature_table(model, sae, windows, hook, request.tokens, max(request.top, CONTEXTS),
                                   request.use_cache, progress, cancelled)
    assert table is not None
    result.table_tokens = table.tokens
    if request.feature is not None:
        result.card = feature_card(model, sae, table, request.feature, request.top)
        return result
    key = table.density if request.sort == "density" else table.max
    order = key.argsort(descending=True, stable=True)[: request.top].tolist()
    result.features = [{"index": i, "density": float(table.density[i]), "max_activation": float(table.max[i])}
                       for i in order]
    return result


def _on_input(model: ModelInHand, sae: SparseAutoencoder, hook: str, text: str, top: int) -> list[TokenRow]:
    """Each token of ``text`` with its ``top`` firing features, strongest first."""
    labels, features = on_text(model, sae, hook, text)
    rows: list[TokenRow] = []
    for token, acts in zip(labels, features, strict=True):
        values, index = acts.topk(min(top, acts.numel()))
        rows.append({"token": token, "features": [[int(j), round(float(v), 4)]
                                                 for v, j in zip(values, index, strict=True) if v > 0]})
    return rows


def feature_card(model: ModelInHand, sae: SparseAutoencoder, table: FeatureTable, i: int, top: int) -> FeatureCard:
    """One feature as ``sae features --feature I --json`` prints it."""
    from tui_lab.core.sae.feature_table import logit_effects, shade_levels, unembedding

    contexts: list[ShadedContext] = []
    for c in table.contexts(i)[:top]:
        contexts.append({"tokens": model.to_str_tokens(c.ids), "activations": [round(a, 4) for a in c.activations],
                         "peak": round(c.peak, 4), "peak_at": c.peak_at,
                         "shade": shade_levels(c.activations, c.peak)})
    card: FeatureCard = {
        "feature": i, "density": float(table.density[i]), "max_activation": float(table.max[i]),
        "tokens": table.tokens,
        "histogram": [{"low": lo, "high": hi, "count": n} for lo, hi, n in table.histogram(i)],
        "logit_effects": None, "contexts": contexts,
    }
    w_u = unembedding(model.model)
    if w_u is not None and w_u.shape[0] == sae.cfg.d_in:
        effects = logit_effects(sae, i, w_u.to(sae.W_dec.device), top)
        label = model.task.vocab.label
        card["logit_effects"] = {
            "promoted": [{"token": label(t), "logit": round(v, 4)} for t, v in effects.promoted],
            "suppressed": [{"token": label(t), "logit": round(v, 4)} for t, v in effects.suppressed],
        }
    return card
