"""Greedy (or sampled) decoding with a KV cache, for both model kinds.

`generate` decodes one typed input and returns everything the lab shows: the
output, the top-k next-token probabilities at each step and the attention
matrices of the decoded sequence with token labels. `batch_greedy` decodes
many inputs at once for evaluation. Without a cache every step re-runs the
whole sequence; the two give identical tokens (tests prove it).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

import torch
from torch import Tensor, nn

from tui_lab.core.config.shape import Shape
from tui_lab.core.decoding.sampling import check_sampling, pick
from tui_lab.core.errors import LabError
from tui_lab.core.eval_mode import evaluating
from tui_lab.core.model.capture import AttentionStore, capture_attention
from tui_lab.core.model.models import DecoderOnly, EncoderDecoder
from tui_lab.core.tasks.protocol import Task, Vocabulary
from tui_lab.core.tasks.vocab import BOS, EOS, SEP

if TYPE_CHECKING:
    from tui_lab.core.config.sections import ModelConfig


class DecodeInputError(LabError):
    """Typed input the model cannot take; the message says why and what is allowed."""


@dataclass
class StepTopK:
    """One decoding step: the chosen token and the k most likely candidates."""

    token: str
    prob: float
    top: list[tuple[str, float]]
    # Whether each ``top`` entry survived the sampling cut (top-k/top-p; greedy
    # keeps only the argmax), and how many tokens of the vocabulary survived.
    kept: list[bool] = field(default_factory=list)
    n_kept: int = 0


@dataclass
class DecodeResult:
    input: str
    output: str
    tokens: list[int]
    steps: list[StepTopK]
    # name -> (H, Tq, Tk) weights, e.g. "decoder.0.cross"
    attention: dict[str, Tensor] = field(default_factory=dict)
    # name -> (query labels, key labels)
    labels: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    stopped: str = "eos"  # eos | max_len

    def to_json(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "output": self.output,
            "tokens": self.tokens,
            "stopped": self.stopped,
            "notes": self.notes,
            "steps": [
                {
                    "token": s.token,
                    "prob": round(s.prob, 6),
                    "top": [[t, round(p, 6)] for t, p in s.top],
                    "kept": s.kept,
                    "n_kept": s.n_kept,
                }
                for s in self.steps
            ],
        }


# Terminal escape sequences a paste can carry, each removed whole (not just its ESC byte,
# which would leave letters the user never saw): OSC (window title, hyperlink) ended by
# BEL or ST; DCS/SOS/PM/APC strings; CSI (colours, cursor moves); two-byte escapes (ESC c).
_ANSI = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b[ -/]*[0-~]"
)


class ModelFace(Protocol):
    """What decoding calls on a model beyond ``nn.Module``'s own methods.

    Decoding takes any module that answers these (duck typing): the lab's
    ``EncoderDecoder`` and ``DecoderOnly``, and bench's torch references. Only an
    encoder-decoder (``not is_decoder_only``) has ``encode`` and ``decode``.
    """

    config: ModelConfig

    def new_cache(self) -> Any: ...

    def encode(self, src: Tensor) -> Tensor: ...

    def decode(self, tgt: Tensor, memory: Tensor, src: Tensor, cache: Any = None) -> Tensor: ...


def face(model: nn.Module) -> ModelFace:
    """``model`` seen through ``ModelFace`` (nn.Module's types know no subclass methods)."""
    return cast("ModelFace", model)


def is_decoder_only(model: nn.Module) -> bool:
    # By the config's shape, not the class: bench's torch references (ModelFace) decode too.
    return not isinstance(model, EncoderDecoder) and face(model).config.shape is not Shape.ENCODER_DECODER


def max_positions(model: nn.Module) -> int:
    return int(face(model).config.max_len)


def clean_input(text: str, task: Task) -> tuple[str, list[str]]:
    """Check typed input against the task; strip control characters visibly.

    Returns the text to decode and notes about what was changed. Raises
    DecodeInputError with one line for input that cannot be used.
    """
    notes: list[str] = []
    # Terminal escape sequences (pasted colour codes) go whole, not just their ESC byte.
    kept = _ANSI.sub("", text)
    kept = "".join(
        ch for ch in kept if ch in "\n\t" or unicodedata.category(ch)[0] != "C"
    )
    if kept != text:
        notes.append(f"removed {len(text) - len(kept)} control/escape character(s)")
    real = not task.truncates_prompt  # a real model's text (tasks/tokenized.py)
    if task.is_lm:
        kept = kept if real else kept.replace("\t", " ")
    else:
        kept = kept.strip()
    if not kept:
        raise DecodeInputError("empty input: type something to decode" + _example_hint(task))
    vocab = task.vocab
    unknown = sorted(set(vocab.unknown_chars(kept)))
    if unknown:
        shown = " ".join(repr(c) for c in unknown[:8])
        raise DecodeInputError(
            f"characters outside the vocabulary: {shown}" + _example_hint(task)
        )
    if not task.is_lm or real:
        problem = task.validate_input(kept)
        if problem:
            raise DecodeInputError(problem + _example_hint(task))
    return kept, notes


def _example_hint(task: Task) -> str:
    try:
        examples = task.examples_for_display(2)
    except Exception:  # noqa: BLE001 - a hint must never hide the real message
        return ""
    return f" (e.g. {examples[0]!r})" if examples and not task.is_lm else ""


def generate(
    model: nn.Module,
    task: Task,
    text: str,
    *,
    max_new_tokens: int | None = None,
    use_cache: bool = True,
    temperature: float = 0.0,
    top_k: int = 0,
    top_p: float = 1.0,
    report_k: int = 5,
    capture: bool = True,
    seed: int = 0,
) -> DecodeResult:
    """Decode one input; greedy unless ``temperature`` > 0, then sampled after the
    ``top_k``/``top_p`` cuts (``sampling.py``) from a generator seeded with ``seed``.

    Decoding steps run on the fast path (fused attention, no weights kept).
    With ``capture`` the attention comes from explicit causal passes (each row
    the one its own step would have produced): a cached decoder-only model's
    prompt as it is read and its generated tokens at the end, else one pass over
    everything at the end (ARCHITECTURE.md, "Attention capture").
    """
    try:
        check_sampling(temperature, top_k, top_p)
    except LabError as exc:
        raise DecodeInputError(str(exc)) from None
    text, notes = clean_input(text, task)
    plan = _plan(model, task, text, max_new_tokens, notes)
    choice = _Choice(
        (temperature, top_k, top_p),
        torch.Generator(device="cpu").manual_seed(seed) if temperature > 0 else None,
        report_k,
    )
    store = AttentionStore() if capture else None
    with evaluating(model):
        out_ids, steps, stopped = _decode(model, task, plan, choice, use_cache, store)
    result = DecodeResult(text, task.vocab.decode(out_ids), out_ids, steps, notes=plan.notes, stopped=stopped)
    if store is not None:
        _attach_attention(result, store, task.vocab, plan.ids, plan.prompt, out_ids)
    return result


@dataclass
class _Plan:
    """What one decode reads: the input's ids, the prompt the decoder starts from, how
    many tokens it may add, what stops it and which ids it never emits."""

    ids: list[int]
    prompt: list[int]
    budget: int
    stop_id: int | None
    banned: list[int]
    notes: list[str]


@dataclass
class _Choice:
    """How each next token is picked (temperature, top-k, top-p) and how many are reported."""

    sampling: tuple[float, int, float]
    gen: torch.Generator | None
    report_k: int


def _plan(model: nn.Module, task: Task, text: str, max_new_tokens: int | None, notes: list[str]) -> _Plan:
    """The prompt for ``text`` and the room left after it; DecodeInputError when too long."""
    ids = task.vocab.encode(text)
    limit = max_positions(model)
    if is_decoder_only(model):
        prompt = ids if task.is_lm else [*ids, SEP]
        if task.is_lm and task.truncates_prompt and len(prompt) >= limit:
            prompt = prompt[-(limit // 2) :]
            notes.append(f"prompt truncated to its last {len(prompt)} characters")
        if len(prompt) >= limit:
            raise DecodeInputError(f"input too long: at most {limit - 2} characters")
        room = limit - len(prompt)
    else:
        if len(ids) > limit:
            raise DecodeInputError(f"input too long: at most {limit} characters")
        prompt = [task.decoder_start_id]  # a translator's own start id
        room = limit - 1
    budget = room if max_new_tokens is None else min(max_new_tokens, room)
    # What ends a continuation: the lab's EOS for its tasks; a real model's own
    # end-of-text id (a translator's too); nothing for the lab's language models
    # (they run to length). Ids a real translator never emits (its pad,
    # bad_words_ids) are set to -inf before every pick.
    return _Plan(ids, prompt, budget, task.eos_id, list(task.banned_ids), notes)


def _runner(model: nn.Module, src_ids: list[int], store: AttentionStore | None) -> Callable[[list[int], Any], Tensor]:
    """``run(tokens, cache)``: logits (1, T, V) for ``tokens`` (only the new ones when
    cached); the lab's decoder-only model gives the last position's alone. An
    encoder-decoder's encoder runs here, once, its self-attention captured as it does."""
    device = next(model.parameters()).device
    lab = face(model)
    src = torch.tensor([src_ids], device=device)  # (1, S)
    memory: Tensor | None = None
    if not is_decoder_only(model):
        with capture_attention(model, store) if store is not None else nullcontext():
            memory = lab.encode(src)

    def run(tokens: list[int], cache: Any) -> Tensor:
        x = torch.tensor([tokens], device=device)  # (1, T)
        if isinstance(model, DecoderOnly):
            return model(x, cache=cache, last_only=True)  # (1, 1, V)
        if memory is None:  # another decoder-only module (bench's torch reference)
            return model(x, cache=cache)
        return lab.decode(x, memory, src, cache=cache)

    return run


def _decode(
    model: nn.Module, task: Task, plan: _Plan, choice: _Choice, use_cache: bool, store: AttentionStore | None
) -> tuple[list[int], list[StepTopK], str]:
    """The decoding loop: (emitted ids, the steps' top-k, why it stopped).

    The steps run under inference_mode, not no_grad: no autograd bookkeeping
    (views, version counters) on any of the ~800 ops of a decoded token. Nothing
    made there outlives the call except the position tables, which are built
    outside it. Weights captured while decoding are cloned on the way out (an
    inference tensor cannot be changed in place or saved for backward anywhere
    else); the encoder's and an uncached decode's passes run under no_grad.
    """
    with torch.no_grad():
        run = _runner(model, plan.ids, store)
        with torch.inference_mode():
            cache = face(model).new_cache() if use_cache else None
            # A cached decoder-only model captures the prompt's rows as it reads
            # them: the pass at the end then covers only the generated tokens
            # (over a cache cut back to the prompt), not the prompt again.
            incremental = store is not None and cache is not None and is_decoder_only(model)
            with capture_attention(model, store) if incremental else nullcontext():
                logits = run(plan.prompt, cache)[:, -1]
            out_ids, steps, stopped = _pick_tokens(run, logits, cache, plan, choice, task.vocab, use_cache)
            if incremental and cache is not None and len(out_ids) > 1:
                cache.crop(len(plan.prompt))
                with capture_attention(model, store):
                    run(out_ids[:-1], cache)  # the last token is never fed back
        if store is not None and not incremental:
            with capture_attention(model, store):
                run([*plan.prompt, *out_ids[:-1]], None)  # the last token is never fed back
    return out_ids, steps, stopped


def _pick_tokens(
    run: Callable[[list[int], Any], Tensor],
    logits: Tensor,
    cache: Any,
    plan: _Plan,
    choice: _Choice,
    vocab: Vocabulary,
    use_cache: bool,
) -> tuple[list[int], list[StepTopK], str]:
    """Pick a token from ``logits``, feed it back, until the budget or the stop id."""
    steps: list[StepTopK] = []
    out_ids: list[int] = []
    while len(out_ids) < plan.budget:
        if plan.banned:
            logits[:, plan.banned] = float("-inf")
        nxt = _record(logits, choice.sampling, choice.gen, vocab, choice.report_k, steps)
        out_ids.append(nxt)
        if nxt == plan.stop_id:
            return out_ids, steps, "eos"
        if len(out_ids) < plan.budget:
            logits = run([nxt] if use_cache else [*plan.prompt, *out_ids], cache)[:, -1]
    return out_ids, steps, "max_len"


def _record(
    logits: Tensor,
    sampling: tuple[float, int, float],
    gen: torch.Generator | None,
    vocab: Vocabulary,
    report_k: int,
    steps: list[StepTopK],
) -> int:
    probs = logits[0].float().softmax(-1)  # (V,)
    chosen, keep = pick(logits, *sampling, gen=gen)
    nxt = int(chosen[0])
    k = min(report_k, probs.numel())
    vals, idx = probs.topk(k)
    top = [(vocab.label(int(i)), float(v)) for v, i in zip(vals, idx, strict=False)]
    kept = [bool(keep[0, int(i)]) for i in idx]
    steps.append(StepTopK(vocab.label(nxt), float(probs[nxt]), top, kept, int(keep[0].sum())))
    return nxt


def _attach_attention(
    result: DecodeResult,
    store: Any,
    vocab: Vocabulary,
    src_ids: list[int],
    prompt: list[int],
    out_ids: list[int],
) -> None:
    """Attention of the decoded sequence, with labels for both axes of every matrix."""
    lab = vocab.label
    # The last generated token is never fed back, so it has no query row.
    fed = [*prompt, *out_ids[:-1]] if out_ids else list(prompt)
    fed_labels = [lab(i) for i in fed]
    src_labels = [lab(i) for i in src_ids]
    for name, weights in store.matrices().items():
        w = weights[0].float().cpu()  # (H, Tq, Tk)
        if w.is_inference():  # captured while decoding: an ordinary tensor for the panes
            w = w.clone()
        if name.startswith("encoder"):
            labels = (src_labels, src_labels)
        elif name.endswith("cross"):
            labels = (fed_labels[: w.shape[1]], src_labels)
        else:
            labels = (fed_labels[: w.shape[1]], fed_labels[: w.shape[2]])
        result.attention[name] = w
        result.labels[name] = labels


@torch.inference_mode()  # see generate
def batch_greedy(
    model: nn.Module,
    task: Any,
    inputs: list[str],
    *,
    max_new_tokens: int,
    batch_size: int = 512,
) -> list[str]:
    """Greedy outputs for many inputs (evaluation); uses the KV cache.

    Decoder-only prompts are grouped by length so no left padding is needed.
    """
    vocab = task.vocab
    device = next(model.parameters()).device
    outputs: list[str | None] = [None] * len(inputs)
    with evaluating(model):
        encoded = [vocab.encode(t) for t in inputs]
        if is_decoder_only(model):
            groups: dict[int, list[int]] = {}
            for i, ids in enumerate(encoded):
                groups.setdefault(len(ids), []).append(i)
            chunks = [
                idx[j : j + batch_size] for idx in groups.values() for j in range(0, len(idx), batch_size)
            ]
        else:
            order = sorted(range(len(inputs)), key=lambda i: len(encoded[i]))
            chunks = [order[j : j + batch_size] for j in range(0, len(order), batch_size)]
        for chunk in chunks:
            rows = [encoded[i] for i in chunk]
            for i, ids in zip(chunk, _greedy_rows(model, rows, max_new_tokens, device), strict=False):
                outputs[i] = vocab.decode(ids)
    return [o or "" for o in outputs]


def _greedy_rows(model: nn.Module, rows: list[list[int]], max_new: int, device: torch.device) -> list[list[int]]:
    n = len(rows)
    lab = face(model)
    cache = lab.new_cache()
    if is_decoder_only(model):
        prompt = torch.tensor([[*r, SEP] for r in rows], device=device)  # (B, T)
        logits = model(prompt, cache=cache)[:, -1]
        step = lambda tok: model(tok, cache=cache)[:, -1]  # noqa: E731
    else:
        width = max(len(r) for r in rows)
        src = torch.zeros(n, width, dtype=torch.long, device=device)  # PAD = 0
        for i, r in enumerate(rows):
            src[i, : len(r)] = torch.tensor(r)
        memory = lab.encode(src)
        bos = torch.full((n, 1), BOS, dtype=torch.long, device=device)
        logits = lab.decode(bos, memory, src, cache=cache)[:, -1]
        step = lambda tok: lab.decode(tok, memory, src, cache=cache)[:, -1]  # noqa: E731
    out = torch.empty(n, 0, dtype=torch.long, device=device)
    done = torch.zeros(n, dtype=torch.bool, device=device)
    for i in range(max_new):
        nxt = logits.argmax(-1)  # (B,)
        out = torch.cat([out, nxt[:, None]], dim=1)
        done |= nxt == EOS
        if bool(done.all()) or i == max_new - 1:
            break
        logits = step(nxt[:, None])
    return out.tolist()
