"""A real checkpoint as the lab's own model (``DecoderOnly``, or ``EncoderDecoder``
for a translator), its weights used in place.

The model is built on the meta device (shapes, no storage), then the family's
mapped tensors are assigned as its parameters (``load_state_dict(assign=True)``):
no parameter is allocated and filled, so the weights are never held twice
(those of a memory-mapped fp32 file stay in the file's pages). A tied head is
tied again afterwards, and the rotary tables, which are buffers and not
weights, are computed for real. Matrices stored the slow way round for
decoding are then copied into the other layout (``layout.py``), their file
pages handed back.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.config.shape import Shape
from tui_lab.core.model.encoder_only import EncoderOnly
from tui_lab.core.model.models import DecoderOnly, EncoderDecoder
from tui_lab.core.model.positions import RotaryEmbedding, SinusoidalPositions, sinusoid_table
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.families import family_for
from tui_lab.core.pretrained.files import TensorSource
from tui_lab.core.pretrained.relayout import lay_out


def build_pretrained(
    config: dict[str, object], tensors: Mapping[str, torch.Tensor], lay_out_now: bool = True
) -> tuple[ModelConfig, nn.Module]:
    """(the lab's settings, the model in eval mode) for a config.json and its tensors:
    a ``DecoderOnly``, an ``EncoderDecoder`` for a translator (Marian), or an
    ``EncoderOnly`` (BERT, DistilBERT, RoBERTa). With
    ``lay_out_now`` False its weights are left as stored: re-lay them later with a
    ``PendingLayout`` (``layout.py``)."""
    family = family_for(config)
    model_config = family.model_config(config)
    state = family.lab_state_dict(tensors, model_config)
    vocab = model_config.vocab_size or 0
    model: DecoderOnly | EncoderDecoder | EncoderOnly
    with torch.device("meta"):
        if model_config.shape is Shape.ENCODER_DECODER:
            # The source's padding id (Marian's <pad>) is what the source mask hides.
            pad = config.get("pad_token_id")
            model = EncoderDecoder(model_config, vocab, pad if isinstance(pad, int) else 0)
        elif model_config.shape is Shape.ENCODER_ONLY:
            # Its padding id ([PAD] 0, RoBERTa's <pad> 1) is what the key mask hides.
            pad = config.get("pad_token_id")
            model = EncoderOnly(model_config, vocab, pad if isinstance(pad, int) else 0)
        else:
            model = DecoderOnly(model_config, vocab)
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    expected_missing = ["lm_head.weight"] if model_config.tie_embeddings else []
    if sorted(missing) != expected_missing or unexpected:
        # A mapping that disagrees with the model it maps onto: the lab's fault, not the file's.
        raise PretrainedError(
            f"{family.model_type}: the weights map onto the wrong names "
            f"(missing {sorted(missing)[:3]}, unexpected {sorted(unexpected)[:3]})"
        )
    if model_config.tie_embeddings:
        model.lm_head.weight = model.tgt_embed.weight
    _real_buffers(model, model_config)
    if lay_out_now:
        lay_out(model, tensors.release if isinstance(tensors, TensorSource) else None)
    return model_config, model.eval()


def _real_buffers(model: torch.nn.Module, config: ModelConfig) -> None:
    """Replace the meta buffers (RoPE's tables, shared by every layer; sinusoids) with computed ones."""
    for module in model.modules():
        if isinstance(module, RotaryEmbedding):
            fresh = RotaryEmbedding(module.d_head, module.base, config.max_len, config.rope_fraction, module.scaling)
            module.inv_freq, module.cos, module.sin_signed = fresh.inv_freq, fresh.cos, fresh.sin_signed
        if isinstance(module, SinusoidalPositions):
            module.pe = sinusoid_table(config.max_len, module.d_model, layout=module.layout)
    for name, buffer in model.named_buffers():
        if buffer.is_meta:
            raise PretrainedError(f"{name}: a buffer was left without data")
