"""QK tracing: why a head attends from a query position to a key position, in graph nodes.

An attribution graph freezes attention (circuit-tracer's definition), so what made a head
attend where it did is a constant of the graph. QK tracing (Anthropic's "tracing attention
computation" follow-up; circuit-tracer's ``QKTracingResults``) opens it: the head's
pre-softmax score at (q, k) is bilinear in the residual streams at q and k,

    score = scale * (W_Q ln1_q(x_q) + b_q) . (W_K ln1_k(x_k) + b_k),

each norm's scale frozen, so with each stream split into named parts
(``qk_components``: tokens, positions, features, errors, skips, biases, and earlier heads'
outputs traced back one hop through their frozen patterns and OV) the score is a sum of
one term per (query part, key part). The constant sides (``b_q`` with the norm's bias,
``b_k`` likewise) are parts of kind ``bias``. All terms sum to the score the model
computes (``attn.hook_attn_scores``), to float rounding.

Refused in one line: rotary positions (they mix q and k by position), q/k norms, soft-capped
scores, a layer, head or position out of range, a key the query cannot see.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from tui_lab.core.analysis.circuits.qk_components import (
    BIAS,
    Capture,
    Part,
    Parts,
    direct_parts,
    expand,
    ln1_linear,
    norm_bias,
    norm_linear,
)
from tui_lab.core.analysis.circuits.replacement_model import check_replaceable, decoder_blocks
from tui_lab.core.errors import LabError
from tui_lab.core.model.attention import MultiHeadAttention
from tui_lab.core.model.layers import TransformerBlock
from tui_lab.core.opening.in_hand import ModelInHand
from tui_lab.core.sae.transcoder import TranscoderSet

TOP = 10  # pairs and marginals listed


class QKError(LabError):
    """A head, position or model QK tracing cannot decompose; one line."""


@dataclass(frozen=True)
class QKTracing:
    """Head ``layer.head``'s score at (``query``, ``key``): the query side's parts, the key
    side's, ``terms`` (n_q, n_k) with ``terms.sum() == score`` (to rounding), the score the
    model computed and the pattern's weight there."""

    layer: int
    head: int
    query: int
    key: int
    q_parts: list[Part]
    k_parts: list[Part]
    terms: Tensor
    score: float
    weight: float

    @property
    def total(self) -> float:
        """The terms' sum: the score, rebuilt."""
        return float(self.terms.sum())

    @property
    def constant(self) -> float:
        """The terms where both sides are constants (biases)."""
        q = torch.tensor([p.kind == BIAS for p in self.q_parts])
        k = torch.tensor([p.kind == BIAS for p in self.k_parts])
        return float(self.terms[q][:, k].sum())

    def q_marginals(self) -> Tensor:
        """Each query part's total over every key part (n_q,)."""
        return self.terms.sum(1)

    def k_marginals(self) -> Tensor:
        """Each key part's total over every query part (n_k,)."""
        return self.terms.sum(0)

    def top_pairs(self, n: int = TOP) -> list[tuple[Part, Part, float]]:
        """The ``n`` largest terms by size: (query part, key part, term)."""
        flat = self.terms.flatten()
        order = flat.abs().argsort(descending=True)[:n].tolist()
        cols = self.terms.size(1)
        return [(self.q_parts[i // cols], self.k_parts[i % cols], float(flat[i])) for i in order]

    def top_q(self, n: int = TOP) -> list[tuple[Part, float]]:
        """The ``n`` query parts whose marginals are largest by size."""
        return _top(self.q_parts, self.q_marginals(), n)

    def top_k(self, n: int = TOP) -> list[tuple[Part, float]]:
        """The ``n`` key parts whose marginals are largest by size."""
        return _top(self.k_parts, self.k_marginals(), n)


def _top(parts: list[Part], values: Tensor, n: int) -> list[tuple[Part, float]]:
    order = values.abs().argsort(descending=True)[:n].tolist()
    return [(parts[i], float(values[i])) for i in order]


def check_head(model: ModelInHand, layer: int, head: int, query: int, key: int, n_pos: int) -> MultiHeadAttention:
    """The head's attention module, after refusing what QK tracing cannot decompose."""
    blocks = decoder_blocks(model)
    if not 0 <= layer < len(blocks):
        raise QKError(f"layer {layer} out of range: the model has layers 0-{len(blocks) - 1}")
    attn = blocks[layer].self_attn
    assert isinstance(attn, MultiHeadAttention)
    if not 0 <= head < attn.n_heads:
        raise QKError(f"head {head} out of range: layer {layer} has heads 0-{attn.n_heads - 1}")
    if attn.rope is not None:
        raise QKError("QK tracing needs additive positions: this model's rotary positions mix q and k by position")
    if attn.q_norm is not None or attn.softcap is not None:
        raise QKError("QK tracing needs a bilinear score: this model normalises q and k or soft-caps the scores")
    for name, pos in (("query", query), ("key", key)):
        if not 0 <= pos < n_pos:
            raise QKError(f"{name} position {pos} out of range: the prompt has positions 0-{n_pos - 1}")
    if key > query:
        raise QKError(f"key position {key} comes after query position {query}: causal attention never looks ahead")
    return attn


MAX_MOVES = 200_000  # moved parts per side at most: each hop multiplies them by heads x positions


def check_hops(hops: int, layer: int, n_heads: int, n_pos: int) -> None:
    """Refuse a negative count of hops, or one whose moved parts would not fit in memory."""
    if hops < 0:
        raise QKError(f"hops {hops}: at least 0 (0 leaves earlier heads' outputs whole)")
    moves = 1
    for hop in range(min(hops, layer)):
        moves *= (layer - hop) * n_heads * n_pos
    if moves > MAX_MOVES:
        raise QKError(f"{hops} hops would trace about {moves:,} moved parts a side (at most {MAX_MOVES:,}): use fewer")


def capture(model: ModelInHand, ids: list[int], layer: int, transcoders: TranscoderSet) -> Capture:
    """The forward pass QK tracing reads, up to ``layer`` (float64)."""
    parallel = bool(model.config.model.parallel_residual)
    names = ["hook_embed", f"blocks.{layer}.attn.hook_attn_scores"]
    for lay in range(layer + 1):
        p = f"blocks.{lay}."
        names += [p + "hook_resid_pre", p + "attn.hook_pattern", p + "attn.hook_z",
                  transcoders.input_hook(lay), transcoders.output_hook(lay)]
        names += [] if parallel else [p + "hook_resid_mid"]
    names = list(dict.fromkeys(names))
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.tensor([ids], device=model.device), names)
    one = {name: value[0].detach().double().cpu() for name, value in cache.items()}
    vocab = model.task.vocab
    return Capture(
        ids=list(ids), labels=[vocab.label(i) for i in ids], embed=one["hook_embed"],
        resid_pre=[one[f"blocks.{lay}.hook_resid_pre"] for lay in range(layer + 1)],
        patterns=[one[f"blocks.{lay}.attn.hook_pattern"] for lay in range(layer + 1)],
        z=[one[f"blocks.{lay}.attn.hook_z"] for lay in range(layer + 1)],
        mlp_in=[one[transcoders.input_hook(lay)] for lay in range(layer + 1)],
        mlp_out=[one[transcoders.output_hook(lay)] for lay in range(layer + 1)],
        mlp_norm_in=[one[f"blocks.{lay}.hook_resid_{'pre' if parallel else 'mid'}"] for lay in range(layer + 1)],
        norm2=[_norm2(block) for block in decoder_blocks(model)[: layer + 1]], parallel=parallel,
        scores=one[f"blocks.{layer}.attn.hook_attn_scores"],
    )


def _norm2(block: TransformerBlock) -> nn.Module:
    assert block.norm2 is not None  # pre-norm blocks: checked replaceable
    return block.norm2


def _side(
    cap: Capture, blocks: list[TransformerBlock], transcoders: TranscoderSet, layer: int, pos: int,
    weight: Tensor, bias: Tensor | None, name: str, hops: int,
) -> tuple[list[Part], Tensor]:
    """One side's parts and their vectors in the head's q (or k) space (n, d_head): the
    stream's parts through the frozen norm and ``weight``; the constant last."""
    parts = expand(cap, blocks, transcoders, direct_parts(cap, blocks, transcoders, layer, pos), layer, pos, hops)
    norm = ln1_linear(blocks[layer], cap.resid_pre[layer])
    vectors = norm_linear(norm, pos, parts.vectors) @ weight.T
    constant = weight @ norm_bias(norm, weight.size(1)) + (bias if bias is not None else 0.0)
    side = Parts([*parts.parts, Part(BIAS, layer, pos, -1, f"b_{name}+ln L{layer}")], torch.cat([vectors, constant[None]]))
    return side.parts, side.vectors


def qk_trace(
    model: ModelInHand, text: str | list[int], transcoders: TranscoderSet, layer: int, head: int,
    query: int | None = None, key: int | None = None, hops: int = 1,
) -> QKTracing:
    """Head ``layer.head``'s score at (query, key) as a sum over pairs of parts. ``query``
    None: the last position; ``key`` None: where the head attends most from ``query``;
    ``hops``: how many moves back earlier heads' outputs are traced (0: left whole)."""
    ids = model.to_tokens(text)[0].tolist() if isinstance(text, str) else [int(i) for i in text]
    check_replaceable(model, transcoders)
    query = len(ids) - 1 if query is None else query
    attn = check_head(model, layer, head, query, 0 if key is None else key, len(ids))
    check_hops(hops, layer, attn.n_heads, len(ids))
    blocks = decoder_blocks(model)
    cap = capture(model, ids, layer, transcoders)
    if key is None:
        key = int(cap.patterns[layer][head, query, : query + 1].argmax())
    score = float(cap.scores[head, query, key])
    if not math.isfinite(score):
        raise QKError(f"head L{layer}.H{head} cannot see key {key} from query {query} (masked)")
    kv = head // (attn.n_heads // attn.n_kv_heads)
    d = attn.d_head
    w_q = attn.w_q.weight.detach().double()[head * d: (head + 1) * d]
    w_k = attn.w_k.weight.detach().double()[kv * d: (kv + 1) * d]
    b_q = attn.w_q.bias.detach().double()[head * d: (head + 1) * d] if attn.w_q.bias is not None else None
    b_k = attn.w_k.bias.detach().double()[kv * d: (kv + 1) * d] if attn.w_k.bias is not None else None
    q_parts, q_vecs = _side(cap, blocks, transcoders, layer, query, w_q, b_q, "q", hops)
    k_parts, k_vecs = _side(cap, blocks, transcoders, layer, key, w_k, b_k, "k", hops)
    scale = attn.score_scale if attn.score_scale is not None else 1.0 / math.sqrt(d)
    terms = scale * q_vecs @ k_vecs.T
    return QKTracing(layer, head, query, key, q_parts, k_parts, terms, score,
                     float(cap.patterns[layer][head, query, key]))
