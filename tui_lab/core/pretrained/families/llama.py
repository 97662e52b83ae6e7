"""Llama and its kin (SmolLM, TinyLlama, Llama 3.x): RMSNorm, a SiLU-gated MLP
(gate, up, down), rotary positions over the whole head in the rotate-half
layout with base ``rope_theta`` (scaled by ``rope_scaling`` types ``linear``
and ``llama3``), grouped-query attention (``num_key_value_heads``), a tied or
untied head; ``mistral`` is Llama with a sliding window on every layer.

The later families (``qwen2``, ``qwen3``, ``gemma*``, ``phi3``, ``olmo2``)
state only their differences from Llama, as transformers' ``modular_*.py``
files do: ``llama_values`` gives their settings to start from, ``llama_state``
maps the tensors they share. Every tensor is used as stored (no view or copy).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from tui_lab.core.config.model_values import ModelValues
from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.pretrained.families.common import (
    Family,
    HFConfig,
    Tensors,
    Weights,
    activation,
    decoder_config,
    head,
    positive,
    setting,
)
from tui_lab.core.pretrained.families.rotary import layer_windows, rotary_settings

# The lab's norm -> the checkpoint's, per layer (Llama: one before each sub-layer).
LLAMA_NORMS = {"norm1": "input_layernorm", "norm2": "post_attention_layernorm"}


def llama_values(config: HFConfig, act_key: str = "hidden_act") -> ModelValues:
    """A Llama config.json's ``ModelConfig`` values, for Llama and the families built on it."""
    d = positive(config, "hidden_size")
    n_heads = positive(config, "num_attention_heads")
    head_dim = setting(config, "head_dim", int, None)
    attention_bias = setting(config, "attention_bias", bool, False)
    return dict(
        d_model=d,
        n_heads=n_heads,
        head_dim=None if head_dim is None or head_dim * n_heads == d else head_dim,
        n_kv_heads=positive(config, "num_key_value_heads", n_heads),
        n_decoder_layers=positive(config, "num_hidden_layers"),
        d_ff=positive(config, "intermediate_size"),
        activation=activation(config, act_key, "silu"),
        gated_ff=True,
        ff_bias=setting(config, "mlp_bias", bool, False),
        norm_kind="rmsnorm",
        norm_eps=setting(config, "rms_norm_eps", float, 1e-6),
        positional="rope",
        **rotary_settings(config),
        max_len=positive(config, "max_position_embeddings"),
        vocab_size=positive(config, "vocab_size"),
        tie_embeddings=setting(config, "tie_word_embeddings", bool, False),
        qkv_bias=attention_bias,
        out_bias=attention_bias,
        scale_embeddings=False,
    )


def model_config(config: HFConfig) -> ModelConfig:
    """The lab's settings for a Llama config.json."""
    return decoder_config("llama", **llama_values(config))


def mistral_config(config: HFConfig) -> ModelConfig:
    """Mistral: Llama with a sliding window on every layer (``sliding_window``)."""
    values = llama_values(config)
    values["attention_windows"] = layer_windows(config, values["n_decoder_layers"])
    return decoder_config("mistral", **values)


# One layer's tensors under the lab's names: (weights, source prefix, lab prefix, config).
LayerTensors = Callable[[Weights, str, str, ModelConfig], dict[str, torch.Tensor]]


def attention_tensors(w: Weights, src: str, lab: str, config: ModelConfig) -> dict[str, torch.Tensor]:
    """q, k, v and o projections (and their biases) of one layer, and q/k norms where the
    config has them (``self_attn.q_norm``/``k_norm``: per head, or over the projection)."""
    d, width, kv = config.d_model, config.d_attn, config.kv_heads * config.d_head
    out = {}
    for name, hf, rows in (("w_q", "q_proj", width), ("w_k", "k_proj", kv), ("w_v", "v_proj", kv)):
        out[f"{lab}self_attn.{name}.weight"] = w.get(f"{src}self_attn.{hf}.weight", (rows, d))
        if config.qkv_bias:
            out[f"{lab}self_attn.{name}.bias"] = w.get(f"{src}self_attn.{hf}.bias", (rows,))
    out[f"{lab}self_attn.w_o.weight"] = w.get(src + "self_attn.o_proj.weight", (d, width))
    if config.out_bias:
        out[f"{lab}self_attn.w_o.bias"] = w.get(src + "self_attn.o_proj.bias", (d,))
    if config.qk_norm != "none":
        per_head = config.qk_norm == "head"
        for name, rows in (("q_norm", width), ("k_norm", kv)):
            out[f"{lab}self_attn.{name}.weight"] = w.get(
                f"{src}self_attn.{name}.weight", (config.d_head if per_head else rows,)
            )
    return out


def mlp_tensors(w: Weights, src: str, lab: str, config: ModelConfig) -> dict[str, torch.Tensor]:
    """The gated MLP's gate, up and down projections (``mlp.gate_proj``...) of one layer."""
    d, f = config.d_model, config.d_ff
    out = {}
    for name, hf, shape in (("gate", "gate_proj", (f, d)), ("lin1", "up_proj", (f, d)), ("lin2", "down_proj", (d, f))):
        out[f"{lab}ff.{name}.weight"] = w.get(f"{src}mlp.{hf}.weight", shape)
        if config.ff_bias:
            out[f"{lab}ff.{name}.bias"] = w.get(f"{src}mlp.{hf}.bias", shape[:1])
    return out


def llama_state(
    tensors: Tensors,
    config: ModelConfig,
    family: str = "llama",
    norms: dict[str, str] = LLAMA_NORMS,
    attention: LayerTensors = attention_tensors,
    mlp: LayerTensors = mlp_tensors,
) -> dict[str, torch.Tensor]:
    """A Llama-layout checkpoint under the lab's names; ``norms`` maps each layer's norms,
    ``attention``/``mlp`` the layer's projections (a family with fused ones passes its own)."""
    w = Weights(tensors, family, ("model.", ""), "embed_tokens.weight")
    d, v = config.d_model, config.vocab_size or 0
    out = {
        "tgt_embed.weight": w.get("embed_tokens.weight", (v, d)),
        "decoder.norm.weight": w.get("norm.weight", (d,)),
    }
    for i in range(config.n_decoder_layers):
        src, lab = f"layers.{i}.", f"decoder.layers.{i}."
        out.update(attention(w, src, lab, config))
        out.update(mlp(w, src, lab, config))
        for ours, theirs in norms.items():
            out[f"{lab}{ours}.weight"] = w.get(f"{src}{theirs}.weight", (d,))
    out.update(head(w, config, ("lm_head.weight",)))
    return out


def lab_state_dict(tensors: Tensors, config: ModelConfig) -> dict[str, torch.Tensor]:
    """Llama's tensors under the lab's parameter names."""
    return llama_state(tensors, config)


def mistral_state(tensors: Tensors, config: ModelConfig) -> dict[str, torch.Tensor]:
    return llama_state(tensors, config, "mistral")


FAMILY = Family("llama", "Llama", model_config, lab_state_dict)
MISTRAL = Family("mistral", "Mistral", mistral_config, mistral_state)
