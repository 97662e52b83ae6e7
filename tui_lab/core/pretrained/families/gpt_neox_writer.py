"""GPT-NeoX's ``config.json`` and tensor layout for a lab model (the inverse of ``gpt_neox.py``).

The family for a lab model with rotary positions and LayerNorm: ``rotary_pct``
is the lab's rope_fraction, ``use_parallel_residual`` its parallel_residual
(false for the lab's own blocks). q/k/v are fused per head in the file; the
reader's split says how, and the export inverts it.
"""

from __future__ import annotations

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.pretrained.families import gpt_neox
from tui_lab.core.pretrained.families.writer import (
    HF_ACTIVATIONS,
    Layout,
    SpecialIds,
    Writer,
    common_keys,
    tied,
)

PREFIX = "gpt_neox."


def attention_bias(config: ModelConfig) -> bool:
    """GPT-NeoX has one switch for q/k/v and output biases: on if the lab has either."""
    return config.qkv_bias or config.out_bias


def hf_config(config: ModelConfig, ids: SpecialIds) -> dict[str, object]:
    """config.json of a GPT-NeoX model computing what ``config``'s lab model computes."""
    return {
        **common_keys(config, "GPTNeoXForCausalLM", "gpt_neox", ids),
        "hidden_size": config.d_model,
        "num_hidden_layers": config.n_decoder_layers,
        "num_attention_heads": config.n_heads,
        "intermediate_size": config.d_ff,
        "hidden_act": HF_ACTIVATIONS[config.activation],
        "max_position_embeddings": config.max_len,
        "layer_norm_eps": config.norm_eps,
        "use_parallel_residual": config.parallel_residual,
        # transformers 5 reads rope_parameters; older releases rotary_pct / rotary_emb_base.
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": config.rope_base,
            "partial_rotary_factor": config.rope_fraction,
        },
        "rotary_pct": config.rope_fraction,
        "rotary_emb_base": config.rope_base,
        "attention_bias": attention_bias(config),
        "attention_dropout": 0.0,
        "hidden_dropout": 0.0,
    }


def hf_layout(config: ModelConfig) -> Layout:
    """GPT-NeoX's tensor names and shapes (as ``save_pretrained`` writes them)."""
    d, f, v = config.d_model, config.d_ff, config.vocab_size or 0
    p = PREFIX
    layout: Layout = {f"{p}embed_in.weight": (v, d)}
    for i in range(config.n_decoder_layers):
        h = f"{p}layers.{i}."
        layout |= {
            f"{h}input_layernorm.weight": (d,), f"{h}input_layernorm.bias": (d,),
            f"{h}post_attention_layernorm.weight": (d,), f"{h}post_attention_layernorm.bias": (d,),
            f"{h}attention.query_key_value.weight": (3 * d, d),
            f"{h}attention.dense.weight": (d, d),
            f"{h}mlp.dense_h_to_4h.weight": (f, d), f"{h}mlp.dense_h_to_4h.bias": (f,),
            f"{h}mlp.dense_4h_to_h.weight": (d, f), f"{h}mlp.dense_4h_to_h.bias": (d,),
        }
        if attention_bias(config):
            layout |= {f"{h}attention.query_key_value.bias": (3 * d,), f"{h}attention.dense.bias": (d,)}
    layout |= {f"{p}final_layer_norm.weight": (d,), f"{p}final_layer_norm.bias": (d,)}
    if not tied(config):
        layout["embed_out.weight"] = (v, d)
    return layout


WRITER = Writer(gpt_neox.FAMILY, hf_config, hf_layout)
