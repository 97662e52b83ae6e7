"""GPT-2 (small to XL, DistilGPT2): learned positions, pre-LN, GELU's tanh
approximation, a head tied to the token embedding.

Its ``Conv1D`` layers store weights as (in, out), the transpose of a Linear's:
they are handed over as transposed views, and the fused ``c_attn`` (q | k | v
along its outputs) is split into three views, so no weight is copied. The
hub's own ``gpt2`` file names tensors without the ``transformer.`` prefix that
``save_pretrained`` writes; older files also carry the ``attn.bias`` /
``attn.masked_bias`` mask buffers, which are not weights and are left unread.
"""

from __future__ import annotations

import torch

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.families.common import (
    Family,
    HFConfig,
    Tensors,
    Weights,
    activation,
    decoder_config,
    gpt_layer_norms,
    gpt_outer,
    head,
    positive,
    setting,
)
from tui_lab.core.pretrained.hf_files import CONFIG_FILE


def model_config(config: HFConfig) -> ModelConfig:
    """The lab's settings for a GPT-2 config.json."""
    for key in ("scale_attn_by_inverse_layer_idx", "add_cross_attention"):
        if setting(config, key, bool, False):
            raise PretrainedError(f"{CONFIG_FILE}: {key} true is not supported")
    d = positive(config, "n_embd")
    inner = setting(config, "n_inner", int, None)
    return decoder_config(
        "gpt2",
        d_model=d,
        n_heads=positive(config, "n_head"),
        n_decoder_layers=positive(config, "n_layer"),
        d_ff=4 * d if inner is None else inner,
        activation=activation(config, "activation_function", "gelu_new"),
        positional="learned",
        max_len=positive(config, "n_positions"),
        vocab_size=positive(config, "vocab_size"),
        tie_embeddings=setting(config, "tie_word_embeddings", bool, True),
        norm_eps=setting(config, "layer_norm_epsilon", float, 1e-5),
        score_scale=None if setting(config, "scale_attn_weights", bool, True) else 1.0,
        scale_embeddings=False,
    )


def lab_state_dict(tensors: Tensors, config: ModelConfig) -> dict[str, torch.Tensor]:
    """GPT-2's tensors under the lab's parameter names (views, nothing copied)."""
    w = Weights(tensors, "gpt2", ("transformer.", ""), "wte.weight")
    d, f = config.d_model, config.d_ff
    out = gpt_outer(w, config)
    for i in range(config.n_decoder_layers):
        src, lab = f"h.{i}.", f"decoder.layers.{i}."
        qkv = w.get(src + "attn.c_attn.weight", (d, 3 * d)).T  # (3d, d): q, k, v rows
        qkv_bias = w.get(src + "attn.c_attn.bias", (3 * d,))
        for j, name in enumerate(("w_q", "w_k", "w_v")):
            out[f"{lab}self_attn.{name}.weight"] = qkv[j * d : (j + 1) * d]
            out[f"{lab}self_attn.{name}.bias"] = qkv_bias[j * d : (j + 1) * d]
        out[f"{lab}self_attn.w_o.weight"] = w.get(src + "attn.c_proj.weight", (d, d)).T
        out[f"{lab}self_attn.w_o.bias"] = w.get(src + "attn.c_proj.bias", (d,))
        out.update(gpt_layer_norms(w, src, lab, d))
        out[f"{lab}ff.lin1.weight"] = w.get(src + "mlp.c_fc.weight", (d, f)).T
        out[f"{lab}ff.lin1.bias"] = w.get(src + "mlp.c_fc.bias", (f,))
        out[f"{lab}ff.lin2.weight"] = w.get(src + "mlp.c_proj.weight", (f, d)).T
        out[f"{lab}ff.lin2.bias"] = w.get(src + "mlp.c_proj.bias", (d,))
    out.update(head(w, config, ("lm_head.weight",)))
    return out


FAMILY = Family("gpt2", "GPT-2", model_config, lab_state_dict)
