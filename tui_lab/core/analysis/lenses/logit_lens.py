"""The logit lens: what each decoder layer would say if the model stopped there.

For every decoding step and every decoder layer, the residual stream leaving
that layer (its ``hook_resid_post``) is sent straight through the final norm and the output head
(``lm_head``); the most likely token and its probability are reported.

Normalisation: each layer's stream goes through the final norm module itself,
which computes that vector's *own* statistics afresh (LayerNorm's mean and
variance, RMSNorm's root mean square) before its learned scale and shift. Statistics cached from the last
layer's pass are never reused: they belong to a different vector, and reusing
them is a known way to get a wrong lens.

Post-LN models (``model.norm: post``) have no final norm: every layer already
ends in its own LayerNorm (``norm2``/``norm3``), so its output is a normalised
stream in the same form the head reads. The lens then applies ``lm_head``
directly to each layer's output, adding no norm of its own.

Either way the last layer's row is, by construction, the model's own output
distribution (tests check it to 1e-5).

An encoder-only model fills masks instead of decoding (``fill_lens``): each
encoder layer's stream at each mask, through the final norm (pre-LN) and the
MLM head (dense, activation, norm) to the unembedding; its columns are the
masks, in text order, read as the fill read them first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import torch
from torch import Tensor, nn

from tui_lab.core.decoding.decode import DecodeResult, max_positions
from tui_lab.core.decoding.fill_mask import FillMaskResult
from tui_lab.core.eval_mode import evaluating
from tui_lab.core.model.encoder_only import EncoderOnly
from tui_lab.core.model.hook_points import using_hooks
from tui_lab.core.model.layers import CrossAttentionBlock, TransformerBlock
from tui_lab.core.model.models import CausalDecoder, Decoder, DecoderOnly, EncoderDecoder
from tui_lab.core.tasks.protocol import Task
from tui_lab.core.tasks.vocab import BOS, SEP


@dataclass
class LensCell:
    token: str
    prob: float


@dataclass
class LensTable:
    """``rows[layer][step]``: the top token of layer ``layer`` at decoding step ``step``."""

    layers: list[str]  # "decoder.0", ...
    steps: list[str]  # the token actually emitted at each step
    rows: list[list[LensCell]] = field(default_factory=list)
    probs: Tensor | None = None  # (L, steps, V) full distributions, for tests and the lab

    def to_json(self) -> dict[str, object]:
        return {
            "layers": self.layers,
            "steps": self.steps,
            "rows": [[{"token": c.token, "prob": round(c.prob, 6)} for c in row] for row in self.rows],
        }


def _lab_model(model: nn.Module) -> EncoderDecoder | DecoderOnly:
    """``model``, which must be one of the lab's two kinds: the lens reads their stack and head."""
    if isinstance(model, (EncoderDecoder, DecoderOnly)):
        return model
    raise TypeError(f"the logit lens reads the lab's own models, not {type(model).__name__}")


def _stack(model: nn.Module) -> Decoder | CausalDecoder:
    return _lab_model(model).decoder


def resid_post_names(model: nn.Module) -> list[str]:
    """The hook name of every decoder layer's output (``hook_resid_post``), in layer order."""
    layers = cast("list[TransformerBlock | CrossAttentionBlock]", list(_stack(model).layers))
    return [layer.hook_prefix + "hook_resid_post" for layer in layers]


def layer_streams(model: nn.Module, run_forward: Callable[[], object]) -> list[Tensor]:
    """The output of every decoder layer (``hook_resid_post``) during ``run_forward()``,
    (B, T, d_model) each, in layer order."""
    names = resid_post_names(model)
    found: dict[str, Tensor] = {}
    with using_hooks([(name, lambda x, n: found.__setitem__(n, x.detach())) for name in names]):
        run_forward()
    return [found[name] for name in names]


def lens_logits(model: nn.Module, stream: Tensor) -> Tensor:
    """Next-token logits (..., V), float32, read from one layer's residual ``stream`` (..., d_model)."""
    norm = _stack(model).norm
    x = stream
    if norm is not None:
        # The final norm module itself, on this vector: LayerNorm's mean and variance
        # (RMSNorm's root mean square) are computed afresh from this layer's stream.
        x = norm(stream)
    lab = _lab_model(model)  # the head and, where the family has one, its logit soft-cap
    return lab.unembed(x.to(lab.lm_head.weight.dtype)).float()


def lens_probs(model: nn.Module, stream: Tensor) -> Tensor:
    """Next-token probabilities (..., V) read from one layer's residual ``stream`` (..., d_model)."""
    return lens_logits(model, stream).softmax(dim=-1)


def decode_streams(model: nn.Module, task: Task, result: DecodeResult) -> list[Tensor]:
    """Every decoder layer's stream (steps, d_model) at the positions whose outputs chose
    ``result``'s tokens: one teacher-forced pass over what the decode fed the model.

    Step s reads the decoder input (BOS + emitted tokens) at s for an encoder-decoder,
    the prompt's last position + s for a decoder-only model.
    """
    vocab = task.vocab
    device = next(model.parameters()).device
    ids = vocab.encode(result.input)
    fed_out = result.tokens[:-1]  # the last token is never fed back
    with evaluating(model):
        if _lab_model(model).config.shape.one_stack:
            prompt = ids if task.is_lm else [*ids, SEP]
            limit = max_positions(model)
            if task.is_lm and task.truncates_prompt and len(prompt) >= limit:
                prompt = prompt[-(limit // 2) :]  # as generate truncates
            tokens = torch.tensor([[*prompt, *fed_out]], device=device)
            streams = layer_streams(model, lambda: model(tokens))
            first = len(prompt) - 1
        else:
            src = torch.tensor([ids], device=device)
            tgt = torch.tensor([[BOS, *fed_out]], device=device)
            streams = layer_streams(model, lambda: model(src, tgt))
            first = 0
    n = len(result.tokens)
    return [s[0, first : first + n] for s in streams]


@torch.no_grad()
def logit_lens(model: nn.Module, task: Task, result: DecodeResult) -> LensTable:
    """The lens over ``result``'s decode: one teacher-forced pass over what it fed the model
    (``decode_streams``), each layer's stream read through the final norm and the head."""
    vocab = task.vocab
    probs = torch.stack([lens_probs(model, s) for s in decode_streams(model, task, result)])  # (L, n, V)
    best_p, best_i = probs.max(dim=-1)  # (L, n)
    rows = [
        [LensCell(vocab.label(int(i)), float(p)) for p, i in zip(best_p[layer], best_i[layer], strict=False)]
        for layer in range(probs.size(0))
    ]
    layers = [f"decoder.{i}" for i in range(probs.size(0))]
    return LensTable(layers, [s.token for s in result.steps], rows, probs)


@torch.no_grad()
def fill_lens(model: nn.Module, task: Task, result: FillMaskResult | DecodeResult) -> LensTable:
    """The lens of a fill-mask result: each encoder layer's top filler at each mask."""
    if not isinstance(model, EncoderOnly) or not model.has_mlm_head:
        raise TypeError("the fill-mask lens reads an encoder-only model with its MLM head")
    if not isinstance(result, FillMaskResult):
        raise TypeError("the fill-mask lens reads a fill-mask result, not a greedy decode")
    device = next(model.parameters()).device
    tokens = torch.tensor([result.tokens], device=device)
    layers = cast("list[TransformerBlock]", list(model.encoder.layers))
    names = [layer.hook_prefix + "hook_resid_post" for layer in layers]
    found: dict[str, Tensor] = {}
    masks = [m.position for m in result.masks]
    with evaluating(model), using_hooks([(n, lambda x, n: found.__setitem__(n, x.detach())) for n in names]):
        model(tokens)
        streams = [found[n][0, masks] for n in names]  # (masks, d_model) per layer
        probs = torch.stack([_fill_probs(model, x) for x in streams])  # (L, masks, V)
    best_p, best_i = probs.max(dim=-1)
    vocab = task.vocab
    rows = [[LensCell(vocab.label(int(i)), float(p)) for p, i in zip(best_p[layer], best_i[layer], strict=False)]
            for layer in range(probs.size(0))]
    steps = [f"_{k}@{pos}" for k, pos in enumerate(masks, start=1)]
    return LensTable([f"encoder.{i}" for i in range(len(layers))], steps, rows, probs)


def _fill_probs(model: EncoderOnly, stream: Tensor) -> Tensor:
    """Filler probabilities (..., V) read from one encoder layer's stream (..., d_model)."""
    assert model.mlm is not None  # fill_lens refuses a model without its MLM head
    x = stream if model.encoder.norm is None else model.encoder.norm(stream)
    x = model.mlm(x)
    return model.unembed(x.to(model.lm_head.weight.dtype)).float().softmax(dim=-1)
