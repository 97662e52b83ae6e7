"""Gemma 1, 2 and 3 (text): Llama with their differences.

- ``gemma``: RMSNorm as ``x * (1 + w)`` computed in float32; embeddings
  multiplied by sqrt(hidden_size); GeGLU with tanh GELU; ``head_dim`` 256; tied head.
- ``gemma2``: Gemma's norms plus a norm on each sub-layer's output (four per
  layer: ``input_layernorm``, ``post_attention_layernorm``,
  ``pre_feedforward_layernorm``, ``post_feedforward_layernorm``); scores scaled
  by ``query_pre_attn_scalar^-0.5``; tanh soft-capping of scores and of final
  logits; a sliding window on alternating layers.
- ``gemma3_text``: Gemma 2's block plus (1 + w) RMSNorms on each head's q and k;
  five local layers to one global; the local layers' own rotary base;
  soft-capping off unless set.
"""

from __future__ import annotations

import torch

from tui_lab.core.config.model_values import ModelValues
from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.families.common import (
    Family,
    HFConfig,
    Tensors,
    decoder_config,
    setting,
)
from tui_lab.core.pretrained.families.llama import LLAMA_NORMS, llama_state, llama_values
from tui_lab.core.pretrained.families.rotary import layer_windows, rotary_settings
from tui_lab.core.pretrained.hf_files import CONFIG_FILE

SANDWICH_NORMS = {
    "norm1": "input_layernorm",
    "norm1_post": "post_attention_layernorm",
    "norm2": "pre_feedforward_layernorm",
    "norm2_post": "post_feedforward_layernorm",
}


def _gemma_values(config: HFConfig) -> ModelValues:
    act_key = "hidden_activation" if config.get("hidden_activation") is not None else "hidden_act"
    values = llama_values(config, act_key)
    values.update({  # main diff with Llama
        "head_dim": setting(config, "head_dim", int, None),
        "norm_offset": 1.0,
        "scale_embeddings": True,
        "tie_embeddings": setting(config, "tie_word_embeddings", bool, True),
    })
    return values


def gemma_config(config: HFConfig) -> ModelConfig:
    return decoder_config("gemma", **_gemma_values(config))


def _gemma2_values(config: HFConfig, pattern: int) -> ModelValues:
    values = _gemma_values(config)
    scalar = setting(config, "query_pre_attn_scalar", float, None)
    values.update({  # main diff with Gemma
        "output_norms": True,
        "score_scale": None if scalar is None else scalar**-0.5,
        "attn_softcap": setting(config, "attn_logit_softcapping", float, None),
        "logit_softcap": setting(config, "final_logit_softcapping", float, None),
        "attention_windows": layer_windows(config, values["n_decoder_layers"], lambda i: (i + 1) % pattern != 0),
    })
    return values


def gemma2_config(config: HFConfig) -> ModelConfig:
    return decoder_config("gemma2", **_gemma2_values(config, 2))


def gemma3_config(config: HFConfig) -> ModelConfig:
    pattern = setting(config, "sliding_window_pattern", int, None) or setting(config, "_sliding_window_pattern", int, 6)
    values = _gemma2_values(config, pattern)
    values.update(rotary_settings(config, layer_type="full_attention", theta_default=1_000_000.0))
    if isinstance(config.get("rope_parameters"), dict):
        local = rotary_settings(config, layer_type="sliding_attention")
        if local.get("rope_scaling", "none") != "none":
            raise PretrainedError(
                f"{CONFIG_FILE}: a scaled rotary ({local['rope_scaling']}) on the local layers is not supported"
            )
        local_base = local["rope_base"]
    else:  # older files: the local layers' base has a key of its own, and no scaling
        local_base = setting(config, "rope_local_base_freq", float, 10000.0)
    values.update({"qk_norm": "head", "rope_local_base": local_base})  # main diff with Gemma 2
    return decoder_config("gemma3_text", **values)


def gemma_state(tensors: Tensors, config: ModelConfig) -> dict[str, torch.Tensor]:
    return llama_state(tensors, config, "gemma", LLAMA_NORMS)


def gemma2_state(tensors: Tensors, config: ModelConfig) -> dict[str, torch.Tensor]:
    return llama_state(tensors, config, "gemma2", SANDWICH_NORMS)


def gemma3_state(tensors: Tensors, config: ModelConfig) -> dict[str, torch.Tensor]:
    return llama_state(tensors, config, "gemma3_text", SANDWICH_NORMS)


GEMMA = Family("gemma", "Gemma", gemma_config, gemma_state)
GEMMA2 = Family("gemma2", "Gemma 2", gemma2_config, gemma2_state)
GEMMA3 = Family("gemma3_text", "Gemma 3", gemma3_config, gemma3_state)
