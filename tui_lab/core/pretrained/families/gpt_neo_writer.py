"""GPT-Neo's ``config.json`` and tensor layout for a lab model (the inverse of ``gpt_neo.py``).

The family for a lab model with local attention windows (one window size,
each layer global or local), learned positions and no q/k/v biases. Its
scores are unscaled: a lab model's 1/sqrt(d_head) is folded into w_q.
"""

from __future__ import annotations

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.pretrained.families import gpt_neo
from tui_lab.core.pretrained.families.writer import (
    HF_ACTIVATIONS,
    Layout,
    SpecialIds,
    Writer,
    common_keys,
    tied,
)

PREFIX = "transformer."


def window_size(config: ModelConfig) -> int:
    """The one window of the local layers (the context when every layer is global)."""
    return max(config.attention_windows, default=0) or config.max_len


def hf_config(config: ModelConfig, ids: SpecialIds) -> dict[str, object]:
    """config.json of a GPT-Neo model computing what ``config``'s lab model computes."""
    windows = config.attention_windows or (0,) * config.n_decoder_layers
    kinds = ["local" if w else "global" for w in windows]
    return {
        **common_keys(config, "GPTNeoForCausalLM", "gpt_neo", ids),
        "max_position_embeddings": config.max_len,
        "hidden_size": config.d_model,
        "num_layers": config.n_decoder_layers,
        "num_heads": config.n_heads,
        "intermediate_size": config.d_ff,
        "window_size": window_size(config),
        "attention_types": [[[kind], 1] for kind in kinds],
        "attention_layers": kinds,
        "activation_function": HF_ACTIVATIONS[config.activation],
        "layer_norm_epsilon": config.norm_eps,
        "resid_dropout": 0.0,
        "embed_dropout": 0.0,
        "attention_dropout": 0.0,
    }


def hf_layout(config: ModelConfig) -> Layout:
    """GPT-Neo's tensor names and shapes (as ``save_pretrained`` writes them)."""
    d, f, v = config.d_model, config.d_ff, config.vocab_size or 0
    p = PREFIX
    layout: Layout = {f"{p}wte.weight": (v, d), f"{p}wpe.weight": (config.max_len, d)}
    for i in range(config.n_decoder_layers):
        h = f"{p}h.{i}."
        a = f"{h}attn.attention."
        layout |= {
            f"{h}ln_1.weight": (d,), f"{h}ln_1.bias": (d,),
            f"{a}q_proj.weight": (d, d), f"{a}k_proj.weight": (d, d), f"{a}v_proj.weight": (d, d),
            f"{a}out_proj.weight": (d, d), f"{a}out_proj.bias": (d,),
            f"{h}ln_2.weight": (d,), f"{h}ln_2.bias": (d,),
            f"{h}mlp.c_fc.weight": (f, d), f"{h}mlp.c_fc.bias": (f,),
            f"{h}mlp.c_proj.weight": (d, f), f"{h}mlp.c_proj.bias": (d,),
        }
    layout |= {f"{p}ln_f.weight": (d,), f"{p}ln_f.bias": (d,)}
    if not tied(config):
        layout["lm_head.weight"] = (v, d)
    return layout


WRITER = Writer(gpt_neo.FAMILY, hf_config, hf_layout)
