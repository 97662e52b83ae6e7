"""Fill-mask decoding: an encoder-only model's answer to text with masks in it.

``fill_mask(model, task, text, top_k)`` reads the text once and gives, for
each mask in text order, its ``position`` (token index), the ``top`` k fillers
with their probabilities and the same as token ids; then it fills the masks
one at a time, the most confident first, re-reading the text after each fill
(so a later mask sees the earlier choices), and keeps every step.

The mask is typed as the model's tokenizer writes it: ``[MASK]`` (BERT,
DistilBERT), ``<mask>`` (RoBERTa), or ``_`` for the lab's own models (each
``_`` is one masked character). Text without a mask is refused in one line
that says how to write one; a checkpoint without an MLM head, in one line
that says it cannot fill masks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from tui_lab.core.decoding.decode import DecodeInputError, clean_input
from tui_lab.core.eval_mode import evaluating
from tui_lab.core.model.capture import capture_attention
from tui_lab.core.model.encoder_only import EncoderOnly, mlm_head_note
from tui_lab.core.tasks.masked_lm import MASK_CHAR, MaskedText
from tui_lab.core.tasks.protocol import Task


@dataclass
class MaskFill:
    """One mask: its token index and its k most likely fillers (pieces and ids)."""

    position: int
    top: list[tuple[str, float]]
    ids: list[tuple[int, float]]


@dataclass
class FillStep:
    """One fill: the mask at ``position`` took ``token`` (``id``) with ``prob``; ``text`` after it."""

    position: int
    token: str
    id: int
    prob: float
    text: str


@dataclass
class FillMaskResult:
    input: str
    output: str  # the text with every mask filled
    tokens: list[int]  # the ids read (masks included)
    masks: list[MaskFill]
    steps: list[FillStep]
    labels: list[str]  # one label per token (the attention axes)
    attention: dict[str, Tensor] = field(default_factory=dict)  # name -> (H, T, T)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "output": self.output,
            "tokens": self.tokens,
            "labels": self.labels,
            "masks": [
                {
                    "position": m.position,
                    "top": [[t, round(p, 6)] for t, p in m.top],
                    "ids": [[i, round(p, 6)] for i, p in m.ids],
                }
                for m in self.masks
            ],
            "steps": [
                {"position": s.position, "token": s.token, "id": s.id, "prob": round(s.prob, 6), "text": s.text}
                for s in self.steps
            ],
            "notes": self.notes,
        }


def mask_token(task: Task) -> str:
    """How a mask is typed for ``task``'s model (``[MASK]``, ``<mask>``, or ``_``)."""
    return task.mask_token if isinstance(task, MaskedText) else MASK_CHAR


def is_fill_mask(model: nn.Module) -> bool:
    """Whether ``model`` decodes by filling masks (an encoder-only model)."""
    return isinstance(model, EncoderOnly)


def encode_masked(task: Any, text: str) -> list[int]:
    """The ids of ``text`` with each typed mask as the mask id; one line if none or if refused."""
    token = mask_token(task)
    if token not in text:
        raise DecodeInputError(f"no mask in the input: write {token} where a token should be filled, "
                               f"e.g. {_example(task)!r}")
    if token == MASK_CHAR:  # the lab's own model: every _ is one masked character
        reason = task.validate_input(text)
        if reason is not None:
            raise DecodeInputError(reason)
        ids: list[int] = []
        for i, part in enumerate(text.split(MASK_CHAR)):
            if i:
                ids.append(task.mask_id)
            ids.extend(task.vocab.encode(part))
        return ids
    reason = task.validate_input(text)
    if reason is not None:
        raise DecodeInputError(reason)
    return list(task.vocab.encode(text))


def _example(task: Task) -> str:
    examples = task.examples_for_display(1)
    return examples[0] if examples else f"The cat sat on the {mask_token(task)}."


@torch.no_grad()
def attention_only(model: nn.Module, task: Any, text: str) -> FillMaskResult:
    """What an encoder without an MLM head can show of ``text``: its attention, read in one
    pass (masks typed in it kept as the mask token), no fillers, a note saying why."""
    text, notes = clean_input(text, task)
    ids = encode_masked(task, text) if mask_token(task) in text else list(task.vocab.encode(text))
    if not ids:
        raise DecodeInputError("empty input: type some text")
    device = next(model.parameters()).device
    with evaluating(model), capture_attention(model) as store:
        model(torch.tensor([ids], device=device))
    note = mlm_head_note(model) or ""
    return FillMaskResult(
        input=text, output=text, tokens=ids, masks=[], steps=[], labels=[task.vocab.label(i) for i in ids],
        attention={name: w[0] for name, w in store.matrices().items()},
        notes=[*notes, f"{note} (its attention is in Attention, 4)"],
    )


@torch.no_grad()
def fill_mask(model: nn.Module, task: Any, text: str, top_k: int = 5, capture: bool = False) -> FillMaskResult:
    """The fillers of every mask in ``text`` and the one-at-a-time fill; see the module docstring."""
    note = mlm_head_note(model)
    if note is not None:
        raise DecodeInputError(note)
    if top_k < 1:
        raise DecodeInputError(f"--top-k {top_k}: give at least 1")
    text, notes = clean_input(text, task)
    ids = encode_masked(task, text)
    mask_id = int(task.mask_id)
    device = next(model.parameters()).device
    tokens = torch.tensor([ids], device=device)  # (1, T)
    vocab = task.vocab
    with evaluating(model):
        with capture_attention(model) as store:
            logits = model(tokens) if capture else None
        if logits is None:
            logits = model(tokens)
        probs = torch.softmax(logits[0].float(), dim=-1)  # (T, V)
        positions = [i for i, t in enumerate(ids) if t == mask_id]
        k = min(top_k, probs.size(-1))
        masks = []
        for pos in positions:
            p, top = probs[pos].topk(k)
            pairs = list(zip(top.tolist(), p.tolist(), strict=True))
            masks.append(MaskFill(pos, [(vocab.label(i), q) for i, q in pairs], pairs))
        steps = []
        current, left = list(ids), list(positions)
        while left:
            best = probs[left].max(-1)  # each open mask's top filler
            j = int(best.values.argmax())
            pos, choice, prob = left.pop(j), int(best.indices[j]), float(best.values[j])
            current[pos] = choice
            steps.append(FillStep(pos, vocab.label(choice), choice, prob, _text(task, current)))
            if left:
                probs = torch.softmax(model(torch.tensor([current], device=device))[0].float(), dim=-1)
    attention = {name: w[0] for name, w in store.matrices().items()} if capture else {}
    return FillMaskResult(
        input=text, output=_text(task, current), tokens=ids, masks=masks, steps=steps,
        labels=[vocab.label(i) for i in ids], attention=attention, notes=notes,
    )


def _text(task: Any, ids: list[int]) -> str:
    """The text of ``ids``, a mask still open shown as it is typed."""
    if isinstance(task, MaskedText):  # a real model's: its tokenizer's pieces
        return task.fill_text(ids)
    mask_id = int(task.mask_id)
    return "".join(MASK_CHAR if i == mask_id else task.vocab.decode([i], stop_at_eos=False) for i in ids)
