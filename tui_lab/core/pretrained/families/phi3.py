"""Phi-3: Llama with fused projections and a partial rotary.

- ``self_attn.qkv_proj``: q, k and v stacked by rows (split here into views);
- ``mlp.gate_up_proj``: the gate's rows first, then the up projection's;
- rotary on ``partial_rotary_factor`` of each head; a sliding window on every
  layer where ``sliding_window`` is set. ``longrope`` scaling (the 128k models)
  is refused by name.
"""

from __future__ import annotations

import torch

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.pretrained.families.common import (
    Family,
    HFConfig,
    Tensors,
    Weights,
    decoder_config,
)
from tui_lab.core.pretrained.families.llama import llama_state, llama_values
from tui_lab.core.pretrained.families.rotary import layer_windows, rotary_settings


def model_config(config: HFConfig) -> ModelConfig:
    values = llama_values(config)
    values.update(rotary_settings(config, fraction_key="partial_rotary_factor"))  # main diff with Llama
    values["attention_windows"] = layer_windows(config, values["n_decoder_layers"])
    return decoder_config("phi3", **values)


def _attention(w: Weights, src: str, lab: str, config: ModelConfig) -> dict[str, torch.Tensor]:
    d, width, kv = config.d_model, config.d_attn, config.kv_heads * config.d_head
    q, k, v = w.get(src + "self_attn.qkv_proj.weight", (width + 2 * kv, d)).split((width, kv, kv))
    return {
        f"{lab}self_attn.w_q.weight": q,
        f"{lab}self_attn.w_k.weight": k,
        f"{lab}self_attn.w_v.weight": v,
        f"{lab}self_attn.w_o.weight": w.get(src + "self_attn.o_proj.weight", (d, width)),
    }


def _mlp(w: Weights, src: str, lab: str, config: ModelConfig) -> dict[str, torch.Tensor]:
    d, f = config.d_model, config.d_ff
    gate, up = w.get(src + "mlp.gate_up_proj.weight", (2 * f, d)).split((f, f))
    return {
        f"{lab}ff.gate.weight": gate,
        f"{lab}ff.lin1.weight": up,
        f"{lab}ff.lin2.weight": w.get(src + "mlp.down_proj.weight", (d, f)),
    }


def lab_state_dict(tensors: Tensors, config: ModelConfig) -> dict[str, torch.Tensor]:
    return llama_state(tensors, config, "phi3", attention=_attention, mlp=_mlp)


FAMILY = Family("phi3", "Phi-3", model_config, lab_state_dict)
