"""Qwen2/2.5 and Qwen3: Llama with their differences.

- ``qwen2``: biases on q, k and v, none on o; a sliding window only on the
  layers ``layer_types`` names (older files: ``use_sliding_window`` from layer
  ``max_window_layers`` on).
- ``qwen3``: RMSNorm on each head's q and k (over ``head_dim``), before rotary;
  ``head_dim`` independent of hidden_size / heads; ``attention_bias`` on all four.
"""

from __future__ import annotations

import torch

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.pretrained.families.common import (
    Family,
    HFConfig,
    Tensors,
    decoder_config,
    setting,
)
from tui_lab.core.pretrained.families.llama import llama_state, llama_values
from tui_lab.core.pretrained.families.rotary import layer_windows


def _windows(config: HFConfig, n_layers: int) -> tuple[int, ...]:
    if not setting(config, "use_sliding_window", bool, False):
        return ()
    first = int(setting(config, "max_window_layers", int, n_layers))
    return layer_windows(config, n_layers, lambda i: i >= first)


def qwen2_config(config: HFConfig) -> ModelConfig:
    values = llama_values(config)
    values.update({"qkv_bias": True, "out_bias": False})  # main diff with Llama
    values["attention_windows"] = _windows(config, values["n_decoder_layers"])
    return decoder_config("qwen2", **values)


def qwen3_config(config: HFConfig) -> ModelConfig:
    values = llama_values(config)
    values.update({"qk_norm": "head", "head_dim": setting(config, "head_dim", int, None)})  # main diff with Llama
    values["attention_windows"] = _windows(config, values["n_decoder_layers"])
    return decoder_config("qwen3", **values)


def qwen2_state(tensors: Tensors, config: ModelConfig) -> dict[str, torch.Tensor]:
    return llama_state(tensors, config, "qwen2")


def qwen3_state(tensors: Tensors, config: ModelConfig) -> dict[str, torch.Tensor]:
    return llama_state(tensors, config, "qwen3")


QWEN2 = Family("qwen2", "Qwen2", qwen2_config, qwen2_state)
QWEN3 = Family("qwen3", "Qwen3", qwen3_config, qwen3_state)
