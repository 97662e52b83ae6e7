"""Causal tracing (Meng et al. 2022, ROME): where does the model keep what it knows
about a subject?

The subject's token embeddings are corrupted with Gaussian noise (``noise`` x the
embedding matrix's standard deviation: 3 by default, ``samples`` draws, seeded);
the answer's probability drops. Then, one (token, layer) at a time, the clean
run's state is restored (the residual stream after the layer, or the layer's
attention or MLP output at that token) in every noisy sample, and the answer's
probability, averaged over the samples, says how much of it that state alone
brings back. ``values`` are those probabilities over the clean one (1: all of it).

The restored runs go through ``activation_patching.run_cells``: ``samples`` noisy
rows per cell, many cells per forward pass. The answer is read where patching
reads it (``Reading``: the last position, a mask's, or an encoder-decoder's
decoder after its ``target``); an encoder-decoder's subject is in its source,
so the noise and the restored states are its encoder's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from tui_lab.core.analysis.patching.activation_patching import (
    AT_THE_END,
    Cancelled,
    Cell,
    Progress,
    Reading,
    run_cells,
)
from tui_lab.core.analysis.patching.patch_pair import PatchError
from tui_lab.core.analysis.patching.patch_rows import stack_layers, stacks
from tui_lab.core.model.models import EmbeddingsAndHead, EncoderDecoder
from tui_lab.core.tasks.tokenized import TokenVocab

if TYPE_CHECKING:
    from tui_lab.core.opening.model_in_hand import ModelInHand

KINDS = {"resid": "hook_resid_post", "attn": "hook_attn_out", "mlp": "hook_mlp_out"}


@dataclass
class TraceResult:
    """The answer's probability with each (token, layer) restored, per kind (rows:
    tokens, cols: layers); ``values`` over the clean probability."""

    tokens: list[str]
    subject: tuple[int, int]
    answer: str
    clean: float
    corrupt: float
    noise: float
    samples: int
    layers: list[str]
    probs: dict[str, list[list[float]]] = field(default_factory=dict)
    values: dict[str, list[list[float]]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "tokens": self.tokens, "rows": self.tokens, "cols": self.layers,
            "subject": list(self.subject), "answer": self.answer, "clean": self.clean,
            "corrupt": self.corrupt, "noise": self.noise, "samples": self.samples,
            "probs": self.probs, "values": self.values,
        }


def subject_span(model: ModelInHand, ids: list[int], subject: str) -> tuple[int, int]:
    """[start, end) of ``subject``'s tokens in ``ids`` (its last occurrence);
    PatchError when the input does not hold them."""
    vocab = model.task.vocab
    bos = vocab.tokenizer.bos_id if isinstance(vocab, TokenVocab) else None
    tried = []
    for text in (subject, " " + subject.strip(), subject.strip()):
        sub = list(vocab.encode(text)) if text else []
        if len(sub) > 1 and bos is not None and sub[0] == bos:
            sub = sub[1:]
        tried.append(sub)
        for start in range(len(ids) - len(sub), -1, -1):
            if sub and ids[start : start + len(sub)] == sub:
                return start, start + len(sub)
    raise PatchError(f"the subject {subject!r} is not among the input's tokens")


def embedding_std(model: ModelInHand) -> float:
    """The standard deviation of the input's token embeddings as the blocks see them
    (scaled; an encoder-decoder's source embeddings)."""
    lab = model.model
    if not isinstance(lab, EmbeddingsAndHead):
        raise PatchError("causal tracing reads the embeddings of a model the lab builds or opens")
    table = lab.src_embed if isinstance(lab, EncoderDecoder) else lab.tgt_embed
    return float(table.weight.detach().float().std()) * float(lab.embed_scale)


def causal_trace(
    model: ModelInHand,
    ids: Tensor,
    subject: tuple[int, int],
    answer: int,
    *,
    reading: Reading = AT_THE_END,
    noise: float = 3.0,
    samples: int = 10,
    seed: int = 0,
    kinds: tuple[str, ...] = ("resid", "attn", "mlp"),
    max_rows: int | None = None,
    progress: Progress | None = None,
    cancelled: Cancelled | None = None,
) -> TraceResult:
    """ROME's causal trace of ``ids`` (1, T): noise on the tokens ``subject`` [start,
    end), the clean state restored one (token, layer) at a time, for each kind."""
    start, end = subject
    if not 0 <= start < end <= ids.size(1):
        raise PatchError(f"subject tokens {start}..{end} lie outside the input's {ids.size(1)} tokens")
    if samples < 1:
        raise PatchError(f"samples must be at least 1, got {samples}")
    stack = stacks(model)[0]  # the one that reads the input
    embed = "hook_embed" if stack == "blocks" else f"{stack}.hook_embed"
    names, n = set(model.hook_names()), stack_layers(model, stack)
    kinds = tuple(k for k in kinds if f"{stack}.0.{KINDS[k]}" in names)
    hooks = [f"{stack}.{i}.{KINDS[k]}" for k in kinds for i in range(n)]
    with torch.no_grad():
        logits, clean = model.run_with_cache(ids, names=hooks, target=reading.target)
    p_clean = float(torch.softmax(logits[0, reading.position].float(), -1)[answer])
    gen = torch.Generator().manual_seed(seed)
    draws = torch.randn(samples, end - start, int(model.config.model.d_model), generator=gen)
    draws = (draws * noise * embedding_std(model)).to(model.device)

    def add_noise(x: Tensor, _name: str) -> Tensor:
        x = x.clone()
        # (samples, subject, d) per copy of the samples (an encoder-decoder's pass holds many)
        x[:, start:end] += draws.to(x.dtype).repeat(x.size(0) // samples, 1, 1)
        return x

    t = ids.size(1)
    cells = [Cell(i, f"{stack}.{i}.{KINDS[k]}", _restore(clean[f"{stack}.{i}.{KINDS[k]}"], p))
             for k in kinds for p in range(t) for i in range(n)]
    rows = Reading(reading.position, None if reading.target is None else reading.target.repeat(samples, 1))
    base, restored = run_cells(
        model, ids.repeat(samples, 1), cells, lambda last: torch.softmax(last.float(), -1)[:, answer],
        base_hooks=[(embed, add_noise)], reading=rows, max_rows=max_rows, progress=progress,
        cancelled=cancelled,
    )
    return _result(model, ids, subject, answer, (p_clean, float(base.mean())), (noise, samples),
                   kinds, restored.mean(1).view(len(kinds), t, n))


def _restore(act: Tensor, p: int) -> Callable[[Tensor], None]:
    def write(rows: Tensor) -> None:
        rows[:, p] = act[0, p]  # (samples, T, d)

    return write


def _result(model: ModelInHand, ids: Tensor, subject: tuple[int, int], answer: int, probs: tuple[float, float],
            noise: tuple[float, int], kinds: tuple[str, ...], mean: Tensor) -> TraceResult:
    """The trace's result: ``mean`` (kinds, T, layers) restored probabilities."""
    vocab = model.task.vocab
    p_clean = probs[0]
    result = TraceResult(
        [vocab.label(int(i)) for i in ids[0]], subject, vocab.label(answer), p_clean, probs[1],
        noise[0], noise[1], [f"L{i}" for i in range(mean.size(2))],
    )
    for j, k in enumerate(kinds):
        result.probs[k] = mean[j].tolist()
        result.values[k] = (mean[j] / p_clean if p_clean > 0 else torch.zeros_like(mean[j])).tolist()
    return result
