"""The two Transformer blocks and the position-wise feed-forward network.

Each sub-layer (self-attention, cross-attention, feed-forward) sits in a
residual connection with a norm, in one of two arrangements:

- post-LN (the original paper, ``norm: post``): ``x = norm(x + sublayer(x))``;
- pre-LN (GPT-2 and most modern models, ``norm: pre``):
  ``x = x + sublayer(norm(x))``, which trains stably without a long warmup but
  needs a final norm after the last layer (the models add it).

Dropout is applied to each sub-layer's output before it is added back, as in
the paper.

``activation: relu2`` is the speedrun's ReLU squared; ``zero_init_proj`` starts
every block's output projections at zero (``Block.zero_output_projections``,
called by the model after its init).

``d_ff = 0`` builds an attention-only block: no feed-forward sub-layer and no
norm for it (``ff`` is None). Attention-only models are the setting in which
induction heads were first described (Olsson et al. 2022).

A block takes the model's ``ModelConfig``; beyond the sizes it reads the
options real checkpoints need: RMSNorm (Llama) instead of LayerNorm, a gated
feed-forward, the parallel residual of GPT-NeoX (``x + attn(norm1(x)) +
ff(norm2(x))``: both read the same input), grouped-query attention, a score
scale, a local window and bias switches.

Hook points, under the block's ``hook_prefix`` (``blocks.0.``, ``encoder.1.``):
``hook_resid_pre``, ``ln1.hook_normalized``, ``hook_attn_out``,
``hook_resid_mid`` (not with a parallel residual or without a feed-forward),
``ln2.hook_normalized``, ``hook_mlp_out``, ``hook_resid_post`` (the block's
output), and the attention's and feed-forward's own. The cross-attention block
adds ``hook_cross_attn_out`` and ``hook_resid_mid_cross`` and names its norms
``ln1`` (self), ``ln2`` (cross) and ``ln3`` (feed-forward), as TransformerLens's
encoder-decoder blocks do. In a post-LN block a norm's output is the residual
stream itself, so ``hook_resid_mid`` and ``hook_resid_post`` come after it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.model.attention import KVCache, MultiHeadAttention
from tui_lab.core.model.hook_points import active_hooks
from tui_lab.core.model.norms import make_norm, make_qk_norm
from tui_lab.core.model.positions import RotaryEmbedding

RopeAngles = tuple[torch.Tensor, torch.Tensor]  # RotaryEmbedding.angles(offset, T)


def maybe_dropout(dropout: nn.Dropout, x: torch.Tensor) -> torch.Tensor:
    """``dropout(x)``, skipping the call where it would return ``x`` unchanged.

    In eval mode, or with p = 0, ``nn.Dropout`` still costs a module call and a
    dispatched op; a decoded token passes 13 of them in a 4-layer model.
    """
    return dropout(x) if dropout.training and dropout.p > 0 else x


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")  # GPT-2's gelu_new


def _relu_squared(x: torch.Tensor) -> torch.Tensor:
    return F.relu(x).square()  # the speedrun's MLP (Primer's squared ReLU)


_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,  # exact (erf)
    "gelu_tanh": _gelu_tanh,
    "silu": F.silu,
    "relu2": _relu_squared,
}


def make_attention(
    config: ModelConfig, rope: RotaryEmbedding | None, window: int = 0
) -> MultiHeadAttention:
    """A block's attention with the config's heads, biases, scale, q/k norms and soft-cap,
    and this layer's window."""
    c = config
    return MultiHeadAttention(
        c.d_model, c.n_heads, c.dropout, rope=rope, n_kv_heads=c.n_kv_heads, qkv_bias=c.qkv_bias,
        out_bias=c.out_bias, score_scale=c.score_scale, window=window, head_dim=c.head_dim,
        qk_norm=c.qk_norm, norm=lambda width: make_qk_norm(c, width), softcap=c.attn_softcap,
    )


class FeedForward(nn.Module):
    """``lin2(dropout(act(lin1(x))))``: the same two-layer MLP at every position.

    ``gated``: ``lin2(dropout(act(gate(x)) * lin1(x)))`` (Llama's gate, up and
    down projections are ``gate``, ``lin1`` and ``lin2``).

    Hook points under ``hook_prefix`` (``blocks.0.mlp.``): ``hook_pre`` (the
    activation's input: ``gate(x)`` when gated, else ``lin1(x)``),
    ``hook_pre_linear`` (gated: ``lin1(x)``) and ``hook_post`` (what ``lin2``
    reads), each (B, T, d_ff).
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str = "relu",
        gated: bool = False,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(_ACTIVATIONS)}, got {activation!r}")
        self.lin1 = nn.Linear(d_model, d_ff, bias=bias)
        self.lin2 = nn.Linear(d_ff, d_model, bias=bias)
        self.gate = nn.Linear(d_model, d_ff, bias=bias) if gated else None
        self.dropout = nn.Dropout(dropout)
        self.act = _ACTIVATIONS[activation]
        self.hook_prefix = "mlp."

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hooks = active_hooks()
        if hooks is None:
            h = self.act(self.gate(x)) * self.lin1(x) if self.gate is not None else self.act(self.lin1(x))
            return self.lin2(maybe_dropout(self.dropout, h))  # (B, T, d_model)
        p = self.hook_prefix
        if self.gate is not None:
            pre = hooks.fire(p + "hook_pre", self.gate(x))  # (B, T, d_ff)
            h = self.act(pre) * hooks.fire(p + "hook_pre_linear", self.lin1(x))
        else:
            h = self.act(hooks.fire(p + "hook_pre", self.lin1(x)))
        h = hooks.fire(p + "hook_post", h)
        return self.lin2(maybe_dropout(self.dropout, h))


def _feed_forward(config: ModelConfig) -> FeedForward | None:
    c = config
    if not c.d_ff:
        return None
    return FeedForward(c.d_model, c.d_ff, c.dropout, c.activation, c.gated_ff, c.ff_bias)


class Block(nn.Module):
    """What both blocks share: their hook names. ``hook_prefix`` (``blocks.0.``) names
    the block's own hook points, and its sub-layers' follow it (``attn.``,
    ``cross_attn.``, ``mlp.``)."""

    self_attn: MultiHeadAttention
    ff: FeedForward | None
    _prefix: str = ""

    def zero_output_projections(self) -> None:
        """``model.zero_init_proj``: the weights that write into the residual stream
        (every attention's ``w_o``, the MLP's down projection ``lin2``) set to zero, so
        the block starts as the identity; their inputs' weights keep their init, so
        gradients still reach both sides from the first step."""
        outs = [self.self_attn.w_o] + ([self.cross_attn.w_o] if isinstance(self, CrossAttentionBlock) else [])
        outs += [self.ff.lin2] if self.ff is not None else []
        for linear in outs:
            if not linear.weight.is_meta:
                nn.init.zeros_(linear.weight)

    @property
    def hook_prefix(self) -> str:
        return self._prefix

    @hook_prefix.setter
    def hook_prefix(self, prefix: str) -> None:
        self._prefix = prefix
        self.self_attn.hook_prefix = prefix + "attn."
        if isinstance(self, CrossAttentionBlock):
            self.cross_attn.hook_prefix = prefix + "cross_attn."
        if self.ff is not None:
            self.ff.hook_prefix = prefix + "mlp."


class TransformerBlock(Block):
    """Self-attention, then feed-forward (``norm1``, ``norm2``).

    An encoder's layer (bidirectional, with the source's padding mask) and a
    decoder-only model's block (``is_causal=True``: each position sees only the
    past) are this same block; only the mask differs. ``output_norms``: each
    sub-layer's output is normed before it is added (``norm1_post``,
    ``norm2_post``: Gemma 2's four norms a layer); without ``input_norms``
    (OLMo-2) those are the only ones.
    """

    def __init__(
        self, config: ModelConfig, rope: RotaryEmbedding | None = None, window: int = 0
    ) -> None:
        super().__init__()
        self.norm_first = config.norm == "pre"
        self.parallel = config.parallel_residual  # the config allows it with pre-norm only
        self.self_attn = make_attention(config, rope, window)
        self.ff = _feed_forward(config)
        self.norm1 = make_norm(config) if config.input_norms else None
        self.norm2 = make_norm(config) if config.d_ff and config.input_norms else None
        self.norm1_post = make_norm(config) if config.output_norms else None
        self.norm2_post = make_norm(config) if config.d_ff and config.output_norms else None
        self.dropout = nn.Dropout(config.dropout)
        self.hook_prefix = ""

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        is_causal: bool = False,
        cache: KVCache | None = None,
        rope_angles: RopeAngles | None = None,
    ) -> torch.Tensor:
        """``x`` (B, T, d_model); ``mask`` broadcastable to (B, H, T, T), True = may attend."""
        hooks, p, drop = active_hooks(), self._prefix, self.dropout

        def hooked(name: str, h: torch.Tensor) -> torch.Tensor:
            return h if hooks is None else hooks.fire(p + name, h)

        def normed(module: nn.Module | None, name: str, h: torch.Tensor) -> torch.Tensor:
            return h if module is None else hooked(name, module(h))

        def attention(h: torch.Tensor) -> torch.Tensor:
            a = self.self_attn(h, h, h, mask, is_causal=is_causal, cache=cache, rope_angles=rope_angles)[0]
            a = normed(self.norm1_post, "ln1_post.hook_normalized", a)
            return maybe_dropout(drop, hooked("hook_attn_out", a))

        def mlp(h: torch.Tensor) -> torch.Tensor:
            assert self.ff is not None
            m = normed(self.norm2_post, "ln2_post.hook_normalized", self.ff(h))
            return maybe_dropout(drop, hooked("hook_mlp_out", m))

        x = hooked("hook_resid_pre", x)
        if not self.norm_first:  # post-LN: the norm's output is the residual stream
            x = normed(self.norm1, "ln1.hook_normalized", x + attention(x))
            if self.ff is not None:
                x = hooked("hook_resid_mid", x)
                x = normed(self.norm2, "ln2.hook_normalized", x + mlp(x))
        elif self.parallel:  # attention and feed-forward both read the block's input
            out = x + attention(normed(self.norm1, "ln1.hook_normalized", x))
            x = out if self.ff is None else out + mlp(normed(self.norm2, "ln2.hook_normalized", x))
        else:
            x = x + attention(normed(self.norm1, "ln1.hook_normalized", x))
            if self.ff is not None:
                x = hooked("hook_resid_mid", x)
                x = x + mlp(normed(self.norm2, "ln2.hook_normalized", x))
        return hooked("hook_resid_post", x)


class CrossAttentionBlock(Block):
    """An encoder-decoder's decoder layer: causal self-attention, cross-attention to
    the encoder memory, feed-forward.

    Norms: ``norm1`` (self-attention), ``norm2`` (cross-attention), ``norm3``
    (feed-forward). The self-attention is always causal: position t never sees
    later target tokens, which is what lets one forward pass train every
    position at once (teacher forcing).
    """

    def __init__(
        self, config: ModelConfig, rope: RotaryEmbedding | None = None, window: int = 0
    ) -> None:
        super().__init__()
        self.norm_first = config.norm == "pre"
        self.self_attn = make_attention(config, rope, window)
        self.cross_attn = make_attention(config, None)  # reads the whole memory: no window
        self.ff = _feed_forward(config)
        self.norm1 = make_norm(config)
        self.norm2 = make_norm(config)
        self.norm3 = make_norm(config) if config.d_ff else None
        self.dropout = nn.Dropout(config.dropout)
        self.hook_prefix = ""

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        memory_mask: torch.Tensor | None = None,
        self_cache: KVCache | None = None,
        cross_cache: KVCache | None = None,
        rope_angles: RopeAngles | None = None,
    ) -> torch.Tensor:
        """``x`` (B, T, d_model), ``memory`` (B, S, d_model), ``memory_mask`` (B, 1, 1, S)."""
        hooks, p, drop = active_hooks(), self._prefix, self.dropout

        def hooked(name: str, h: torch.Tensor) -> torch.Tensor:
            return h if hooks is None else hooks.fire(p + name, h)

        def sublayers() -> list[tuple[nn.Module, str, Callable[[torch.Tensor], torch.Tensor], str]]:
            """(norm, its hook, sub-layer, the sub-layer's output hook), in order."""
            steps: list[tuple[nn.Module, str, Callable[[torch.Tensor], torch.Tensor], str]] = [
                (self.norm1, "ln1.hook_normalized", lambda h: self.self_attn(
                    h, h, h, is_causal=True, cache=self_cache, rope_angles=rope_angles)[0], "hook_attn_out"),
                (self.norm2, "ln2.hook_normalized", lambda h: self.cross_attn(
                    h, memory, memory, memory_mask, cache=cross_cache)[0], "hook_cross_attn_out"),
            ]
            if self.ff is not None and self.norm3 is not None:
                steps.append((self.norm3, "ln3.hook_normalized", self.ff, "hook_mlp_out"))
            return steps

        x = hooked("hook_resid_pre", x)
        steps = sublayers()
        # The residual stream between two sub-layers: after self-attention, after cross.
        mids = ("hook_resid_mid", "hook_resid_mid_cross")
        for i, (norm, norm_hook, sublayer, out_hook) in enumerate(steps):
            if self.norm_first:
                x = x + maybe_dropout(drop, hooked(out_hook, sublayer(hooked(norm_hook, norm(x)))))
            else:
                x = hooked(norm_hook, norm(x + maybe_dropout(drop, hooked(out_hook, sublayer(x)))))
            if i < len(steps) - 1:
                x = hooked(mids[i], x)
        return hooked("hook_resid_post", x)
