"""Reference models built from ``torch.nn``'s own Transformer, with the lab's interface.

They wrap ``nn.Transformer`` (encoder-decoder) and ``nn.TransformerEncoder``
with a causal mask (decoder-only) in exactly the pieces the lab's models put
around their layer stacks: the same scaled token embedding (tied to the output
head), the same additive positions, the same bias-free output head. Only the
layer stacks differ, so a side-by-side run compares the lab's attention and
layers against PyTorch's.

They implement what ``TrainingRun`` and ``decode.batch_greedy``/``generate``
call: ``forward``, ``encode``, ``decode``, ``new_cache`` and ``.config``.
Their cache is a *recompute* cache: it only remembers the tokens fed so far and
every step re-runs the whole target (``nn.Transformer`` has no KV cache). That
makes the reference's greedy evaluation slower than the lab's; time-to-target
figures therefore also report training-only seconds, which exclude evaluation.

RoPE has no equivalent in ``nn.Transformer``: a config with
``positional: rope`` is refused (the benchmarks build both models with
sinusoidal positions when comparing speed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from tui_lab.core.config.lab_config import ModelConfig
from tui_lab.core.model.models import TokenEmbedding
from tui_lab.core.model.positions import LearnedPositions, SinusoidalPositions


@dataclass
class RecomputeCache:
    """Remembers the target tokens fed so far; each step recomputes all of them."""

    tokens: torch.Tensor | None = None  # (B, T)
    extra: dict = field(default_factory=dict)

    @property
    def length(self) -> int:
        return 0 if self.tokens is None else self.tokens.size(1)

    def extend(self, new: torch.Tensor) -> torch.Tensor:
        self.tokens = new if self.tokens is None else torch.cat((self.tokens, new), dim=1)
        return self.tokens

    def reset(self) -> None:
        self.tokens = None


def _positions(config: ModelConfig) -> nn.Module:
    if config.positional == "sinusoidal":
        return SinusoidalPositions(config.d_model, config.max_len)
    if config.positional == "learned":
        return LearnedPositions(config.max_len, config.d_model)
    raise ValueError("the torch.nn reference has no RoPE; use sinusoidal or learned positions")


class _RefBase(nn.Module):
    """Embedding, positions and tied head exactly as in ``tui_lab.core.model.models._Base``."""

    def __init__(self, config: ModelConfig, vocab_size: int, pad_id: int) -> None:
        super().__init__()
        self.config = config
        self.vocab_size = vocab_size
        self.pad_id = pad_id
        self.embed_scale = math.sqrt(config.d_model)
        self.tgt_embed = TokenEmbedding(vocab_size, config.d_model)
        self.pos = _positions(config)

    def _embed(self, embedding: nn.Embedding, tokens: torch.Tensor) -> torch.Tensor:
        return self.pos(embedding(tokens) * self.embed_scale, 0)  # (B, T, d_model)

    def _make_head(self) -> nn.Linear:
        head = nn.Linear(self.config.d_model, self.vocab_size, bias=False)
        if self.config.tie_embeddings:
            head.weight = self.tgt_embed.weight
        else:
            nn.init.xavier_uniform_(head.weight)
        return head


class TorchEncoderDecoder(_RefBase):
    """``nn.Transformer(batch_first=True)`` with the lab's embeddings and head."""

    def __init__(self, config: ModelConfig, vocab_size: int | None = None, pad_id: int = 0) -> None:
        vocab = config.vocab_size or vocab_size
        assert vocab, "vocab_size needed"
        super().__init__(config, vocab, pad_id)
        c = config
        self.src_embed = self.tgt_embed if c.share_embeddings else TokenEmbedding(vocab, c.d_model)
        self.transformer = nn.Transformer(
            d_model=c.d_model,
            nhead=c.n_heads,
            num_encoder_layers=c.n_encoder_layers,
            num_decoder_layers=c.n_decoder_layers,
            dim_feedforward=c.d_ff,
            dropout=c.dropout,
            activation=c.activation,
            batch_first=True,
            norm_first=c.norm == "pre",
        )  # its own init: xavier_uniform_ on every matrix, as the lab does
        self.lm_head = self._make_head()

    def _pad(self, src: torch.Tensor) -> torch.Tensor | None:
        """(B, S) True at padding (nn's convention), or None when nothing is padded (as the lab)."""
        pad = src == self.pad_id
        return pad if bool(pad.any()) else None

    def encode(self, src: torch.Tensor) -> torch.Tensor:
        return self.transformer.encoder(self._embed(self.src_embed, src), src_key_padding_mask=self._pad(src))

    def _decode_full(self, tgt: torch.Tensor, memory: torch.Tensor, pad: torch.Tensor | None) -> torch.Tensor:
        t = tgt.size(1)
        causal = nn.Transformer.generate_square_subsequent_mask(t, device=tgt.device)  # (T, T) float
        y = self.transformer.decoder(
            self._embed(self.tgt_embed, tgt),
            memory,
            tgt_mask=causal,
            memory_key_padding_mask=pad,
            tgt_is_causal=True,
        )
        return self.lm_head(y)  # (B, T, V)

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        src: torch.Tensor,
        cache: RecomputeCache | None = None,
    ) -> torch.Tensor:
        new = tgt.size(1)
        if cache is not None:
            tgt = cache.extend(tgt)
        return self._decode_full(tgt, memory, self._pad(src))[:, -new:]

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        pad = self._pad(src)
        memory = self.transformer.encoder(self._embed(self.src_embed, src), src_key_padding_mask=pad)
        return self._decode_full(tgt, memory, pad)

    def new_cache(self) -> RecomputeCache:
        return RecomputeCache()


class TorchDecoderOnly(_RefBase):
    """``nn.TransformerEncoder`` with a causal mask (GPT-style), the lab's embeddings and head."""

    def __init__(self, config: ModelConfig, vocab_size: int | None = None, pad_id: int = 0) -> None:
        vocab = config.vocab_size or vocab_size
        assert vocab, "vocab_size needed"
        super().__init__(config, vocab, pad_id)
        c = config
        layer = nn.TransformerEncoderLayer(
            d_model=c.d_model,
            nhead=c.n_heads,
            dim_feedforward=c.d_ff,
            dropout=c.dropout,
            activation=c.activation,
            batch_first=True,
            norm_first=c.norm == "pre",
        )
        norm = nn.LayerNorm(c.d_model) if c.norm == "pre" else None
        self.decoder = nn.TransformerEncoder(
            layer, c.n_decoder_layers, norm=norm, enable_nested_tensor=False
        )
        for p in self.decoder.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        self.lm_head = self._make_head()

    def forward(self, tokens: torch.Tensor, cache: RecomputeCache | None = None) -> torch.Tensor:
        new = tokens.size(1)
        if cache is not None:
            tokens = cache.extend(tokens)
        t = tokens.size(1)
        causal = nn.Transformer.generate_square_subsequent_mask(t, device=tokens.device)  # (T, T)
        y = self.decoder(self._embed(self.tgt_embed, tokens), mask=causal, is_causal=True)
        return self.lm_head(y)[:, -new:]  # (B, new, V)

    def new_cache(self) -> RecomputeCache:
        return RecomputeCache()


def build_reference(config: ModelConfig, vocab_size: int | None = None, pad_id: int = 0) -> nn.Module:
    """The torch.nn reference for ``config`` (same signature as ``build_model``)."""
    if config.arch == "encoder-decoder":
        return TorchEncoderDecoder(config, vocab_size, pad_id)
    return TorchDecoderOnly(config, vocab_size, pad_id)
