"""The local replacement model: one prompt's forward pass, frozen into a linear system.

circuit-tracer's construction (Ameisen et al. 2025, "Circuit tracing"): each MLP is
replaced by its transcoder plus an error term (the MLP's true output less the
transcoder's), so the replacement's forward pass is the model's exactly; then the
attention patterns and every norm's scale are frozen at their values on this prompt.
What is left between the residual stream's writers (token embeddings, active
features' decoder rows, error vectors) and its readers (features' encoders, the
demeaned unembedding) is linear: attention moves vectors between positions with
fixed weights, a frozen norm is a fixed per-position linear map, a skip
connection is a matrix. A node's incoming edges are that linear map's transpose
applied to what the node reads, contracted with what each source writes.

This module computes the transpose by hand (no autograd): a batch of read vectors
goes down the layers once, and each layer's sources are scored on the way. Only
the layers and positions a batch can reach are visited (causal attention sends
nothing forward in position), which is where it saves over running autograd
through the whole model for every batch.

Supported: the lab's decoder-only pre-norm models (GPT-2, Llama-family,
GPT-NeoX's parallel residual) with transcoders reading ``ln2.hook_normalized`` or
``hook_resid_mid`` and writing ``hook_mlp_out``. Anything else is refused in one
line by ``check_replaceable``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from tui_lab.core.config.shape import Shape
from tui_lab.core.errors import LabError
from tui_lab.core.model.layers import TransformerBlock
from tui_lab.core.model.models import DecoderOnly
from tui_lab.core.opening.in_hand import ModelInHand
from tui_lab.core.sae.transcoder import TranscoderSet

INPUT_HOOKS = ("ln2.hook_normalized", "hook_resid_mid")
OUTPUT_HOOK = "hook_mlp_out"


class ReplacementError(LabError):
    """A model or transcoder set the local replacement model cannot be built from; one line."""


@dataclass(frozen=True)
class FrozenNorm:
    """A norm with its scale frozen per position: ``x -> centre?(x) * scale[t] * weight + bias``.

    ``scale`` (T, 1) is 1/std (LayerNorm) or 1/rms (RMSNorm) of this prompt's input;
    ``weight`` (d,) the norm's gain (Gemma's ``offset + w``); ``centred`` for LayerNorm.
    """

    scale: Tensor
    weight: Tensor
    bias: Tensor | None
    centred: bool

    def forward(self, x: Tensor) -> Tensor:
        """The frozen norm of ``x`` (..., T, d): affine in ``x``."""
        h = x - x.mean(-1, keepdim=True) if self.centred else x
        h = h * self.scale[: x.size(-2)] * self.weight
        return h if self.bias is None else h + self.bias

    def transpose(self, g: Tensor) -> Tensor:
        """What ``g`` (B, T', d) read at the norm's output reads at its input (T' <= T)."""
        h = g * self.scale[: g.size(-2)] * self.weight
        return h - h.mean(-1, keepdim=True) if self.centred else h


@dataclass(frozen=True)
class FrozenAttention:
    """One layer's attention with its pattern frozen: the OV circuit per head.

    ``pattern`` (H, T, T) query x key; ``w_v`` (H_kv * d_head, d) and ``w_o``
    (d, H * d_head) as ``nn.Linear`` stores them; heads share value heads in groups.
    """

    pattern: Tensor
    w_v: Tensor
    w_o: Tensor
    n_heads: int
    n_kv_heads: int
    d_head: int

    def transpose(self, g: Tensor) -> Tensor:
        """What ``g`` (B, T', d) read at the attention's output reads at its input."""
        b, t, _ = g.shape
        z = (g @ self.w_o).view(b, t, self.n_heads, self.d_head).transpose(1, 2)  # (B, H, T', d_head)
        v = self.pattern[:, :t, :t].transpose(-1, -2) @ z  # (B, H, T', d_head): keys now
        group = self.n_heads // self.n_kv_heads
        v = v.view(b, self.n_kv_heads, group, t, self.d_head).sum(2)  # (B, H_kv, T', d_head)
        return v.transpose(1, 2).reshape(b, t, -1) @ self.w_v  # (B, T', d)

    def forward(self, x: Tensor) -> Tensor:
        """The frozen attention's linear part (no biases) of ``x`` (T, d): for tests and
        interventions that replay the frozen system forward."""
        t = x.size(0)
        v = (x @ self.w_v.T).view(t, self.n_kv_heads, self.d_head).transpose(0, 1)  # (H_kv, T, d_head)
        v = v.repeat_interleave(self.n_heads // self.n_kv_heads, dim=0)  # (H, T, d_head)
        z = (self.pattern[:, :t, :t] @ v).transpose(0, 1).reshape(t, -1)  # (T, H * d_head)
        return z @ self.w_o.T


@dataclass(frozen=True)
class FrozenLayer:
    """A block of the replacement: frozen ``ln1``, attention, the MLP's input norm (None
    when the transcoder reads ``hook_resid_mid``), the skip matrix, and whether the MLP
    reads the block's input (parallel residual) rather than the residual after attention."""

    ln1: FrozenNorm
    attn: FrozenAttention
    ln2: FrozenNorm | None
    skip: Tensor | None
    parallel: bool

    def read_transpose(self, g: Tensor) -> Tensor:
        """What ``g`` read at the transcoder's input reads in the residual stream it comes from."""
        return g if self.ln2 is None else self.ln2.transpose(g)


def check_replaceable(model: ModelInHand, transcoders: TranscoderSet) -> None:
    """Refuse, in one line, a model or transcoder set the replacement cannot be exact for."""
    c = model.config.model
    if model.shape is not Shape.DECODER_ONLY:
        raise ReplacementError(f"attribution graphs need a decoder-only model; this one is {model.shape.value}")
    if c.norm != "pre" or not c.input_norms or c.output_norms:
        raise ReplacementError("attribution graphs need pre-norm blocks without output norms "
                               "(a post-LN, OLMo-2 or Gemma 2/3 block's norms are not bracketed)")
    if c.logit_softcap is not None:
        raise ReplacementError("attribution graphs need linear logits: this model soft-caps them")
    if not c.d_ff:
        raise ReplacementError("this model has no MLPs for transcoders to replace (attention-only)")
    n_layers = len(decoder_blocks(model))
    known = set(model.hook_names())
    for hook in (transcoders.feature_input_hook, transcoders.feature_output_hook):
        if f"blocks.0.{hook}" not in known:
            raise ReplacementError(f"the transcoder set names hook {hook!r}, which this model lacks (tfx-lab hooks lists them)")
    if len(transcoders) != n_layers:
        raise ReplacementError(f"the transcoder set has {len(transcoders)} layers; the model has {n_layers}")
    if transcoders.d_model != c.d_model:
        raise ReplacementError(f"the transcoders read d_model={transcoders.d_model}; the model's is {c.d_model}")
    if transcoders.feature_output_hook != OUTPUT_HOOK:
        raise ReplacementError(f"transcoders writing {transcoders.feature_output_hook!r} cannot replace "
                               f"an MLP exactly (they must write {OUTPUT_HOOK})")
    hook = transcoders.feature_input_hook
    if hook not in INPUT_HOOKS or (c.parallel_residual and hook == "hook_resid_mid"):
        raise ReplacementError(f"transcoders reading {hook!r} do not bracket this model's MLP "
                               f"(it reads {'ln2.hook_normalized' if c.parallel_residual else ' or '.join(INPUT_HOOKS)})")


def decoder_only(model: ModelInHand) -> DecoderOnly:
    """The model's ``DecoderOnly`` module (a decoder-only model in hand has one)."""
    module = model.model
    if not isinstance(module, DecoderOnly):
        raise ReplacementError(f"attribution graphs need a decoder-only model; this one is {model.shape.value}")
    return module


def decoder_blocks(model: ModelInHand) -> list[TransformerBlock]:
    """The decoder-only stack's blocks, in order (QK tracing reads their attention and norms too)."""
    blocks = [b for b in decoder_only(model).decoder.layers if isinstance(b, TransformerBlock)]
    assert len(blocks) == len(decoder_only(model).decoder.layers)
    return blocks


def final_norm(model: ModelInHand) -> nn.Module:
    """The pre-norm stack's final norm (``ln_final``)."""
    norm = decoder_only(model).decoder.norm
    assert isinstance(norm, nn.Module)
    return norm


def freeze_norm(norm: nn.Module, x: Tensor) -> FrozenNorm:
    """``norm`` with its scale frozen at its value on ``x`` (T, d)."""
    h = x.double()
    if isinstance(norm, nn.LayerNorm):
        scale = torch.rsqrt(h.var(-1, unbiased=False, keepdim=True) + norm.eps)
        return FrozenNorm(scale.to(x.dtype), norm.weight.detach(), None if norm.bias is None else norm.bias.detach(), True)
    eps = getattr(norm, "eps", None)
    eps = float(eps) if eps is not None else torch.finfo(x.dtype).eps
    scale = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps).to(x.dtype)
    gain = norm.weight
    assert isinstance(gain, Tensor)
    weight = gain.detach().float() + float(getattr(norm, "offset", 0.0))
    return FrozenNorm(scale, weight.to(x.dtype), None, False)


@dataclass(frozen=True)
class LocalReplacement:
    """One prompt's replacement model: the frozen layers, the final norm, the unembedding
    (V, d), what each source writes (``token_vectors`` (T, d): the scaled token
    embeddings), the transcoders' inputs and the MLPs' true outputs per layer (T, d),
    and the model's logits at the last position (V,)."""

    ids: list[int]
    layers: list[FrozenLayer]
    final: FrozenNorm
    unembed: Tensor
    token_vectors: Tensor
    inputs: list[Tensor]
    mlp_outputs: list[Tensor]
    logits: Tensor

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def n_pos(self) -> int:
        return len(self.ids)

    def pull_back(
        self, layers: Tensor, positions: Tensor, vectors: Tensor, on_output: LayerScorer
    ) -> Tensor:
        """Send a batch of read vectors down the frozen system, transposed.

        Row b reads ``vectors[b]`` (d,) at position ``positions[b]`` of layer
        ``layers[b]``'s transcoder input (``layers[b] == n_layers``: the final norm's
        output, where logits read); rows come sorted by layer, highest first.
        ``on_output(l, g)`` is called with what the rows read at layer l's output
        (n_l, T', d) before layer l's own reads join (a source there writes into
        that): the first n_l rows, those reading at layer l or above (the others read
        nothing there yet). Returns what each row reads at the token embeddings
        (B, T', d). T' = the batch's last position + 1: causal attention never
        carries a read to a later position.
        """
        if bool((layers[1:] > layers[:-1]).any()):
            raise ValueError("pull_back's rows must be sorted by layer, highest first")
        b, t = vectors.size(0), int(positions.max()) + 1
        top = int(layers[0])
        g = vectors.new_zeros(b, t, vectors.size(1))
        if top == self.n_layers:
            n = int((layers == top).sum())
            read = g[:n].clone()
            read[torch.arange(n), positions[:n]] = vectors[:n]
            g[:n] = self.final.transpose(read)
        for layer in range(min(top, self.n_layers - 1), -1, -1):
            n = int((layers >= layer).sum())  # a prefix: the rows reading here or above
            h = g[:n]
            on_output(layer, h)
            frozen = self.layers[layer]
            read = h @ frozen.skip if frozen.skip is not None else torch.zeros_like(h)
            at = torch.nonzero(layers[:n] == layer).flatten()
            if len(at):
                read[at, positions[at]] += vectors[at]
            into_mlp = frozen.read_transpose(read)
            if frozen.parallel:
                h = h + frozen.ln1.transpose(frozen.attn.transpose(h)) + into_mlp
            else:
                h = h + into_mlp
                h = h + frozen.ln1.transpose(frozen.attn.transpose(h))
            g[:n] = h
        return g


# (layer, what each row reads at that layer's output (B, T', d)) -> None
LayerScorer = Callable[[int, Tensor], None]


def _captured_names(n_layers: int, input_hook: str) -> list[str]:
    names = ["hook_embed"]
    for layer in range(n_layers):
        p = f"blocks.{layer}."
        names += [p + "hook_resid_pre", p + "attn.hook_pattern", p + input_hook, p + OUTPUT_HOOK, p + "hook_resid_post"]
        if input_hook == "ln2.hook_normalized" and f"{p}hook_resid_mid" not in names:
            names.append(p + "hook_resid_mid")
    return names


def build_replacement(model: ModelInHand, ids: list[int], transcoders: TranscoderSet) -> LocalReplacement:
    """The local replacement of ``model`` on ``ids``: one forward pass, its patterns and
    norm scales frozen (checked replaceable first)."""
    check_replaceable(model, transcoders)
    c = model.config.model
    blocks = decoder_blocks(model)
    names = [n for n in _captured_names(len(blocks), transcoders.feature_input_hook)
             if not (c.parallel_residual and n.endswith("hook_resid_mid"))]
    with torch.no_grad():
        logits, cache = model.run_with_cache(torch.tensor([ids], device=model.device), names)
    one = {name: value[0].float() for name, value in cache.items()}  # batch of one
    layers = [_frozen_layer(block, layer, one, transcoders) for layer, block in enumerate(blocks)]
    final = freeze_norm(final_norm(model), one[f"blocks.{len(blocks) - 1}.hook_resid_post"])
    head = decoder_only(model).lm_head.weight.detach().float()  # (V, d)
    return LocalReplacement(
        ids=list(ids), layers=layers, final=final, unembed=head, token_vectors=one["hook_embed"],
        inputs=[one[transcoders.input_hook(i)] for i in range(len(blocks))],
        mlp_outputs=[one[transcoders.output_hook(i)] for i in range(len(blocks))],
        logits=logits[0, -1].detach().float(),
    )


def _frozen_layer(block: TransformerBlock, layer: int, one: dict[str, Tensor], transcoders: TranscoderSet) -> FrozenLayer:
    p = f"blocks.{layer}."
    attn = block.self_attn
    parallel = bool(block.parallel)
    resid_pre = one[p + "hook_resid_pre"]
    ln2 = None
    assert block.norm1 is not None and block.norm2 is not None  # input norms: checked replaceable
    if transcoders.feature_input_hook == "ln2.hook_normalized":
        ln2 = freeze_norm(block.norm2, resid_pre if parallel else one[p + "hook_resid_mid"])
    tc = transcoders[layer]
    return FrozenLayer(
        ln1=freeze_norm(block.norm1, resid_pre),
        attn=FrozenAttention(
            one[p + "attn.hook_pattern"], attn.w_v.weight.detach().float(), attn.w_o.weight.detach().float(),
            attn.n_heads, attn.n_kv_heads, attn.d_head,
        ),
        ln2=ln2,
        skip=None if tc.W_skip is None else tc.W_skip.detach().float(),
        parallel=parallel,
    )
