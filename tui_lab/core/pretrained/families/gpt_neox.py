"""GPT-NeoX (Pythia 14M to 1B): rotary positions on a fraction of each head
(``rotary_pct``), attention and MLP side by side on the same input
(``use_parallel_residual``), an untied head (``embed_out``).

Its fused ``query_key_value`` is laid out per head, (n_heads, 3, d_head) along
the outputs: head h's q, k, v rows are adjacent. The lab's ``w_q`` wants every
head's q rows together, which no view of that layout gives, so q, k and v are
gathered into three new tensors (the one copy this family makes; the fused
tensor itself is then no longer used). Older files also hold ``attention.bias``
/ ``masked_bias`` mask buffers and ``rotary_emb.inv_freq``: left unread.
"""

from __future__ import annotations

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
from tui_lab.core.pretrained.families.rotary import rotary_settings


def model_config(config: HFConfig) -> ModelConfig:
    """The lab's settings for a GPT-NeoX config.json."""
    bias = setting(config, "attention_bias", bool, True)
    values = ModelValues(
        d_model=positive(config, "hidden_size"),
        n_heads=positive(config, "num_attention_heads"),
        n_decoder_layers=positive(config, "num_hidden_layers"),
        d_ff=positive(config, "intermediate_size"),
        activation=activation(config, "hidden_act", "gelu"),
        positional="rope",
        **rotary_settings(config, "rotary_emb_base", "rotary_pct", 0.25),
        max_len=positive(config, "max_position_embeddings"),
        vocab_size=positive(config, "vocab_size"),
        tie_embeddings=setting(config, "tie_word_embeddings", bool, False),
        norm_eps=setting(config, "layer_norm_eps", float, 1e-5),
        parallel_residual=setting(config, "use_parallel_residual", bool, True),
        qkv_bias=bias,
        out_bias=bias,
        scale_embeddings=False,
    )
    return decoder_config("gpt_neox", **values)


def _split_per_head(fused: torch.Tensor, n_heads: int) -> tuple[torch.Tensor, ...]:
    """(n_heads * 3 * d_head, ...) per-head rows -> q, k, v, each (n_heads * d_head, ...)."""
    grouped = fused.reshape(n_heads, 3, -1, *fused.shape[1:])  # (H, 3, d_head, ...)
    return tuple(grouped[:, j].reshape(-1, *fused.shape[1:]) for j in range(3))


def lab_state_dict(tensors: Tensors, config: ModelConfig) -> dict[str, torch.Tensor]:
    """GPT-NeoX's tensors under the lab's parameter names."""
    w = Weights(tensors, "gpt_neox", ("gpt_neox.", ""), "embed_in.weight")
    d, f, v, h = config.d_model, config.d_ff, config.vocab_size or 0, config.n_heads
    out = {
        "tgt_embed.weight": w.get("embed_in.weight", (v, d)),
        "decoder.norm.weight": w.get("final_layer_norm.weight", (d,)),
        "decoder.norm.bias": w.get("final_layer_norm.bias", (d,)),
    }
    for i in range(config.n_decoder_layers):
        src, lab = f"layers.{i}.", f"decoder.layers.{i}."
        attn = src + "attention."
        names = ("w_q", "w_k", "w_v")
        for name, part in zip(names, _split_per_head(w.get(attn + "query_key_value.weight", (3 * d, d)), h), strict=True):
            out[f"{lab}self_attn.{name}.weight"] = part
        out[f"{lab}self_attn.w_o.weight"] = w.get(attn + "dense.weight", (d, d))
        if config.qkv_bias:
            fused_bias = w.get(attn + "query_key_value.bias", (3 * d,))
            for name, part in zip(names, _split_per_head(fused_bias, h), strict=True):
                out[f"{lab}self_attn.{name}.bias"] = part
        if config.out_bias:
            out[f"{lab}self_attn.w_o.bias"] = w.get(attn + "dense.bias", (d,))
        for norm, hf in (("norm1", "input_layernorm"), ("norm2", "post_attention_layernorm")):
            out[f"{lab}{norm}.weight"] = w.get(f"{src}{hf}.weight", (d,))
            out[f"{lab}{norm}.bias"] = w.get(f"{src}{hf}.bias", (d,))
        out[f"{lab}ff.lin1.weight"] = w.get(src + "mlp.dense_h_to_4h.weight", (f, d))
        out[f"{lab}ff.lin1.bias"] = w.get(src + "mlp.dense_h_to_4h.bias", (f,))
        out[f"{lab}ff.lin2.weight"] = w.get(src + "mlp.dense_4h_to_h.weight", (d, f))
        out[f"{lab}ff.lin2.bias"] = w.get(src + "mlp.dense_4h_to_h.bias", (d,))
    out.update(head(w, config, ("embed_out.weight", "lm_head.weight")))
    return out


FAMILY = Family("gpt_neox", "GPT-NeoX (Pythia)", model_config, lab_state_dict)
