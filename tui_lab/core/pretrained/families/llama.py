"""Llama and its kin (SmolLM, TinyLlama...): RMSNorm, a SiLU-gated MLP
(gate, up, down), rotary positions over the whole head in the rotate-half
layout with base ``rope_theta``, grouped-query attention
(``num_key_value_heads``), a tied or untied head.

Every tensor is used as stored (no view or copy). A scaled rotary
(``rope_scaling``) and a ``head_dim`` other than hidden_size / heads are
refused with one line naming the setting.
"""

from __future__ import annotations

from typing import Any

import torch

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.families.common import (
    CONFIG_FILE,
    Family,
    Tensors,
    Weights,
    activation,
    decoder_config,
    head,
    positive,
    rope_settings,
    setting,
)


def model_config(config: dict[str, Any]) -> ModelConfig:
    """The lab's settings for a Llama config.json."""
    d = positive(config, "hidden_size")
    n_heads = positive(config, "num_attention_heads")
    head_dim = setting(config, "head_dim", int, None)
    if head_dim is not None and head_dim * n_heads != d:
        raise PretrainedError(
            f"{CONFIG_FILE}: head_dim {head_dim} is not supported (the lab's heads are "
            f"hidden_size / num_attention_heads = {d / n_heads:g} wide)"
        )
    base, _ = rope_settings(config, "rope_theta", None, 1.0)
    attention_bias = setting(config, "attention_bias", bool, False)
    return decoder_config(
        "llama",
        d_model=d,
        n_heads=n_heads,
        n_kv_heads=positive(config, "num_key_value_heads", n_heads),
        n_decoder_layers=positive(config, "num_hidden_layers"),
        d_ff=positive(config, "intermediate_size"),
        activation=activation(config, "hidden_act", "silu"),
        gated_ff=True,
        ff_bias=setting(config, "mlp_bias", bool, False),
        norm_kind="rmsnorm",
        norm_eps=setting(config, "rms_norm_eps", float, 1e-6),
        positional="rope",
        rope_base=base,
        max_len=positive(config, "max_position_embeddings"),
        vocab_size=positive(config, "vocab_size"),
        tie_embeddings=setting(config, "tie_word_embeddings", bool, False),
        qkv_bias=attention_bias,
        out_bias=attention_bias,
        scale_embeddings=False,
    )


def lab_state_dict(tensors: Tensors, config: ModelConfig) -> dict[str, torch.Tensor]:
    """Llama's tensors under the lab's parameter names."""
    w = Weights(tensors, "llama", ("model.", ""), "embed_tokens.weight")
    d, f, v = config.d_model, config.d_ff, config.vocab_size or 0
    kv = config.kv_heads * config.d_head
    out = {
        "tgt_embed.weight": w.get("embed_tokens.weight", (v, d)),
        "decoder.norm.weight": w.get("norm.weight", (d,)),
    }
    for i in range(config.n_decoder_layers):
        src, lab = f"layers.{i}.", f"decoder.layers.{i}."
        for name, hf, rows in (("w_q", "q_proj", d), ("w_k", "k_proj", kv), ("w_v", "v_proj", kv)):
            out[f"{lab}self_attn.{name}.weight"] = w.get(f"{src}self_attn.{hf}.weight", (rows, d))
            if config.qkv_bias:
                out[f"{lab}self_attn.{name}.bias"] = w.get(f"{src}self_attn.{hf}.bias", (rows,))
        out[f"{lab}self_attn.w_o.weight"] = w.get(src + "self_attn.o_proj.weight", (d, d))
        if config.out_bias:
            out[f"{lab}self_attn.w_o.bias"] = w.get(src + "self_attn.o_proj.bias", (d,))
        out[f"{lab}norm1.weight"] = w.get(src + "input_layernorm.weight", (d,))
        out[f"{lab}norm2.weight"] = w.get(src + "post_attention_layernorm.weight", (d,))
        for name, hf, shape in (("gate", "gate_proj", (f, d)), ("lin1", "up_proj", (f, d)), ("lin2", "down_proj", (d, f))):
            out[f"{lab}ff.{name}.weight"] = w.get(f"{src}mlp.{hf}.weight", shape)
            if config.ff_bias:
                out[f"{lab}ff.{name}.bias"] = w.get(f"{src}mlp.{hf}.bias", shape[:1])
    out.update(head(w, config, ("lm_head.weight",)))
    return out


FAMILY = Family("llama", "Llama", model_config, lab_state_dict)
