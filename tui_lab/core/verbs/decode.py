"""Decoding one text, whatever the model's shape: greedy or sampled continuation (a
decoder-only model; an encoder-decoder translates), the masks filled (an encoder-only model).

``tfx-lab decode`` runs ``run`` (with the logit lens and one attention row written out
when asked); the Decode pane's worker and time travel's replay call ``decoded`` on the
model they hold (a private copy, heads switched off). The sampling numbers are refused
in the request (NaN, infinity, out of range), so the command and the lab's options row
say the same words; text past the context is refused before any forward pass (a
language model's prompt is cut to fit by ``generate`` instead, as it always was).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict, TypeGuard

from tui_lab.core.checks import at_least, finite, in_range
from tui_lab.core.errors import LabError
from tui_lab.core.verbs.verb import JSON, Cancelled, Progress, never, no_progress, stop_if

if TYPE_CHECKING:
    from torch import Tensor, nn

    from tui_lab.core.analysis.lenses.logit_lens import LensTable
    from tui_lab.core.decoding.decode import DecodeResult
    from tui_lab.core.decoding.fill_mask import FillMaskResult
    from tui_lab.core.model.encoder_only import EncoderOnly
    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.tasks.protocol import Task

FILL_TOP_K = 5  # fillers shown per mask when none is asked for


class GenerateOptions(TypedDict):
    """The keyword arguments ``generate`` takes from a request."""

    max_new_tokens: int | None
    temperature: float
    top_k: int
    top_p: float
    seed: int
    report_k: int
    capture: bool


@dataclass(frozen=True)
class Request:
    """One text to decode and how: ``temperature`` 0 is greedy; ``top_k`` (0 = all; fill-mask:
    fillers per mask, 0 = 5) and ``top_p`` cut what is sampled; ``capture`` keeps the attention,
    ``attention`` puts it in the result's JSON, ``lens`` adds the logit lens, ``explain`` (``NAME:H@ROW``) one attention row written out.
    ``bare_attention``: an encoder without an MLM head shows its attention instead of refusing."""

    input: str
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    max_new: int | None = None
    capture: bool = True
    attention: bool = False
    lens: bool = False
    explain: str | None = None
    report_k: int = 5
    bare_attention: bool = False

    def __post_init__(self) -> None:
        at_least("--temperature", self.temperature, 0)
        at_least("--top-k", self.top_k, 0)
        in_range("--top-p", self.top_p, 0, 1, low_open=True)
        finite("--seed", self.seed)
        if self.max_new is not None:
            at_least("--max-new", self.max_new, 1)
        at_least("report_k", self.report_k, 1)
        if self.explain is not None:
            parse_explain(self.explain)

    def options(self) -> GenerateOptions:
        """The keyword arguments ``generate`` takes for this request."""
        return {"max_new_tokens": self.max_new, "temperature": self.temperature, "top_k": self.top_k,
                "top_p": self.top_p, "seed": self.seed, "report_k": self.report_k, "capture": self.capture}


class Explained(TypedDict):
    """One attention row written out (``--explain``): the walkthrough's numbers."""

    head: str
    row: int
    d_head: int
    query: str
    keys: list[str]
    raw: list[float]
    scaled: list[float]
    weights: list[float]
    masked: list[bool]
    output: list[float]
    captured: list[float]
    max_diff: float
    scale: str


@dataclass
class Result:
    """The core's decode (``DecodeResult``, or ``FillMaskResult`` for an encoder-only model), the
    logit lens and the explained row when asked; ``attention`` puts the captures in the JSON."""

    decoded: DecodeResult | FillMaskResult
    lens: LensTable | None = None
    explained: Explained | None = None
    attention: bool = False
    fill: bool = field(default=False)

    def to_json(self) -> JSON:
        out: JSON = dict(self.decoded.to_json())
        if self.attention:
            out["attention"] = {name: _attention_json(self.decoded, name, w)
                                for name, w in self.decoded.attention.items()}
        if self.lens is not None:
            out["lens"] = self.lens.to_json()
        if self.explained is not None:
            out["explain"] = self.explained
        return out


def _attention_json(decoded: DecodeResult | FillMaskResult, name: str, w: Tensor) -> JSON:
    if isinstance(decoded.labels, dict):
        queries, keys = decoded.labels[name][0], decoded.labels[name][1]
    else:  # fill-mask: one label per token on both axes
        queries = keys = decoded.labels
    return {"weights": w.tolist(), "queries": queries, "keys": keys}


def parse_explain(text: str) -> tuple[str, int]:
    """``"decoder.0.cross:1@3"`` -> ("decoder.0.cross:1", 3); LabError if malformed."""
    head, sep, row = text.rpartition("@")
    if not sep or not head:
        raise LabError(f"--explain {text!r}: expected NAME:HEAD@ROW, e.g. decoder.0.cross:1@3")
    try:
        return head, int(row)
    except ValueError:
        raise LabError(f"--explain {text!r}: {row!r} is not a query row number") from None


def is_fill_mask_model(model: nn.Module | None) -> TypeGuard[EncoderOnly]:
    """Whether the module ``model`` decodes by filling masks (an encoder-only model)."""
    from tui_lab.core.decoding.fill_mask import is_fill_mask

    return model is not None and is_fill_mask(model)


def decoded(model: nn.Module, task: Task, request: Request) -> DecodeResult | FillMaskResult:
    """``request.input`` decoded by the module ``model``: its masks filled, else ``generate``.
    An encoder-only model's input is refused past its context before the forward pass."""
    if is_fill_mask_model(model):
        from tui_lab.core.decoding.fill_mask import attention_only, fill_mask
        from tui_lab.core.model.encoder_only import mlm_head_note

        _check_fill_context(model, task, request.input)
        if request.bare_attention and mlm_head_note(model) is not None:
            return attention_only(model, task, request.input)  # a bare encoder: why no fills
        return fill_mask(model, task, request.input, top_k=request.top_k or request.report_k,
                         capture=request.capture)
    from tui_lab.core.decoding.decode import generate

    return generate(model, task, request.input, **request.options())


def _check_fill_context(model: EncoderOnly, task: Task, text: str) -> None:
    limit = int(model.config.max_len or 0)
    if limit > 0 and text:
        from tui_lab.core.checks import check_context

        check_context(len(task.vocab.encode(text)), limit, "the input")


def run(request: Request, model: ModelInHand, progress: Progress = no_progress, cancelled: Cancelled = never) -> Result:
    """Decode the input with the model in hand; the lens and the explained row when asked."""
    stop_if(cancelled)
    result = decoded(model.model, model.task, request)
    progress(1, 1, "decoding")
    from tui_lab.core.decoding.fill_mask import FillMaskResult

    if isinstance(result, FillMaskResult):  # what ``decoded`` gives an encoder-only model
        return Result(result, attention=request.attention, fill=True)
    lens = explained = None
    if request.lens:
        from tui_lab.core.analysis.lenses.logit_lens import logit_lens

        lens = logit_lens(model.model, model.task, result)
    if request.explain is not None:
        explained = explain(model, result, request)
    return Result(result, lens, explained, attention=request.attention)


def explain(model: ModelInHand, result: DecodeResult, request: Request) -> Explained:
    """The walkthrough of one attention row (the lab's numbers), as a dict."""
    from tui_lab.core.analysis.basics.walkthrough import collect_projections, walk
    from tui_lab.core.analysis.heads.ablation import parse_head

    assert request.explain is not None
    head_text, row = parse_explain(request.explain)
    ref = parse_head(head_text, model.model)
    options = {"max_new_tokens": request.max_new, "temperature": request.temperature,
               "top_k": request.top_k, "top_p": request.top_p, "seed": request.seed}
    projections = collect_projections(model.model, model.task, result, options)
    proj = projections.get(ref.name)
    if proj is None:
        raise LabError(f"--explain: {ref.name} did not run in this decode")
    n_rows = proj.q.size(1)
    if not 0 <= row < n_rows:
        raise LabError(f"--explain: {ref.name} has query rows 0..{n_rows - 1} in this decode")
    w = walk(proj, result, ref.name, ref.head, row)
    return {"head": str(ref), "row": row, "d_head": w.d_head, "query": w.query, "keys": w.keys,
            "raw": w.raw, "scaled": w.scaled, "weights": w.weights, "masked": w.masked,
            "output": w.output, "captured": w.captured, "max_diff": w.max_diff,
            "scale": w.scale_label}
