"""OLMo-2: Llama with its norms moved.

No norm before a sub-layer: RMSNorm on the attention's and the MLP's outputs
before each is added (``post_attention_layernorm``,
``post_feedforward_layernorm``), and RMSNorm on q and k over the whole
projections (``self_attn.q_norm``/``k_norm``), before rotary.
"""

from __future__ import annotations

import torch

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.pretrained.families.common import Family, HFConfig, Tensors, decoder_config
from tui_lab.core.pretrained.families.llama import llama_state, llama_values

OLMO2_NORMS = {"norm1_post": "post_attention_layernorm", "norm2_post": "post_feedforward_layernorm"}


def model_config(config: HFConfig) -> ModelConfig:
    values = llama_values(config)
    values.update({"input_norms": False, "output_norms": True, "qk_norm": "full"})  # main diff with Llama
    return decoder_config("olmo2", **values)


def lab_state_dict(tensors: Tensors, config: ModelConfig) -> dict[str, torch.Tensor]:
    return llama_state(tensors, config, "olmo2", OLMO2_NORMS)


FAMILY = Family("olmo2", "OLMo-2", model_config, lab_state_dict)
