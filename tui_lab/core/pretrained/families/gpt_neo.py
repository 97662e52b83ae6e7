"""GPT-Neo (TinyStories-1M to 33M, GPT-Neo 125M...): learned positions, global
and local attention layers in turn (``attention_types`` expanded to one
window per layer: a local layer's query sees its last ``window_size`` keys),
no 1/sqrt(d_head) scaling of the scores, q/k/v without biases, a tied head.

Every tensor is used as stored. Older files hold the ``attn.attention.bias``
/ ``masked_bias`` mask buffers: left unread.
"""

from __future__ import annotations

from typing import cast

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


def attention_layers(config: HFConfig, n_layers: int) -> list[str]:
    """``attention_types`` ([[["global", "local"], 6]]) expanded to one kind per layer."""
    types = config.get("attention_types")
    if types is None:
        layers = config.get("attention_layers")
    else:
        try:
            layers = [kind for kinds, count in cast("list[tuple[list[str], int]]", types) for _ in range(count) for kind in kinds]
        except (TypeError, ValueError):
            raise PretrainedError(
                f"{CONFIG_FILE}: attention_types {types!r} is not a list of [kinds, count] pairs"
            ) from None
    if not isinstance(layers, list) or len(layers) != n_layers:
        raise PretrainedError(
            f"{CONFIG_FILE}: attention_types gives {len(layers) if isinstance(layers, list) else 'no'} "
            f"layer kinds for num_layers={n_layers}"
        )
    unknown = sorted({str(k) for k in layers} - {"global", "local"})
    if unknown:
        raise PretrainedError(f"{CONFIG_FILE}: attention_types has {unknown[0]!r} (global or local only)")
    return [str(k) for k in layers]


def model_config(config: HFConfig) -> ModelConfig:
    """The lab's settings for a GPT-Neo config.json."""
    d = positive(config, "hidden_size")
    n_layers = positive(config, "num_layers")
    window = positive(config, "window_size", 256)
    kinds = attention_layers(config, n_layers)
    inner = setting(config, "intermediate_size", int, None)
    return decoder_config(
        "gpt_neo",
        d_model=d,
        n_heads=positive(config, "num_heads"),
        n_decoder_layers=n_layers,
        d_ff=4 * d if inner is None else inner,
        activation=activation(config, "activation_function", "gelu_new"),
        positional="learned",
        max_len=positive(config, "max_position_embeddings"),
        vocab_size=positive(config, "vocab_size"),
        tie_embeddings=setting(config, "tie_word_embeddings", bool, True),
        norm_eps=setting(config, "layer_norm_epsilon", float, 1e-5),
        attention_windows=tuple(window if kind == "local" else 0 for kind in kinds),
        score_scale=1.0,  # GPT-Neo's scores are q.k, unscaled
        qkv_bias=False,
        scale_embeddings=False,
    )


def lab_state_dict(tensors: Tensors, config: ModelConfig) -> dict[str, torch.Tensor]:
    """GPT-Neo's tensors under the lab's parameter names."""
    w = Weights(tensors, "gpt_neo", ("transformer.", ""), "wte.weight")
    d, f = config.d_model, config.d_ff
    out = gpt_outer(w, config)
    for i in range(config.n_decoder_layers):
        src, lab = f"h.{i}.", f"decoder.layers.{i}."
        attn = src + "attn.attention."
        for name, hf in (("w_q", "q_proj"), ("w_k", "k_proj"), ("w_v", "v_proj")):
            out[f"{lab}self_attn.{name}.weight"] = w.get(f"{attn}{hf}.weight", (d, d))
        out[f"{lab}self_attn.w_o.weight"] = w.get(attn + "out_proj.weight", (d, d))
        out[f"{lab}self_attn.w_o.bias"] = w.get(attn + "out_proj.bias", (d,))
        out.update(gpt_layer_norms(w, src, lab, d))
        out[f"{lab}ff.lin1.weight"] = w.get(src + "mlp.c_fc.weight", (f, d))
        out[f"{lab}ff.lin1.bias"] = w.get(src + "mlp.c_fc.bias", (f,))
        out[f"{lab}ff.lin2.weight"] = w.get(src + "mlp.c_proj.weight", (d, f))
        out[f"{lab}ff.lin2.bias"] = w.get(src + "mlp.c_proj.bias", (d,))
    out.update(head(w, config, ("lm_head.weight",)))
    return out


FAMILY = Family("gpt_neo", "GPT-Neo", model_config, lab_state_dict)
