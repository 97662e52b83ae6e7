"""The three shapes a model comes in, asked one way (``ModelConfig.shape``), not by string.

A preset and ``config.json`` spell the shape as ``model.arch``; everything that
branches on it compares ``Shape`` members, so a misspelt shape is a type error,
not a silently false comparison.
"""

from __future__ import annotations

from enum import Enum


class Shape(Enum):
    """Encoder-decoder (the paper, Marian), decoder-only (GPT, Llama...), encoder-only (BERT)."""

    ENCODER_DECODER = "encoder-decoder"
    DECODER_ONLY = "decoder-only"
    ENCODER_ONLY = "encoder-only"

    @property
    def has_encoder(self) -> bool:
        """Whether the model reads its input with a bidirectional stack (not decoder-only)."""
        return self is not Shape.DECODER_ONLY

    @property
    def has_decoder(self) -> bool:
        """Whether it generates left to right (not encoder-only)."""
        return self is not Shape.ENCODER_ONLY

    @property
    def one_stack(self) -> bool:
        """Whether it is one stack of blocks (``blocks.{L}``), not an encoder and a decoder."""
        return self is not Shape.ENCODER_DECODER
