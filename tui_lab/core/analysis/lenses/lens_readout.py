"""Reading every layer through a lens: the logit lens, a tuned lens or a Jacobian lens.

A lens is a map per layer from that layer's output (``hook_resid_post``) into the last
layer's residual basis (``translate``); the readout then goes through the model's own
final norm and head (``logit_lens.lens_logits``). The logit lens is the identity map.
Every lens reads the last layer as it is, so its row is the model's own output.

Per layer the readout reports, beside each step's top tokens, how far the layer's
distribution is from the output's: ``kl`` = mean over steps of KL(output || layer) in
nats, ``agreement`` = the fraction of steps whose top-1 token is the output's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import torch
from torch import Tensor, nn

from tui_lab.core.analysis.lenses.lens_data import LensBatch, in_hand, lab_module
from tui_lab.core.analysis.lenses.logit_lens import (
    LensCell,
    LensTable,
    decode_streams,
    layer_streams,
    lens_logits,
)
from tui_lab.core.eval_mode import evaluating

if TYPE_CHECKING:
    from tui_lab.core.decoding.decode import DecodeResult
    from tui_lab.core.opening.in_hand import ModelInHand
    from tui_lab.core.tasks.protocol import Task

KINDS = ("logit", "tuned", "jacobian")


class Lens(Protocol):
    """A map per layer into the last layer's residual basis."""

    @property
    def kind(self) -> str:
        """``logit``, ``tuned`` or ``jacobian``."""
        ...

    def translate(self, layer: int, stream: Tensor) -> Tensor:
        """Layer ``layer``'s output (..., d_model) in the last layer's basis (..., d_model)."""
        ...


class LogitLensMap:
    """The logit lens as a ``Lens``: every layer read as it is."""

    kind = "logit"

    def translate(self, layer: int, stream: Tensor) -> Tensor:
        """``stream`` itself."""
        return stream


@dataclass(frozen=True)
class LayerScore:
    """One layer against the output: mean KL(output || layer) in nats and top-1 agreement."""

    layer: str
    kl: float
    agreement: float


@dataclass
class LensReadout:
    """A lens over one decode: ``table`` (each layer's top token per step, as the logit
    lens's table), ``top`` (per layer, per step, the ``top_k`` (token, probability)),
    ``scores`` (per layer KL to the output and top-1 agreement)."""

    kind: str
    input: str
    output: str
    table: LensTable
    top: list[list[list[tuple[str, float]]]]
    scores: list[LayerScore]

    def to_json(self) -> dict[str, object]:
        """``lens``, ``input``, ``output``, ``steps`` and per layer its top tokens, KL and agreement."""
        layers = [
            {"layer": s.layer, "kl": round(s.kl, 6), "agreement": round(s.agreement, 6),
             "top": [[{"token": t, "prob": round(p, 6)} for t, p in step] for step in top]}
            for s, top in zip(self.scores, self.top, strict=True)
        ]
        return {"lens": self.kind, "input": self.input, "output": self.output,
                "steps": self.table.steps, "layers": layers}


def kl_and_agreement(output_logits: Tensor, layer_logits: Tensor) -> tuple[Tensor, Tensor]:
    """Per position (...): KL(output || layer) in nats and whether the top-1 tokens agree."""
    out_logp = output_logits.float().log_softmax(dim=-1)
    layer_logp = layer_logits.float().log_softmax(dim=-1)
    kl = (out_logp.exp() * (out_logp - layer_logp)).sum(dim=-1)
    agree = output_logits.argmax(dim=-1) == layer_logits.argmax(dim=-1)
    return kl, agree


def layer_logits(model: nn.Module, lens: Lens, streams: list[Tensor]) -> list[Tensor]:
    """Each layer's logits (..., V) through ``lens``; the last layer's is the output's."""
    last = len(streams) - 1
    return [lens_logits(model, s if i == last else lens.translate(i, s)) for i, s in enumerate(streams)]


@torch.no_grad()
def readout_of_decode(model: nn.Module, task: Task, result: DecodeResult, lens: Lens, top_k: int = 5) -> LensReadout:
    """``lens`` over ``result``'s decode (the positions that chose its tokens)."""
    logits = layer_logits(model, lens, decode_streams(model, task, result))  # L x (steps, V)
    vocab = task.vocab
    names = [f"decoder.{i}" for i in range(len(logits))]
    rows, top, scores = [], [], []
    for name, lg in zip(names, logits, strict=True):
        probs = lg.softmax(dim=-1)
        p, i = probs.topk(min(top_k, probs.size(-1)), dim=-1)  # (steps, k)
        top.append([[(vocab.label(int(t)), float(q)) for q, t in zip(ps, ts, strict=True)]
                    for ps, ts in zip(p, i, strict=True)])
        rows.append([LensCell(vocab.label(int(ts[0])), float(ps[0])) for ps, ts in zip(p, i, strict=True)])
        kl, agree = kl_and_agreement(logits[-1], lg)
        scores.append(LayerScore(name, float(kl.mean()), float(agree.float().mean())))
    table = LensTable(names, [s.token for s in result.steps], rows)
    return LensReadout(lens.kind, result.input, result.output, table, top, scores)


def lens_readout(model: ModelInHand | str | Path, text: str, lens: Lens | None = None, top_k: int = 5,
                 max_new: int | None = None) -> LensReadout:
    """``lens`` (None: the logit lens) over the greedy decode of ``text`` by the model in hand
    (or the one a source names): per layer, each step's top tokens, the KL to the output and
    the top-1 agreement."""
    from tui_lab.core.decoding.decode import generate

    model = in_hand(model)
    module = lab_module(model)
    with evaluating(module):
        result = generate(module, model.task, text, max_new_tokens=max_new, capture=False, report_k=1)
    return readout_of_decode(module, model.task, result, lens or LogitLensMap(), top_k)


def _forward_of(module: nn.Module, batch: LensBatch) -> Callable[[], Tensor]:
    """``batch``'s forward pass through ``module``, to run later (under ``layer_streams``'s hooks)."""
    return lambda: batch.forward(module)


@torch.no_grad()
def held_out_scores(model: ModelInHand, lens: Lens, batches: list[LensBatch]) -> list[LayerScore]:
    """Per layer, over every real position of ``batches``: mean KL(output || layer) and
    the top-1 agreement with the output."""
    module = lab_module(model)
    kl_sum: Tensor | None = None
    agree_sum: Tensor | None = None
    count = 0
    with evaluating(module):
        for batch in batches:
            streams = layer_streams(module, _forward_of(module, batch))
            logits = layer_logits(module, lens, [s[batch.mask] for s in streams])  # L x (N, V)
            pairs = [kl_and_agreement(logits[-1], lg) for lg in logits]
            kls = torch.stack([kl.sum() for kl, _ in pairs])
            agrees = torch.stack([a.float().sum() for _, a in pairs])
            kl_sum = kls if kl_sum is None else kl_sum + kls
            agree_sum = agrees if agree_sum is None else agree_sum + agrees
            count += int(batch.mask.sum())
    assert kl_sum is not None and agree_sum is not None
    return [LayerScore(f"decoder.{i}", float(k) / count, float(a) / count)
            for i, (k, a) in enumerate(zip(kl_sum, agree_sum, strict=True))]
