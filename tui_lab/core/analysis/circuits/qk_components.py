"""The residual stream at one position of one layer, split into named parts (for QK tracing).

With attention patterns and norm scales frozen (the local replacement model,
``replacement_model.py``), the residual stream entering layer ``l`` at position ``p``
is an exact sum of what wrote it there:

- the token embedding at ``p`` (a graph token node) and the position vector at ``p``;
- for each earlier layer: every active transcoder feature at ``p`` (activation x decoder
  row: a graph feature node), the transcoder's error at ``p`` (a graph error node), its
  decoder bias; at position 0 the whole MLP output (circuit-tracer never activates the
  start token, so the graph has no node there);
- each earlier attention head's output at ``p`` and the attention's output bias.

A transcoder's skip connection is linear in the stream it reads (the norm's scale
frozen), so it is no part of its own: each part carries its path through every later
skip (``carry``), as the graph's edges do; the skip's constant joins the decoder bias.

A head's output is itself linear in the earlier positions' streams under frozen
attention, so ``expand`` traces it back one hop: the head's output at ``p`` becomes
``pattern[p, j] * W_O W_V ln1_j(part)`` for every part of position ``j``'s stream
(named ``<part> via L<l>.H<h>``), plus the head's constant (value bias and the norm's
bias, weighted by the pattern's row). Heads further back are traced the same way when
``hops`` > 1; by default they stay whole (one hop is what a two-layer circuit needs, and
keeps the count of parts linear in the prompt's length; each further hop multiplies it by
about heads x positions).

Everything is float64, so the parts' sum matches the model's float32 stream to its own
rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from tui_lab.core.analysis.circuits.replacement_model import FrozenNorm, freeze_norm
from tui_lab.core.model.attention import MultiHeadAttention
from tui_lab.core.model.layers import TransformerBlock
from tui_lab.core.sae.transcoder import TranscoderSet

# kinds of part: graph nodes (token, feature, error), inputs and constants of the stream
GRAPH_KINDS = ("token", "feature", "error")
BIAS = "bias"


@dataclass(frozen=True)
class Part:
    """One named contribution to a residual stream: ``kind`` (token, position, feature,
    error, skip, mlp, head, bias), the layer that wrote it (-1: the embeddings), its
    position, its feature or token id (-1 otherwise), and ``route``: the heads (layer,
    head) that moved it from ``pos`` towards the position being read, earliest first."""

    kind: str
    layer: int
    pos: int
    id: int
    label: str
    route: tuple[tuple[int, int], ...] = ()

    @property
    def via(self) -> tuple[int, int] | None:
        """The head (layer, head) whose move brought it to the position read; None: it was written there."""
        return self.route[-1] if self.route else None

    @property
    def node_id(self) -> str:
        """circuit-tracer's node id for a graph node (feature ``L_F_P``, error ``0_L_P``,
        token ``E_T_P``), else a short name; ``@L.H`` appended for each head that moved it."""
        if self.kind == "feature":
            base = f"{self.layer}_{self.id}_{self.pos}"
        elif self.kind == "error":
            base = f"0_{self.layer}_{self.pos}"
        elif self.kind == "token":
            base = f"E_{self.id}_{self.pos}"
        else:
            base = self.label.replace(" ", "_")
        return base + "".join(f"@{layer}.{head}" for layer, head in self.route)

    def moved(self, layer: int, head: int) -> Part:
        """This part, moved by head ``layer.head`` to another position."""
        return Part(self.kind, self.layer, self.pos, self.id, f"{self.label} via L{layer}.H{head}",
                    (*self.route, (layer, head)))


@dataclass(frozen=True)
class Parts:
    """Parts and their vectors (n, d) in the residual stream (float64)."""

    parts: list[Part]
    vectors: Tensor

    def __add__(self, other: Parts) -> Parts:
        return Parts(self.parts + other.parts, torch.cat([self.vectors, other.vectors]))


@dataclass(frozen=True)
class Capture:
    """One prompt's forward pass, float64: token embeddings (T, d), each layer's
    ``resid_pre``, pattern (H, T, T), head outputs ``z`` (T, H, d_head), the transcoders'
    inputs and the MLPs' outputs (T, d); the token labels."""

    ids: list[int]
    labels: list[str]
    embed: Tensor
    resid_pre: list[Tensor]
    patterns: list[Tensor]
    z: list[Tensor]
    mlp_in: list[Tensor]
    mlp_out: list[Tensor]
    mlp_norm_in: list[Tensor]  # what each MLP's norm reads (resid_mid; resid_pre in a parallel block)
    norm2: list[nn.Module]
    parallel: bool
    scores: Tensor  # the traced layer's scores (H, T, T), as the model computed them


def ln1_linear(block: TransformerBlock, resid_pre: Tensor) -> FrozenNorm:
    """Layer ``block``'s attention input norm, its scale frozen on this prompt (float64)."""
    assert block.norm1 is not None  # pre-norm: checked by the caller
    return freeze_norm(block.norm1, resid_pre.double())


def norm_linear(norm: FrozenNorm, pos: int, x: Tensor) -> Tensor:
    """The frozen norm's linear part at ``pos`` applied to rows ``x`` (n, d)."""
    h = x - x.mean(-1, keepdim=True) if norm.centred else x
    return h * norm.scale[pos].double() * norm.weight.double()


def norm_bias(norm: FrozenNorm, d: int) -> Tensor:
    """The frozen norm's constant (its bias; zeros for RMSNorm), float64."""
    return torch.zeros(d, dtype=torch.float64) if norm.bias is None else norm.bias.double()


def _token_label(capture: Capture, pos: int) -> str:
    return f"tok {capture.labels[pos]!r}@{pos}"


def direct_parts(
    capture: Capture, blocks: list[TransformerBlock], transcoders: TranscoderSet, layer: int, pos: int
) -> Parts:
    """``resid_pre`` of ``layer`` at ``pos`` as the sum of what wrote it there (heads whole),
    each part carried through the later transcoders' skip connections (``carry``)."""
    tok = capture.embed[pos]
    parts = [Part("token", -1, pos, capture.ids[pos], _token_label(capture, pos)),
             Part("position", -1, pos, -1, f"pos@{pos}")]
    vectors = [tok, capture.resid_pre[0][pos] - tok]
    entries = [0, 0]  # the first layer whose skip connection each part passes through
    for lay in range(layer):
        attn = blocks[lay].self_attn
        assert isinstance(attn, MultiHeadAttention)
        w_o = attn.w_o.weight.detach().double()
        after_attn = lay + 1 if capture.parallel else lay  # a parallel block's MLP reads resid_pre
        for h in range(attn.n_heads):
            cols = slice(h * attn.d_head, (h + 1) * attn.d_head)
            parts.append(Part("head", lay, pos, h, f"L{lay}.H{h}@{pos}"))
            vectors.append(capture.z[lay][pos, h] @ w_o[:, cols].T)
            entries.append(after_attn)
        if attn.w_o.bias is not None:
            parts.append(Part(BIAS, lay, pos, -1, f"b_O L{lay}"))
            vectors.append(attn.w_o.bias.detach().double())
            entries.append(after_attn)
        mlp = _mlp_parts(capture, transcoders, lay, pos)
        parts += mlp.parts
        vectors += list(mlp.vectors)
        entries += [lay + 1] * len(mlp.parts)
    stacked = torch.stack(vectors)
    return Parts(parts, carry(capture, transcoders, stacked, torch.tensor(entries), layer, pos))


def mlp_norm(capture: Capture, transcoders: TranscoderSet, layer: int) -> FrozenNorm | None:
    """The frozen norm between the stream and layer ``layer``'s transcoder (None: it reads
    ``hook_resid_mid`` itself)."""
    if transcoders.feature_input_hook != "ln2.hook_normalized":
        return None
    return freeze_norm(capture.norm2[layer], capture.mlp_norm_in[layer])


def carry(capture: Capture, transcoders: TranscoderSet, vectors: Tensor, entries: Tensor, layer: int, pos: int) -> Tensor:
    """Each row of ``vectors`` carried from its entry layer up to ``layer`` at ``pos``: every
    skip connection it passes adds ``W_skip ln2(row)`` (linear: the norm's scale is frozen),
    as the graph's edges count paths through skips. Position 0 keeps its MLP outputs whole."""
    out = vectors.clone()
    if pos == 0:
        return out
    for lay in range(layer):
        skip = transcoders[lay].W_skip
        rows = entries <= lay
        if skip is None or not bool(rows.any()):
            continue
        norm = mlp_norm(capture, transcoders, lay)
        x = out[rows] if norm is None else norm_linear(norm, pos, out[rows])
        out[rows] = out[rows] + x @ skip.detach().double().T
    return out


def _mlp_parts(capture: Capture, transcoders: TranscoderSet, layer: int, pos: int) -> Parts:
    """Layer ``layer``'s MLP output at ``pos`` less its skip's share of the stream: features,
    error, decoder bias with the skip's constant (at position 0, the start token, the whole
    output: the graph activates nothing there)."""
    out = capture.mlp_out[layer][pos]
    if pos == 0:
        return Parts([Part("mlp", layer, 0, -1, f"MLP L{layer}@0")], out[None])
    tc = transcoders[layer]
    x = capture.mlp_in[layer][pos]
    with torch.no_grad():
        acts = tc.encode(x.float()[None])[0].double()  # which features fire: as the graph decides
    w_dec, b_dec = tc.W_dec.detach().double(), tc.b_dec.detach().double()
    skip = x @ tc.W_skip.detach().double().T if tc.W_skip is not None else torch.zeros_like(x)
    feats = acts.nonzero().flatten().tolist()
    rows = acts[feats, None] * w_dec[feats]
    error = out - rows.sum(0) - b_dec - skip
    norm = mlp_norm(capture, transcoders, layer)
    if tc.W_skip is not None and norm is not None:  # the skip of the norm's bias: a constant
        b_dec = b_dec + norm_bias(norm, x.numel()) @ tc.W_skip.detach().double().T
    parts = [Part("feature", layer, pos, f, f"L{layer}#{f}@{pos}") for f in feats]
    parts += [Part("error", layer, pos, -1, f"error L{layer}@{pos}"), Part(BIAS, layer, pos, -1, f"b_dec L{layer}")]
    return Parts(parts, torch.cat([rows, torch.stack([error, b_dec])]))


def expand(
    capture: Capture, blocks: list[TransformerBlock], transcoders: TranscoderSet, direct: Parts, layer: int, pos: int,
    hops: int = 1,
) -> Parts:
    """``direct`` (layer ``layer``'s stream at ``pos``) with each head's output traced back
    ``hops`` moves, each moved part carried up to ``layer`` like the head's output it replaces."""
    if hops < 1:
        return direct
    keep = [i for i, p in enumerate(direct.parts) if p.kind != "head"]
    out = Parts([direct.parts[i] for i in keep], direct.vectors[keep])
    for part in direct.parts:
        if part.kind == "head":
            moved = _moved(capture, blocks, transcoders, part.layer, part.id, pos, hops)
            entry = part.layer + 1 if capture.parallel else part.layer
            entries = torch.full((len(moved.parts),), entry)
            out = out + Parts(moved.parts, carry(capture, transcoders, moved.vectors, entries, layer, pos))
    return out


def _moved(
    capture: Capture, blocks: list[TransformerBlock], transcoders: TranscoderSet, layer: int, head: int, pos: int,
    hops: int,
) -> Parts:
    """Head ``layer.head``'s output at ``pos``: every part of each earlier position's stream
    (its own heads traced back ``hops - 1`` more moves) moved by the head's frozen pattern
    and OV, and the head's constant."""
    attn = blocks[layer].self_attn
    assert isinstance(attn, MultiHeadAttention)
    norm = ln1_linear(blocks[layer], capture.resid_pre[layer])
    kv = head // (attn.n_heads // attn.n_kv_heads)
    rows = slice(kv * attn.d_head, (kv + 1) * attn.d_head)
    w_v = attn.w_v.weight.detach().double()[rows]  # (d_head, d)
    w_o = attn.w_o.weight.detach().double()[:, head * attn.d_head: (head + 1) * attn.d_head]  # (d, d_head)
    ov = w_o @ w_v  # (d, d)
    weights = capture.patterns[layer][head, pos]
    parts: list[Part] = []
    vectors: list[Tensor] = []
    for j in range(pos + 1):
        if float(weights[j]) == 0.0:
            continue
        source = expand(capture, blocks, transcoders, direct_parts(capture, blocks, transcoders, layer, j), layer, j,
                        hops - 1)
        parts += [p.moved(layer, head) for p in source.parts]
        vectors.append(weights[j] * norm_linear(norm, j, source.vectors) @ ov.T)
    b_v = attn.w_v.bias.detach().double()[rows] if attn.w_v.bias is not None else torch.zeros(attn.d_head, dtype=torch.float64)
    constant = float(weights.sum()) * (w_o @ (w_v @ norm_bias(norm, w_v.size(1)) + b_v))
    parts.append(Part(BIAS, layer, pos, head, f"L{layer}.H{head} b_V+ln"))
    return Parts(parts, torch.cat([*vectors, constant[None]]))
