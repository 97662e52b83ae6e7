"""Llama's ``config.json`` and tensor layout for a lab model (the inverse of ``llama.py``).

The family for a lab model with RMSNorm and a gated MLP: rotary positions over
whole heads (rotate-half), grouped key/value heads as the lab has them, one
switch for the attention biases and one for the MLP's.
"""

from __future__ import annotations

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.pretrained.families import llama
from tui_lab.core.pretrained.families.writer import (
    HF_ACTIVATIONS,
    Layout,
    SpecialIds,
    Writer,
    common_keys,
    tied,
)

PREFIX = "model."


def attention_bias(config: ModelConfig) -> bool:
    """Llama has one switch for q/k/v and output biases: on if the lab has either."""
    return config.qkv_bias or config.out_bias


def hf_config(config: ModelConfig, ids: SpecialIds) -> dict[str, object]:
    """config.json of a Llama model computing what ``config``'s lab model computes."""
    return {
        **common_keys(config, "LlamaForCausalLM", "llama", ids),
        "hidden_size": config.d_model,
        "intermediate_size": config.d_ff,
        "num_hidden_layers": config.n_decoder_layers,
        "num_attention_heads": config.n_heads,
        "num_key_value_heads": config.kv_heads,
        "head_dim": config.d_head,
        "hidden_act": HF_ACTIVATIONS[config.activation],
        "max_position_embeddings": config.max_len,
        "rms_norm_eps": config.norm_eps,
        # transformers 5 reads rope_parameters; older releases rope_theta.
        "rope_parameters": {"rope_type": "default", "rope_theta": config.rope_base},
        "rope_theta": config.rope_base,
        "attention_bias": attention_bias(config),
        "mlp_bias": config.ff_bias,
        "attention_dropout": 0.0,
        "pretraining_tp": 1,
    }


def hf_layout(config: ModelConfig) -> Layout:
    """Llama's tensor names and shapes (as ``save_pretrained`` writes them)."""
    d, f, v = config.d_model, config.d_ff, config.vocab_size or 0
    kv = config.kv_heads * config.d_head
    p = PREFIX
    layout: Layout = {f"{p}embed_tokens.weight": (v, d)}
    for i in range(config.n_decoder_layers):
        h = f"{p}layers.{i}."
        for name, rows in (("q_proj", d), ("k_proj", kv), ("v_proj", kv), ("o_proj", d)):
            layout[f"{h}self_attn.{name}.weight"] = (rows, d)
            if attention_bias(config):
                layout[f"{h}self_attn.{name}.bias"] = (rows,)
        for name, shape in (("gate_proj", (f, d)), ("up_proj", (f, d)), ("down_proj", (d, f))):
            layout[f"{h}mlp.{name}.weight"] = shape
            if config.ff_bias:
                layout[f"{h}mlp.{name}.bias"] = shape[:1]
        layout |= {f"{h}input_layernorm.weight": (d,), f"{h}post_attention_layernorm.weight": (d,)}
    layout[f"{p}norm.weight"] = (d,)
    if not tied(config):
        layout["lm_head.weight"] = (v, d)
    return layout


WRITER = Writer(llama.FAMILY, hf_config, hf_layout)
