"""Marian (Helsinki-NLP's opus-mt translators): the paper's encoder-decoder.

Sinusoidal positions laid out as Marian lays them (every sine, then every
cosine: ``sinusoid_layout: halves``), added to embeddings scaled by
sqrt(d_model) when ``scale_embedding``; post-LN blocks (``norm: post``, no
final norm); swish (SiLU) feed-forwards; one embedding shared by the encoder,
the decoder and the head; and ``final_logits_bias``, a bias on the head
(``head_bias``). The positions are not weights in the file (transformers 5
recomputes them; older files store them as ``embed_positions.weight``, left
unread here: the lab computes the same table).

Encoder and decoder must agree on heads and feed-forward width (the lab's
``ModelConfig`` has one of each); opus-mt's always do.
"""

from __future__ import annotations

import torch

from tui_lab.core.config.error import ConfigError
from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.families.common import (
    Family,
    HFConfig,
    Tensors,
    Weights,
    activation,
    positive,
    setting,
)
from tui_lab.core.pretrained.hf_files import CONFIG_FILE

# transformers' projection names -> the lab's, for self and cross attention alike.
_PROJECTIONS = (("q_proj", "w_q"), ("k_proj", "w_k"), ("v_proj", "w_v"), ("out_proj", "w_o"))


def _same(config: HFConfig, encoder_key: str, decoder_key: str) -> int:
    encoder, decoder = positive(config, encoder_key), positive(config, decoder_key)
    if encoder != decoder:
        raise PretrainedError(
            f"{CONFIG_FILE}: {encoder_key} {encoder} and {decoder_key} {decoder} differ "
            "(the lab's encoder and decoder share one setting)"
        )
    return encoder


def model_config(config: HFConfig) -> ModelConfig:
    """The lab's settings for a Marian config.json."""
    if setting(config, "normalize_before", bool, False):
        raise PretrainedError(f"{CONFIG_FILE}: normalize_before true is not supported (Marian is post-LN)")
    vocab = positive(config, "vocab_size")
    shared = setting(config, "share_encoder_decoder_embeddings", bool, True)
    decoder_vocab = positive(config, "decoder_vocab_size", vocab)
    if decoder_vocab != vocab:
        raise PretrainedError(
            f"{CONFIG_FILE}: decoder_vocab_size {decoder_vocab} differs from vocab_size {vocab} "
            "(separate target vocabularies are not supported)"
        )
    try:
        return ModelConfig(
            arch="encoder-decoder",
            norm="post",
            dropout=0.0,
            d_model=positive(config, "d_model"),
            n_heads=_same(config, "encoder_attention_heads", "decoder_attention_heads"),
            n_encoder_layers=positive(config, "encoder_layers"),
            n_decoder_layers=positive(config, "decoder_layers"),
            d_ff=_same(config, "encoder_ffn_dim", "decoder_ffn_dim"),
            activation=activation(config, "activation_function", "swish"),
            positional="sinusoidal",
            sinusoid_layout="halves",
            max_len=positive(config, "max_position_embeddings", 512),
            vocab_size=vocab,
            share_embeddings=shared,
            tie_embeddings=setting(config, "tie_word_embeddings", bool, True),
            scale_embeddings=setting(config, "scale_embedding", bool, False),
            head_bias=True,
        )
    except ConfigError as exc:
        raise PretrainedError(f"{CONFIG_FILE}: marian settings the lab cannot build: {exc}") from None


def _attention(w: Weights, src: str, lab: str, d: int) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for hf, name in _PROJECTIONS:
        out[f"{lab}.{name}.weight"] = w.get(f"{src}.{hf}.weight", (d, d))
        out[f"{lab}.{name}.bias"] = w.get(f"{src}.{hf}.bias", (d,))
    return out


def _norm(w: Weights, src: str, lab: str, d: int) -> dict[str, torch.Tensor]:
    return {f"{lab}.weight": w.get(f"{src}.weight", (d,)), f"{lab}.bias": w.get(f"{src}.bias", (d,))}


def _feed_forward(w: Weights, src: str, lab: str, d: int, f: int) -> dict[str, torch.Tensor]:
    return {
        f"{lab}ff.lin1.weight": w.get(src + "fc1.weight", (f, d)),
        f"{lab}ff.lin1.bias": w.get(src + "fc1.bias", (f,)),
        f"{lab}ff.lin2.weight": w.get(src + "fc2.weight", (d, f)),
        f"{lab}ff.lin2.bias": w.get(src + "fc2.bias", (d,)),
    }


def _embeddings(w: Weights, config: ModelConfig) -> dict[str, torch.Tensor]:
    """src/tgt embeddings: ``shared`` (or a tied copy under the stack's name), else each stack's own."""
    shape = (config.vocab_size or 0, config.d_model)
    if config.share_embeddings:
        names = ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight")
        shared = w.first(names, shape)
        return {"src_embed.weight": shared, "tgt_embed.weight": shared}
    return {
        "src_embed.weight": w.get("model.encoder.embed_tokens.weight", shape, top_level=True),
        "tgt_embed.weight": w.get("model.decoder.embed_tokens.weight", shape, top_level=True),
    }


def lab_state_dict(tensors: Tensors, config: ModelConfig) -> dict[str, torch.Tensor]:
    """Marian's tensors under the lab's parameter names (nothing copied but the bias row's view)."""
    w = Weights(tensors, "marian", ("model.",), "encoder.layers.0.fc1.weight")
    d, f, v = config.d_model, config.d_ff, config.vocab_size or 0
    out = _embeddings(w, config)
    for i in range(config.n_encoder_layers):
        src, lab = f"encoder.layers.{i}.", f"encoder.layers.{i}."
        out.update(_attention(w, src + "self_attn", lab + "self_attn", d))
        out.update(_norm(w, src + "self_attn_layer_norm", lab + "norm1", d))
        out.update(_feed_forward(w, src, lab, d, f))
        out.update(_norm(w, src + "final_layer_norm", lab + "norm2", d))
    for i in range(config.n_decoder_layers):
        src, lab = f"decoder.layers.{i}.", f"decoder.layers.{i}."
        out.update(_attention(w, src + "self_attn", lab + "self_attn", d))
        out.update(_norm(w, src + "self_attn_layer_norm", lab + "norm1", d))
        out.update(_attention(w, src + "encoder_attn", lab + "cross_attn", d))
        out.update(_norm(w, src + "encoder_attn_layer_norm", lab + "norm2", d))
        out.update(_feed_forward(w, src, lab, d, f))
        out.update(_norm(w, src + "final_layer_norm", lab + "norm3", d))
    out["lm_head.bias"] = w.get("final_logits_bias", (1, v), top_level=True)[0]
    if not config.tie_embeddings:
        out["lm_head.weight"] = w.get("lm_head.weight", (v, d), top_level=True)
    return out


FAMILY = Family("marian", "Marian (opus-mt)", model_config, lab_state_dict)
