"""DistilBERT (main diff with BERT): no token types, its own names, LayerNorm eps fixed
at 1e-12, and sizes named ``dim``/``n_layers``/``n_heads``/``hidden_dim``.

Tensors under ``distilbert.``: ``embeddings.{word,position}_embeddings`` and
``embeddings.LayerNorm``; per layer ``transformer.layer.{i}.``:
``attention.{q,k,v,out}_lin``, ``sa_layer_norm`` (after attention),
``ffn.lin1``/``ffn.lin2``, ``output_layer_norm`` (after the feed-forward);
the head: ``vocab_transform`` (dense), ``vocab_layer_norm``, ``vocab_projector``
(tied to the word embeddings, with a bias). Sinusoidal position tables
(``sinusoidal_pos_embds``) are stored as weights too, so they load as learned.
"""

from __future__ import annotations

import torch

from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.pretrained.families.bert import (
    _linear,
    _norm,
    encoder_config,
    has_mlm_head,
    mlm_head,
)
from tui_lab.core.pretrained.families.common import (
    Family,
    HFConfig,
    Tensors,
    Weights,
    activation,
    positive,
    setting,
)


def model_config(config: HFConfig) -> ModelConfig:
    """The lab's settings for a DistilBERT config.json."""
    head = has_mlm_head(config)
    return encoder_config(
        "distilbert",
        d_model=positive(config, "dim"),
        n_heads=positive(config, "n_heads"),
        n_encoder_layers=positive(config, "n_layers"),
        d_ff=positive(config, "hidden_dim"),
        activation=activation(config, "activation", "gelu"),
        max_len=positive(config, "max_position_embeddings"),
        vocab_size=positive(config, "vocab_size"),
        norm_eps=1e-12,  # DistilBERT's LayerNorms are built with eps=1e-12 whatever the config says
        tie_embeddings=setting(config, "tie_word_embeddings", bool, True) or not head,
        head_bias=head,
        mlm_head=head,
    )


def lab_state_dict(tensors: Tensors, config: ModelConfig) -> dict[str, torch.Tensor]:
    """DistilBERT's tensors under the lab's parameter names (views, nothing copied)."""
    w = Weights(tensors, "distilbert", ("distilbert.", ""), "embeddings.word_embeddings.weight")
    d, f, v = config.d_model, config.d_ff, config.vocab_size or 0
    out = {
        "tgt_embed.weight": w.get("embeddings.word_embeddings.weight", (v, d)),
        "pos.weight": w.get("embeddings.position_embeddings.weight", (config.max_len, d)),
        **_norm(w, "embeddings.LayerNorm", "embed_norm", d),
    }
    for i in range(config.n_encoder_layers):
        src, lab = f"transformer.layer.{i}.", f"encoder.layers.{i}."
        for hf, name in (("q_lin", "w_q"), ("k_lin", "w_k"), ("v_lin", "w_v"), ("out_lin", "w_o")):
            out.update(_linear(w, f"{src}attention.{hf}", f"{lab}self_attn.{name}", (d, d)))
        out.update(_norm(w, f"{src}sa_layer_norm", f"{lab}norm1", d))
        out.update(_linear(w, f"{src}ffn.lin1", f"{lab}ff.lin1", (f, d)))
        out.update(_linear(w, f"{src}ffn.lin2", f"{lab}ff.lin2", (d, f)))
        out.update(_norm(w, f"{src}output_layer_norm", f"{lab}norm2", d))
    names: dict[str, tuple[str, ...]] = {
        "dense.weight": ("vocab_transform.weight",),
        "dense.bias": ("vocab_transform.bias",),
        "norm.weight": ("vocab_layer_norm.weight",),
        "norm.bias": ("vocab_layer_norm.bias",),
        "bias": ("vocab_projector.bias",),
        "decoder": ("vocab_projector.weight",),
    }
    return {**out, **mlm_head(w, config, names)}


FAMILY = Family("distilbert", "DistilBERT", model_config, lab_state_dict)
