"""The encoder-only shape (BERT): one bidirectional stack, trained by filling masks.

``forward(tokens (B, T), token_types=None, attention_mask=None) -> logits (B, T, V)``.

Read top to bottom:

1. embeddings: the token's (times sqrt(d_model) when ``scale_embeddings``),
   plus a position's (learned, from ``position_offset`` on: RoBERTa's table
   starts past its padding index; or sinusoidal, or RoPE inside attention),
   plus a token type's (segment A/B, ``type_vocab_size`` > 0), then a
   LayerNorm over the sum where ``embed_norm`` says (BERT), then dropout;
2. ``n_encoder_layers`` ``TransformerBlock`` that attend both ways: the only
   mask hides padding keys (no causal triangle), pre- or post-LN as ``norm``
   says (BERT's blocks are post-LN), and a final norm for pre-LN stacks;
3. the MLM head: ``dense`` (d_model -> d_model), the activation, a LayerNorm
   (``mlm_head``; a bare ``BertModel`` has none), then the unembedding
   ``lm_head`` (tied to the token embedding when ``tie_embeddings``; BERT's
   has a bias: ``head_bias``).

Hook points, as a decoder-only model's (so capture, patching, ablation and
SAEs read it the same way): ``hook_embed``, ``hook_pos_embed``,
``hook_token_type_embed``, ``hook_full_embed`` (after the embedding norm),
``blocks.{L}.…`` per block (``attn.hook_pattern`` is (B, H, T, T) with no
triangle), ``ln_final.hook_normalized`` (pre-LN only) and
``mlm_head.hook_normalized`` (what the unembedding reads). The heads' lab
names are ``encoder.{L}.self``.

The model has no ``encode`` method: the lab's code asks ``hasattr(model,
"encode")`` to tell an encoder-decoder apart, and an encoder-only model, like a
decoder-only one, reads a single sequence.
"""

from __future__ import annotations

import torch
from torch import nn

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.config.shape import Shape
from tui_lab.core.model.attention import padding_mask
from tui_lab.core.model.hook_points import active_hooks, fire
from tui_lab.core.model.layers import _ACTIVATIONS, TransformerBlock, maybe_dropout
from tui_lab.core.model.models import (
    SHAPES,
    EmbeddingsAndHead,
    TokenEmbedding,
    _angles,
    _final_norm,
    _init_weights,
    _rope,
    _stack,
)
from tui_lab.core.model.positions import LearnedPositions, SinusoidalPositions


class BidirectionalStack(nn.Module):
    """``layers``: ``TransformerBlock`` attending both ways; ``norm``: the pre-LN final norm."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.rope = _rope(config)
        self.layers, self.norm = _stack(
            TransformerBlock, config.n_encoder_layers, config, self.rope, "encoder", "blocks."
        )

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """``x`` (B, T, d_model); ``mask`` (B, 1, 1, T), True at real tokens, or None."""
        angles = _angles(self.rope, 0, x.size(1))
        for layer in self.layers:
            x = layer(x, mask, is_causal=False, rope_angles=angles)
        return _final_norm(self.norm, "ln_final.hook_normalized", x)


class MLMHead(nn.Module):
    """BERT's prediction transform: ``norm(act(dense(x)))``, before the unembedding."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.d_model, config.d_model)
        self.act = _ACTIVATIONS[config.activation]
        self.norm = nn.LayerNorm(config.d_model, eps=config.norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fire(active_hooks(), "mlm_head.hook_normalized", self.norm(self.act(self.dense(x))))


class EncoderOnly(EmbeddingsAndHead):
    """BERT-style model: ``forward(tokens (B, T)) -> logits (B, T, V)``; see the module docstring.

    ``pad_id`` is the id whose positions are hidden from every query (the lab's
    PAD, BERT's ``[PAD]`` 0, RoBERTa's ``<pad>`` 1).
    """

    def __init__(self, config: ModelConfig, vocab_size: int, pad_id: int = 0) -> None:
        super().__init__(config, vocab_size, pad_id)
        d = config.d_model
        self.tgt_embed = TokenEmbedding(vocab_size, d)
        self.pos: SinusoidalPositions | LearnedPositions | None = None
        if config.positional == "learned":  # RoBERTa's table has position_offset rows more
            self.pos = LearnedPositions(config.max_len + config.position_offset, d)
        elif config.positional == "sinusoidal":
            self.pos = SinusoidalPositions(d, config.max_len, config.sinusoid_layout)
        self.type_embed = nn.Embedding(config.type_vocab_size, d) if config.type_vocab_size else None
        self.embed_norm = nn.LayerNorm(d, eps=config.norm_eps) if config.embed_norm else None
        self.encoder = BidirectionalStack(config)
        self.mlm = MLMHead(config) if config.mlm_head else None
        _init_weights(self)
        if self.type_embed is not None and not self.type_embed.weight.is_meta:
            nn.init.normal_(self.type_embed.weight, std=0.02)
        self.lm_head = self._head()

    @property
    def has_mlm_head(self) -> bool:
        """Whether the checkpoint had a masked-LM head (a bare ``BertModel`` has none)."""
        return self.mlm is not None

    def embed(self, tokens: torch.Tensor, token_types: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T) ids -> (B, T, d_model): token + position + type, the embedding norm, dropout."""
        hooks = active_hooks()
        x = self.tgt_embed(tokens)  # (B, T, d_model)
        if self.embed_scale != 1.0:
            x = x * self.embed_scale
        x = fire(hooks, "hook_embed", x)
        if self.pos is not None:
            offset = self.config.position_offset
            pos = self.pos.vectors(offset, x.size(1), x.dtype).expand_as(x)  # (B, T, d_model)
            x = x + fire(hooks, "hook_pos_embed", pos)
        if self.type_embed is not None:
            types = torch.zeros_like(tokens) if token_types is None else token_types  # (B, T)
            x = x + fire(hooks, "hook_token_type_embed", self.type_embed(types))
        if self.embed_norm is not None:
            x = self.embed_norm(x)
        x = fire(hooks, "hook_full_embed", x)
        return maybe_dropout(self.drop, x)

    def key_mask(self, tokens: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor | None:
        """(B, 1, 1, T) True at keys that may be attended (not padding), or None when all may.

        ``attention_mask`` (B, T), 1/True at real tokens, wins over the pad id (a
        tokenizer's mask); without it the pad id marks padding.
        """
        if attention_mask is not None:
            mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)
        else:
            mask = padding_mask(tokens, self.pad_id)
        if not torch.compiler.is_compiling() and bool(mask.all()):
            return None  # the fused kernel's fastest form
        return mask

    def hidden(
        self,
        tokens: torch.Tensor,
        token_types: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The stack's output (B, T, d_model), before the MLM head."""
        return self.encoder(self.embed(tokens, token_types), self.key_mask(tokens, attention_mask))

    def forward(
        self,
        tokens: torch.Tensor,
        token_types: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits (B, T, V) at every position (a masked position's are its fillers')."""
        x = self.hidden(tokens, token_types, attention_mask)
        if self.mlm is not None:
            x = self.mlm(x)
        return self.unembed(x)


def mlm_head_note(model: nn.Module) -> str | None:
    """One line when ``model`` cannot fill masks (an encoder-only model without an MLM head)."""
    if isinstance(model, EncoderOnly) and not model.has_mlm_head:
        return (
            "this checkpoint has no masked-LM head (a bare encoder): it cannot fill masks; "
            "open a *ForMaskedLM checkpoint"
        )
    return None



SHAPES[Shape.ENCODER_ONLY] = EncoderOnly  # build_model's dispatch (models.py cannot import this module)
