"""The two model kinds: an encoder-decoder (the paper's translation model) and a
decoder-only language model (GPT-style), both built from ``layers.py``. The third
shape, encoder-only (BERT), is ``encoder_only.py``, built from the pieces here;
``build_model`` builds all three.

Shared pieces, in the seed tutorials' order:

1. token embedding, multiplied by sqrt(d_model) so it is not drowned by the
   positional signal (embeddings start with std d_model^-0.5, so the product
   has unit scale); ``scale_embeddings: false`` leaves it as is (GPT-2, Llama...);
2. positions: sinusoidal or learned vectors added here, or RoPE applied to
   queries and keys inside every self-attention;
3. dropout, the layer stack, a final norm (pre-LN only: post-LN layers
   already end in a norm), LayerNorm or RMSNorm as ``norm_kind`` says;
4. ``lm_head``, a linear to vocabulary logits (bias-free unless ``head_bias``),
   tied to ``tgt_embed.weight`` when ``tie_embeddings``.

Masks: padding in ``src`` is hidden from encoder self-attention and from cross
attention; decoder self-attention is causal. Target padding needs no mask:
targets are padded at the end, and a causal query never sees later positions,
so real tokens never attend to padding (the loss ignores the pad positions).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from tui_lab.core.config.lab_config import LabConfig, ModelConfig, check_fits_in_memory
from tui_lab.core.config.shape import Shape
from tui_lab.core.model.attention import KVCache, MultiHeadAttention, padding_mask
from tui_lab.core.model.hook_points import active_hooks, fire
from tui_lab.core.model.layers import (
    Block,
    CrossAttentionBlock,
    RopeAngles,
    TransformerBlock,
    maybe_dropout,
)
from tui_lab.core.model.norms import make_norm
from tui_lab.core.model.positions import (
    LearnedPositions,
    RopeScaling,
    RotaryEmbedding,
    SinusoidalPositions,
)
from tui_lab.core.tasks.vocab import PAD

# arch -> the class of a shape built on this module's pieces in a module of its own
# (``encoder_only.py`` registers ``encoder-only`` when imported: the package does).
SHAPES: dict[Shape, Callable[[ModelConfig, int, int], nn.Module]] = {}


@dataclass
class DecoderCache:
    """Per-layer KV caches for incremental decoding.

    ``self_attn[i]`` grows by the new tokens each step; ``cross_attn[i]`` (empty
    for decoder-only models) holds the projected encoder memory, computed on
    the first step. ``length`` is how many target positions have been
    processed, so the next tokens' positions continue from there.
    """

    self_attn: list[KVCache] = field(default_factory=list)
    cross_attn: list[KVCache] = field(default_factory=list)

    @property
    def length(self) -> int:
        return self.self_attn[0].length if self.self_attn else 0

    def reset(self) -> None:
        for c in (*self.self_attn, *self.cross_attn):
            c.reset()

    def crop(self, length: int) -> None:
        """Forget every target position from ``length`` on (the encoder's memory stays)."""
        for c in self.self_attn:
            c.crop(length)


def _positions(config: ModelConfig) -> SinusoidalPositions | LearnedPositions | None:
    """The additive position module, or None for RoPE (applied inside attention)."""
    if config.positional == "sinusoidal":
        return SinusoidalPositions(config.d_model, config.max_len, config.sinusoid_layout)
    if config.positional == "learned":
        return LearnedPositions(config.max_len, config.d_model)
    return None


def _rope(config: ModelConfig, local: bool = False) -> RotaryEmbedding | None:
    """The rotary module every self-attention shares; ``local``: the windowed layers'
    own (Gemma 3's ``rope_local_base``), None where the config has none."""
    if config.positional != "rope" or (local and config.rope_local_base is None):
        return None
    c = config
    scaling = None
    if c.rope_scaling != "none" and not local:  # Gemma 3 scales its global layers only
        scaling = RopeScaling(
            c.rope_scaling, c.rope_factor, c.rope_low_freq_factor, c.rope_high_freq_factor, c.rope_original_max_len
        )
    base = c.rope_local_base if local and c.rope_local_base is not None else c.rope_base
    return RotaryEmbedding(c.d_head, base=base, max_len=c.max_len, fraction=c.rope_fraction, scaling=scaling)


class TokenEmbedding(nn.Embedding):
    """``nn.Embedding`` initialised N(0, d_model^-0.5): after the sqrt(d_model)
    scale the inputs have unit variance, and tied output logits start near unit
    scale. On the meta device initialisation is skipped (there is no data, and
    ``normal_`` on meta imports torch._dynamo: seconds on a first call)."""

    def reset_parameters(self) -> None:
        if not self.weight.is_meta:
            nn.init.normal_(self.weight, mean=0.0, std=self.embedding_dim**-0.5)


def _init_weights(model: nn.Module, config: ModelConfig | None = None) -> None:
    """Xavier-uniform linears with zero biases, as ``nn.Transformer`` does
    (PyTorch's default Linear init is scaled for ReLU stacks, not attention);
    then, with ``config.zero_init_proj``, every block's output projections at zero."""
    for module in model.modules():
        if isinstance(module, nn.Linear) and not module.weight.is_meta:
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
    if config is not None and config.zero_init_proj:
        for module in model.modules():
            if isinstance(module, Block):
                module.zero_output_projections()


def _stack(
    layer: type[TransformerBlock] | type[CrossAttentionBlock],
    count: int,
    config: ModelConfig,
    rope: RotaryEmbedding | None,
    name: str,
    hook_base: str,
    local_rope: RotaryEmbedding | None = None,
) -> tuple[nn.ModuleList, nn.Module | None]:
    """``count`` layers of one kind, and the final norm that pre-LN stacks need.

    Each attention gets the lab's name of its heads (``{name}.{i}.self``,
    ``{name}.{i}.cross``) and each block its hook prefix (``{hook_base}{i}.``).
    ``attention_windows`` belong to the decoder stack's layers; a windowed layer
    rotates with ``local_rope`` when there is one.
    """
    windows = config.attention_windows if name == "decoder" and config.attention_windows else (0,) * count
    layers = [layer(config, local_rope if w and local_rope is not None else rope, w) for w in windows]
    for i, block in enumerate(layers):
        block.hook_prefix = f"{hook_base}{i}."
        block.self_attn.lab_name = f"{name}.{i}.self"
        if isinstance(block, CrossAttentionBlock):
            block.cross_attn.lab_name = f"{name}.{i}.cross"
    return nn.ModuleList(layers), make_norm(config) if config.norm == "pre" else None


def _final_norm(norm: nn.Module | None, hook: str, x: torch.Tensor) -> torch.Tensor:
    """A pre-LN stack's final norm, through its hook point (post-LN stacks have none)."""
    if norm is None:
        return x
    return fire(active_hooks(), hook, norm(x))


def _angles(rope: RotaryEmbedding | None, offset: int, length: int) -> RopeAngles | None:
    """RoPE's cos/sin rows for this forward, taken once and shared by every layer."""
    return None if rope is None else rope.angles(offset, length)


class Encoder(nn.Module):
    """A stack of bidirectional ``TransformerBlock`` (``layers``) plus ``norm`` for pre-LN."""

    def __init__(self, config: ModelConfig, rope: RotaryEmbedding | None) -> None:
        super().__init__()
        self.layers, self.norm = _stack(
            TransformerBlock, config.n_encoder_layers, config, rope, "encoder", "encoder."
        )
        self.rope = rope  # shared with every self-attention; no parameters or saved state

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        angles = _angles(self.rope, 0, x.size(1))
        for layer in self.layers:
            x = layer(x, mask, rope_angles=angles)
        return _final_norm(self.norm, "encoder_final_ln.hook_normalized", x)


class Decoder(nn.Module):
    """A stack of ``CrossAttentionBlock`` plus ``norm`` for pre-LN."""

    def __init__(self, config: ModelConfig, rope: RotaryEmbedding | None) -> None:
        super().__init__()
        self.layers, self.norm = _stack(
            CrossAttentionBlock, config.n_decoder_layers, config, rope, "decoder", "decoder."
        )
        self.rope = rope

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        memory_mask: torch.Tensor | None = None,
        cache: DecoderCache | None = None,
    ) -> torch.Tensor:
        angles = _angles(self.rope, 0 if cache is None else cache.length, x.size(1))
        for i, layer in enumerate(self.layers):
            self_cache = cross_cache = None
            if cache is not None:
                self_cache, cross_cache = cache.self_attn[i], cache.cross_attn[i]
            x = layer(x, memory, memory_mask, self_cache, cross_cache, rope_angles=angles)
        return _final_norm(self.norm, "decoder_final_ln.hook_normalized", x)


class CausalDecoder(nn.Module):
    """GPT-style stack: ``TransformerBlock`` blocks with causal self-attention only.

    Its heads keep the lab's names ``decoder.{i}.self``; its hook points are
    TransformerLens's ``blocks.{i}.``.
    """

    def __init__(self, config: ModelConfig, rope: RotaryEmbedding | None) -> None:
        super().__init__()
        self.local_rope = _rope(config, local=True)
        self.layers, self.norm = _stack(
            TransformerBlock, config.n_decoder_layers, config, rope, "decoder", "blocks.", self.local_rope
        )
        self.rope = rope

    def forward(self, x: torch.Tensor, cache: DecoderCache | None = None) -> torch.Tensor:
        offset = 0 if cache is None else cache.length
        angles = _angles(self.rope, offset, x.size(1))
        local = _angles(self.local_rope, offset, x.size(1))
        for i, layer in enumerate(self.layers):
            layer_cache = None if cache is None else cache.self_attn[i]
            mine = local if local is not None and layer.self_attn.rope is self.local_rope else angles  # type: ignore[union-attr]
            x = layer(x, is_causal=True, cache=layer_cache, rope_angles=mine)
        return _final_norm(self.norm, "ln_final.hook_normalized", x)


class EmbeddingsAndHead(nn.Module):
    """What both model kinds share around their stacks: token embeddings,
    positions and the output head."""

    tgt_embed: nn.Embedding
    lm_head: nn.Linear
    pos: SinusoidalPositions | LearnedPositions | None

    def __init__(self, config: ModelConfig, vocab_size: int, pad_id: int) -> None:
        super().__init__()
        self.config = config
        self.vocab_size = vocab_size
        self.pad_id = pad_id
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embeddings else 1.0
        self.drop = nn.Dropout(config.dropout)

    def _embed(
        self, embedding: nn.Embedding, tokens: torch.Tensor, offset: int, hook_base: str = ""
    ) -> torch.Tensor:
        """(B, T) ids -> (B, T, d_model): scaled embedding + positions, then dropout.

        Hook points ``{hook_base}hook_embed`` (the scaled token embeddings) and
        ``{hook_base}hook_pos_embed`` (the position vectors added to them, (B, T, d_model)).
        """
        x = embedding(tokens)  # (B, T, d_model)
        if self.embed_scale != 1.0:
            x = x * self.embed_scale
        hooks = active_hooks()
        if hooks is not None:
            x = hooks.fire(hook_base + "hook_embed", x)
            if self.pos is not None:
                pos = self.pos.vectors(offset, x.size(1), x.dtype).expand_as(x)  # (B, T, d_model)
                x = x + hooks.fire(hook_base + "hook_pos_embed", pos)
        elif self.pos is not None:
            x = self.pos(x, offset)
        return maybe_dropout(self.drop, x)

    def unembed(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of a final residual stream: the head, then the soft-cap where the config
        has one (Gemma 2: ``c * tanh(logits / c)``)."""
        logits = self.lm_head(x)
        cap = self.config.logit_softcap
        return logits if cap is None else torch.tanh(logits / cap) * cap

    def _head(self) -> nn.Linear:
        # head_bias: Marian's final_logits_bias; the lab's own heads have none.
        head = nn.Linear(self.config.d_model, self.vocab_size, bias=self.config.head_bias)
        if head.bias is not None and not head.bias.is_meta:
            nn.init.zeros_(head.bias)
        if self.config.tie_embeddings:
            head.weight = self.tgt_embed.weight
        elif not head.weight.is_meta:
            nn.init.xavier_uniform_(head.weight)
        return head


class EncoderDecoder(EmbeddingsAndHead):
    """The paper's model: ``forward(src (B,S), tgt (B,T)) -> logits (B,T,V)``."""

    def __init__(self, config: ModelConfig, vocab_size: int, pad_id: int = 0) -> None:
        super().__init__(config, vocab_size, pad_id)
        self.src_embed = TokenEmbedding(vocab_size, config.d_model)
        self.tgt_embed = (
            self.src_embed
            if config.share_embeddings
            else TokenEmbedding(vocab_size, config.d_model)
        )
        self.pos = _positions(config)
        rope = _rope(config)
        self.encoder = Encoder(config, rope)
        self.decoder = Decoder(config, rope)
        _init_weights(self, config)
        self.lm_head = self._head()

    def src_mask(self, src: torch.Tensor) -> torch.Tensor | None:
        """(B, 1, 1, S) True at real source tokens, or None when nothing is padded.

        None lets the fused kernel run without a mask (its fastest form); the
        check is skipped under ``torch.compile`` to avoid a graph break.
        """
        mask = padding_mask(src, self.pad_id)
        if not torch.compiler.is_compiling() and bool(mask.all()):
            return None
        return mask

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        """(B, S) ids -> memory (B, S, d_model)."""
        return self._encode(src, self.src_mask(src))

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        src: torch.Tensor,
        cache: DecoderCache | None = None,
    ) -> torch.Tensor:
        """Target ids (B, T) -> logits (B, T, V); with ``cache``, ``tgt`` holds only new tokens.

        ``src`` is only read for its padding, which cross attention must ignore.
        """
        return self._decode(tgt, memory, self.src_mask(src), cache)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        src_mask = self.src_mask(src)  # computed once for the encoder and cross attention
        return self._decode(tgt, self._encode(src, src_mask), src_mask, None)

    def _encode(self, src: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        return self.encoder(self._embed(self.src_embed, src, 0, "encoder."), src_mask)  # (B, S, d_model)

    def _decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        cache: DecoderCache | None,
    ) -> torch.Tensor:
        offset = 0 if cache is None else cache.length  # positions continue after the cache
        x = self._embed(self.tgt_embed, tgt, offset, "decoder.")
        x = self.decoder(x, memory, src_mask, cache)
        return self.unembed(x)  # (B, T, V)

    def new_cache(self) -> DecoderCache:
        n = len(self.decoder.layers)
        return DecoderCache(
            self_attn=[KVCache() for _ in range(n)],
            cross_attn=[KVCache(static=True) for _ in range(n)],
        )


class DecoderOnly(EmbeddingsAndHead):
    """GPT-style model: ``forward(tokens (B,T), cache=None) -> logits (B,T,V)``."""

    def __init__(self, config: ModelConfig, vocab_size: int, pad_id: int = 0) -> None:
        super().__init__(config, vocab_size, pad_id)
        self.tgt_embed = TokenEmbedding(vocab_size, config.d_model)
        self.pos = _positions(config)
        self.decoder = CausalDecoder(config, _rope(config))
        _init_weights(self, config)
        self.lm_head = self._head()

    def forward(
        self, tokens: torch.Tensor, cache: DecoderCache | None = None, last_only: bool = False
    ) -> torch.Tensor:
        """With ``cache``, ``tokens`` holds only the new tokens; positions continue.

        ``last_only``: logits of the last position only, (B, 1, V) (decoding reads no
        other): a prompt's other rows would cost a (T, d_model) x (d_model, V) matmul.
        """
        offset = 0 if cache is None else cache.length
        x = self.decoder(self._embed(self.tgt_embed, tokens, offset), cache)
        return self.unembed(x[:, -1:] if last_only else x)  # (B, T or 1, V)

    def new_cache(self) -> DecoderCache:
        return DecoderCache(self_attn=[KVCache() for _ in self.decoder.layers])


def build_model(config: ModelConfig, vocab_size: int | None = None, pad_id: int = 0) -> nn.Module:
    """The model ``config`` describes; ``config.vocab_size``, when set, wins.

    Works under ``with torch.device("meta"):`` (parameters get shapes but no
    storage), which is how the params report counts without allocating.
    """
    vocab = config.vocab_size or vocab_size
    if not vocab:
        raise ValueError("build_model needs a vocabulary size (config.vocab_size or vocab_size)")
    if config.shape is Shape.ENCODER_DECODER:
        return EncoderDecoder(config, vocab, pad_id)
    if config.shape in SHAPES:
        return SHAPES[config.shape](config, vocab, pad_id)
    return DecoderOnly(config, vocab, pad_id)


def build_run_model(
    config: LabConfig,
    vocab_size: int,
    device: torch.device | str = "cpu",
    factory: Callable[..., nn.Module] = build_model,
) -> nn.Module:
    """The model a run trains or loads, on ``device``: the one builder training,
    the lab's trainer process, ``eval`` and ``decode`` share.

    Refuses (ConfigError) a model whose training state would not fit in this
    machine's memory, checked here rather than on every config edit because
    the answer depends on the machine. ``train.fused_attention: false`` keeps
    attention on the explicit path (to compare it with the fused kernel).
    ``factory`` lets a benchmark build a reference model instead.
    """
    check_fits_in_memory(config.model, vocab_size)
    model = factory(config.model, vocab_size=vocab_size, pad_id=PAD)
    if not config.train.fused_attention:
        for module in model.modules():
            if isinstance(module, MultiHeadAttention):
                module.fused = False
    return model.to(device)
