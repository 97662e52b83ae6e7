"""A forward pass of a decoder-only model in which every reader has an input of its own.

The model's own forward reads one residual stream per layer; to score or patch an
edge, each reader (a head's q, k or v input, an MLP's input, the logits) needs its
own copy of that stream, which can differ from the others' (patching) and whose
gradient is its own (attribution). This module re-runs the model's blocks
functionally, with the model's own modules and weights (the approach of
TransformerLens's ``use_split_qkv_input`` and EAP-IG's ``attribute.py``):

- a layer's 3H head readers get the residual repeated per head, (B, T, 3H, d);
  ``norm1`` is applied per copy and each head projects only its own copy with its
  slice of ``w_q``/``w_k``/``w_v`` (an einsum as cheap as the whole projection);
- each head's output is its ``z`` times its slice of ``w_o`` (B, T, H, d): a writer;
- a patch adds, to each reader's input, ``sum_w P[w, r] (source_w - current_w)``:
  with P 1 on an edge, the reader gets that writer's value from the other run
  instead of this run's (EAP-IG's faithfulness evaluation; exact edge patching).

Only the answer's position goes through the final norm and the unembedding.
The model's modules are only called, never changed, so this is safe beside other
users of the same model. Supported: pre-norm decoder-only models with input norms
and one key/value head per query head (TransformerLens 4.3 also refuses grouped
key/value heads at edge level); the rest is refused in one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from tui_lab.core.analysis.edges.component_graph import ComponentGraph, EdgeError
from tui_lab.core.analysis.patching.patch_pair import PatchPair, logit_diff
from tui_lab.core.model.attention import MultiHeadAttention, attend
from tui_lab.core.model.layers import TransformerBlock, maybe_dropout
from tui_lab.core.model.models import DecoderOnly


def decoder_of(net: nn.Module) -> DecoderOnly:
    """``net`` as a decoder-only model the edge forward can re-run; EdgeError in one line otherwise."""
    if not isinstance(net, DecoderOnly):
        raise EdgeError("edges are scored on decoder-only models (writers and readers of one residual stream)")
    c = net.config
    if c.norm != "pre" or not c.input_norms or c.output_norms:
        raise EdgeError("edges need pre-norm blocks with input norms (no norms on the sub-layers' outputs)")
    if c.n_kv_heads not in (None, c.n_heads):
        raise EdgeError("edges need one key/value head per query head (grouped key/value heads have none)")
    return net


def graph_of(net: nn.Module) -> ComponentGraph:
    """The component graph of a model the edge forward can run."""
    c = decoder_of(net).config
    return ComponentGraph(c.n_decoder_layers, c.n_heads, bool(c.d_ff), bool(c.parallel_residual))


@dataclass(frozen=True)
class EdgePatch:
    """Per row, which edges take the other run's writer values: ``source`` (1 or B, T, W, d)
    the writers' outputs of the other run, ``matrix`` (1 or B, W, R) the share taken."""

    source: Tensor
    matrix: Tensor


@dataclass
class EdgeRun:
    """A run's metric per row (B,), its writers' outputs (B, T, W, d) and, in reader
    order, the tensors that are the readers' inputs (their gradients are the readers')."""

    metric: Tensor
    writers: Tensor
    reader_inputs: list[Tensor] = field(default_factory=list)

    def reader_grads(self, grads: list[Tensor]) -> Tensor:
        """The gradients of ``reader_inputs`` as one (B, T, R, d) tensor."""
        return torch.cat([g if g.dim() == 4 else g.unsqueeze(2) for g in grads], dim=2)


class _Writers:
    """The writers' outputs so far, and the patch's deltas for the readers that follow."""

    def __init__(self, patch: EdgePatch | None) -> None:
        self.parts: list[Tensor] = []  # each (B, T, k, d)
        self.patch = patch

    def add(self, x: Tensor) -> None:
        self.parts.append(x if x.dim() == 4 else x.unsqueeze(2))

    def stacked(self) -> Tensor:
        return torch.cat(self.parts, dim=2)  # (B, T, W_so_far, d)

    def delta(self, readers: slice) -> Tensor | None:
        """(B, T, R_sel, d): what the patch adds to the inputs of ``readers``; None without one."""
        if self.patch is None:
            return None
        cur = self.stacked()
        n = cur.size(2)
        diff = self.patch.source[:, :, :n] - cur  # (B, T, n, d)
        return torch.einsum("btwd,bwr->btrd", diff, self.patch.matrix[:, :n, readers].to(diff.dtype))


def _project(attn: MultiHeadAttention, x: Tensor, linear: nn.Linear) -> Tensor:
    """Each head's own input (B, T, H, d) through its slice of ``linear``: (B, T, H * d_head)."""
    h, dh = attn.n_heads, attn.d_head
    out = torch.einsum("bthd,hed->bthe", x, linear.weight.view(h, dh, -1))  # (B, T, H, d_head)
    if linear.bias is not None:
        out = out + linear.bias.view(h, dh)
    return out.flatten(2)


def _heads(attn: MultiHeadAttention, normed: Tensor, t: int) -> Tensor:
    """The heads' outputs (B, T, H, d) from their q, k and v inputs ``normed`` (B, T, 3H, d)."""
    xq, xk, xv = normed.split(attn.n_heads, dim=2)
    q = attn.heads(_project(attn, xq, attn.w_q), attn.q_norm)  # (B, H, T, d_head)
    k = attn.heads(_project(attn, xk, attn.w_k), attn.k_norm)
    v = attn.split_heads(_project(attn, xv, attn.w_v))
    if attn.rope is not None:
        cos, sin = attn.rope.angles(0, t)
        q, k = attn.rope.rotate(q, cos, sin), attn.rope.rotate(k, cos, sin)
    mask, fused_causal = attn._mask(None, True, t, t, q.device)
    out, _ = attend(q, k, v, mask, is_causal=fused_causal, scale=attn.score_scale,
                    explicit=attn.softcap is not None, softcap=attn.softcap)
    z = out.transpose(1, 2)  # (B, T, H, d_head)
    w_o = attn.w_o.weight.view(-1, attn.n_heads, attn.d_head)  # (d, H, d_head)
    return torch.einsum("bthe,dhe->bthd", z, w_o)  # (B, T, H, d): each head's write


def _reader_input(x: Tensor, width: int, delta: Tensor | None) -> Tensor:
    """The residual ``x`` (B, T, d) as ``width`` readers' inputs (B, T, width, d), patched."""
    inputs = x.unsqueeze(2).expand(-1, -1, width, -1)
    return inputs if delta is None else inputs + delta


def _block(block: TransformerBlock, layer: int, x: Tensor, g: ComponentGraph, writers: _Writers,
           readers: list[Tensor]) -> Tensor:
    """One block over the residual ``x``: its readers' inputs kept, its writers added."""
    attn, h, t = block.self_attn, g.n_heads, x.size(1)
    start = g.head_reader(layer, 0, "q")
    heads_in = _reader_input(x, 3 * h, writers.delta(slice(start, start + 3 * h)))
    readers.append(heads_in)
    assert block.norm1 is not None  # decoder_of refused models without input norms
    outs = maybe_dropout(block.dropout, _heads(attn, block.norm1(heads_in), t))  # (B, T, H, d)
    attn_out = outs.sum(2) if attn.w_o.bias is None else outs.sum(2) + attn.w_o.bias
    mid = x if g.parallel else x + attn_out
    writers.add(outs)
    if block.ff is None:
        return x + attn_out
    r = g.mlp_reader(layer)
    delta = writers.delta(slice(r, r + 1))
    # A view of its own: with a parallel residual ``mid`` is ``x``, whose gradient is everyone's.
    mlp_in = mid.view_as(mid) if delta is None else mid + delta[:, :, 0]
    readers.append(mlp_in)
    assert block.norm2 is not None
    mlp_out = maybe_dropout(block.dropout, block.ff(block.norm2(mlp_in)))
    writers.add(mlp_out)
    return x + attn_out + mlp_out


def embed(net: DecoderOnly, ids: Tensor) -> Tensor:
    """The ``input`` writer: (B, T) ids -> (B, T, d) token embeddings, scaled, plus positions."""
    return net._embed(net.tgt_embed, ids, 0)


def edge_forward(net: DecoderOnly, g: ComponentGraph, inputs: Tensor, pair: PatchPair,
                 patch: EdgePatch | None = None) -> EdgeRun:
    """Run the model from its ``input`` writer ``inputs`` (B, T, d); ``patch``: edges that take
    the other run's writers. The metric is ``pair``'s logit difference at its position."""
    writers = _Writers(patch)
    writers.add(inputs)
    readers: list[Tensor] = []
    x = inputs
    for layer, block in enumerate(net.decoder.layers):
        assert isinstance(block, TransformerBlock)
        x = _block(block, layer, x, g, writers, readers)
    delta = writers.delta(slice(g.logits_reader, g.logits_reader + 1))
    final_in = x.view_as(x) if delta is None else x + delta[:, :, 0]
    readers.append(final_in)
    at = final_in[:, pair.position]  # (B, d): only the answer's position is unembedded
    normed = at if net.decoder.norm is None else net.decoder.norm(at)
    logits = net.unembed(normed).unsqueeze(1)  # (B, 1, V)
    return EdgeRun(logit_diff(logits, pair.answer, pair.wrong), writers.stacked(), readers)
