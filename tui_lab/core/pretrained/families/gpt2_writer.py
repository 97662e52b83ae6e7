"""GPT-2's ``config.json`` and tensor layout for a lab model (the inverse of ``gpt2.py``).

Learned positions (the lab's sinusoidal table is written as one), LayerNorm,
pre-LN, biases everywhere (a lab model without them gets zeros). The
``Conv1D`` weights are (in, out); the reader's transposes say so, and the
export inverts them.
"""

from __future__ import annotations

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.pretrained.families import gpt2
from tui_lab.core.pretrained.families.writer import (
    HF_ACTIVATIONS,
    Layout,
    SpecialIds,
    Writer,
    common_keys,
    tied,
)

PREFIX = "transformer."


def hf_config(config: ModelConfig, ids: SpecialIds) -> dict[str, object]:
    """config.json of a GPT-2 model computing what ``config``'s lab model computes."""
    return {
        **common_keys(config, "GPT2LMHeadModel", "gpt2", ids),
        "n_positions": config.max_len,
        "n_ctx": config.max_len,
        "n_embd": config.d_model,
        "n_layer": config.n_decoder_layers,
        "n_head": config.n_heads,
        "n_inner": config.d_ff,
        "activation_function": HF_ACTIVATIONS[config.activation],
        "layer_norm_epsilon": config.norm_eps,
        # Unscaled scores are GPT-2's scale_attn_weights: false; any other scale
        # is folded into w_q by the export.
        "scale_attn_weights": config.score_scale != 1.0,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
    }


def hf_layout(config: ModelConfig) -> Layout:
    """GPT-2's tensor names and shapes (as ``save_pretrained`` writes them)."""
    d, f, v = config.d_model, config.d_ff, config.vocab_size or 0
    p = PREFIX
    layout: Layout = {f"{p}wte.weight": (v, d), f"{p}wpe.weight": (config.max_len, d)}
    for i in range(config.n_decoder_layers):
        h = f"{p}h.{i}."
        layout |= {
            f"{h}ln_1.weight": (d,), f"{h}ln_1.bias": (d,),
            f"{h}attn.c_attn.weight": (d, 3 * d), f"{h}attn.c_attn.bias": (3 * d,),
            f"{h}attn.c_proj.weight": (d, d), f"{h}attn.c_proj.bias": (d,),
            f"{h}ln_2.weight": (d,), f"{h}ln_2.bias": (d,),
            f"{h}mlp.c_fc.weight": (d, f), f"{h}mlp.c_fc.bias": (f,),
            f"{h}mlp.c_proj.weight": (f, d), f"{h}mlp.c_proj.bias": (d,),
        }
    layout |= {f"{p}ln_f.weight": (d,), f"{p}ln_f.bias": (d,)}
    if not tied(config):
        layout["lm_head.weight"] = (v, d)
    return layout


WRITER = Writer(gpt2.FAMILY, hf_config, hf_layout)
