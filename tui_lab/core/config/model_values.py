"""``ModelValues``: some of a ``ModelConfig``'s settings by name, as a typed mapping.

A family's reader gathers a config.json's settings a few at a time and passes
them on as ``ModelConfig(**values)``; this keeps each key and its type checked
on the way. ``tests/core/config/test_model_values.py`` holds it to the fields.
"""

from __future__ import annotations

from typing import TypedDict


class ModelValues(TypedDict, total=False):
    """Keyword arguments of ``ModelConfig``, each optional (its default applies)."""

    arch: str
    d_model: int
    n_heads: int
    n_encoder_layers: int
    n_decoder_layers: int
    d_ff: int
    dropout: float
    activation: str
    norm: str
    positional: str
    max_len: int
    tie_embeddings: bool
    share_embeddings: bool
    vocab_size: int | None
    norm_kind: str
    norm_eps: float
    gated_ff: bool
    parallel_residual: bool
    rope_fraction: float
    rope_base: float
    score_scale: float | None
    attention_windows: tuple[int, ...]
    n_kv_heads: int | None
    qkv_bias: bool
    out_bias: bool
    ff_bias: bool
    scale_embeddings: bool
    sinusoid_layout: str
    head_bias: bool
    head_dim: int | None
    norm_offset: float
    qk_norm: str
    input_norms: bool
    output_norms: bool
    attn_softcap: float | None
    logit_softcap: float | None
    rope_local_base: float | None
    rope_scaling: str
    rope_factor: float
    rope_low_freq_factor: float
    rope_high_freq_factor: float
    rope_original_max_len: int
    embed_norm: bool
    type_vocab_size: int
    position_offset: int
    mlm_head: bool
    zero_init_proj: bool
