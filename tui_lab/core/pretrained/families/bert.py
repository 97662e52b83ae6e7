"""BERT and RoBERTa: encoder-only, post-LN, GELU, learned positions, token types, an
embedding LayerNorm and the masked-LM head, on the lab's ``EncoderOnly``.

BERT's tensors (``save_pretrained`` of ``BertForMaskedLM``: under ``bert.``;
a bare ``BertModel``: no prefix, and no head):

- ``embeddings.{word,position,token_type}_embeddings``, ``embeddings.LayerNorm``;
- per layer ``encoder.layer.{i}.``: ``attention.self.{query,key,value}``,
  ``attention.output.dense`` and ``attention.output.LayerNorm`` (the norm after
  attention), ``intermediate.dense``, ``output.dense`` and ``output.LayerNorm``
  (the norm after the feed-forward);
- the head, ``cls.predictions.``: ``transform.dense``, ``transform.LayerNorm``,
  ``decoder`` (tied to the word embeddings unless ``tie_word_embeddings`` is
  false) and its ``bias``.

RoBERTa (main diff with BERT): its tensors live under ``roberta.`` and its head
is ``lm_head.{dense,layer_norm,decoder,bias}``; its positions start past the
padding index (``pad_token_id + 1``), so the table holds two rows more than
the context and position i reads row i + 2. A bare model's pooler is not read
(nothing the lab shows uses it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from tui_lab.core.config.error import ConfigError
from tui_lab.core.config.model_values import ModelValues
from tui_lab.core.config.sections import ModelConfig
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.families.common import (
    Family,
    HFConfig,
    Tensors,
    Weights,
    activation,
    positive,
    setting,
)
from tui_lab.core.pretrained.hf_files import CONFIG_FILE

if TYPE_CHECKING:
    from typing_extensions import Unpack


def encoder_config(family: str, **values: Unpack[ModelValues]) -> ModelConfig:
    """An encoder-only, post-norm ``ModelConfig`` of ``values``; a refusal becomes one line."""
    try:
        settings: ModelValues = {
            **values, "arch": "encoder-only", "norm": "post", "dropout": 0.0, "positional": "learned",
            "embed_norm": True, "scale_embeddings": False,
        }
        return ModelConfig(**settings)
    except ConfigError as exc:
        raise PretrainedError(f"{CONFIG_FILE}: {family} settings the lab cannot build: {exc}") from None


def has_mlm_head(config: HFConfig) -> bool:
    """Whether config.json's ``architectures`` name a masked-LM model (absent: assume it does)."""
    names = config.get("architectures")
    if not isinstance(names, list) or not names:
        return True
    return any(isinstance(n, str) and ("MaskedLM" in n or "PreTraining" in n) for n in names)


def _check_positions(config: HFConfig) -> None:
    kind = setting(config, "position_embedding_type", str, "absolute")
    if kind != "absolute":
        raise PretrainedError(f"{CONFIG_FILE}: position_embedding_type {kind!r} is not supported (absolute only)")


def model_config(config: HFConfig, offset: int = 0, family: str = "bert") -> ModelConfig:
    """The lab's settings for a BERT (or, with ``offset``, RoBERTa) config.json."""
    _check_positions(config)
    table = positive(config, "max_position_embeddings")
    if table <= offset:
        raise PretrainedError(f"{CONFIG_FILE}: max_position_embeddings {table} leaves no position past the padding")
    head = has_mlm_head(config)
    return encoder_config(
        family,
        d_model=positive(config, "hidden_size"),
        n_heads=positive(config, "num_attention_heads"),
        n_encoder_layers=positive(config, "num_hidden_layers"),
        d_ff=positive(config, "intermediate_size"),
        activation=activation(config, "hidden_act", "gelu"),
        max_len=table - offset,
        position_offset=offset,
        vocab_size=positive(config, "vocab_size"),
        type_vocab_size=int(setting(config, "type_vocab_size", int, 2)),
        norm_eps=setting(config, "layer_norm_eps", float, 1e-12),
        tie_embeddings=setting(config, "tie_word_embeddings", bool, True) or not head,
        head_bias=head,
        mlm_head=head,
    )


def roberta_config(config: HFConfig) -> ModelConfig:
    """RoBERTa: BERT's settings with positions offset past the padding index."""
    pad = int(setting(config, "pad_token_id", int, 1))
    return model_config(config, offset=pad + 1, family="roberta")


def _linear(w: Weights, src: str, lab: str, shape: tuple[int, int]) -> dict[str, torch.Tensor]:
    return {f"{lab}.weight": w.get(f"{src}.weight", shape), f"{lab}.bias": w.get(f"{src}.bias", (shape[0],))}


def _norm(w: Weights, src: str, lab: str, d: int, top_level: bool = False) -> dict[str, torch.Tensor]:
    return {
        f"{lab}.weight": w.get(f"{src}.weight", (d,), top_level=top_level),
        f"{lab}.bias": w.get(f"{src}.bias", (d,), top_level=top_level),
    }


def embeddings(w: Weights, config: ModelConfig) -> dict[str, torch.Tensor]:
    """The word, position and (when the config has them) type embeddings, and their norm."""
    d, v = config.d_model, config.vocab_size or 0
    out = {
        "tgt_embed.weight": w.get("embeddings.word_embeddings.weight", (v, d)),
        "pos.weight": w.get("embeddings.position_embeddings.weight", (config.max_len + config.position_offset, d)),
        **_norm(w, "embeddings.LayerNorm", "embed_norm", d),
    }
    if config.type_vocab_size:
        out["type_embed.weight"] = w.get("embeddings.token_type_embeddings.weight", (config.type_vocab_size, d))
    return out


def mlm_head(w: Weights, config: ModelConfig, names: dict[str, tuple[str, ...]]) -> dict[str, torch.Tensor]:
    """The head's dense, norm, bias and (untied) unembedding, from the top-level ``names``."""
    if not config.mlm_head:
        return {}
    d, v = config.d_model, config.vocab_size or 0
    out = {
        "mlm.dense.weight": w.first(names["dense.weight"], (d, d)),
        "mlm.dense.bias": w.first(names["dense.bias"], (d,)),
        "mlm.norm.weight": w.first(names["norm.weight"], (d,)),
        "mlm.norm.bias": w.first(names["norm.bias"], (d,)),
        "lm_head.bias": w.first(names["bias"], (v,)),
    }
    if not config.tie_embeddings:
        out["lm_head.weight"] = w.first(names["decoder"], (v, d))
    return out


def _bert_layers(w: Weights, config: ModelConfig) -> dict[str, torch.Tensor]:
    d, f = config.d_model, config.d_ff
    out: dict[str, torch.Tensor] = {}
    for i in range(config.n_encoder_layers):
        src, lab = f"encoder.layer.{i}.", f"encoder.layers.{i}."
        for hf, name in (("query", "w_q"), ("key", "w_k"), ("value", "w_v")):
            out.update(_linear(w, f"{src}attention.self.{hf}", f"{lab}self_attn.{name}", (d, d)))
        out.update(_linear(w, f"{src}attention.output.dense", f"{lab}self_attn.w_o", (d, d)))
        out.update(_norm(w, f"{src}attention.output.LayerNorm", f"{lab}norm1", d))
        out.update(_linear(w, f"{src}intermediate.dense", f"{lab}ff.lin1", (f, d)))
        out.update(_linear(w, f"{src}output.dense", f"{lab}ff.lin2", (d, f)))
        out.update(_norm(w, f"{src}output.LayerNorm", f"{lab}norm2", d))
    return out


def _head_names(base: str, norm: str, bias: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    return {
        "dense.weight": (f"{base}dense.weight",),
        "dense.bias": (f"{base}dense.bias",),
        "norm.weight": (f"{base}{norm}.weight",),
        "norm.bias": (f"{base}{norm}.bias",),
        "bias": bias,
        "decoder": (),
    }


def lab_state_dict(tensors: Tensors, config: ModelConfig) -> dict[str, torch.Tensor]:
    """BERT's tensors under the lab's parameter names (views, nothing copied)."""
    w = Weights(tensors, "bert", ("bert.", ""), "embeddings.word_embeddings.weight")
    names = _head_names(
        "cls.predictions.transform.", "LayerNorm", ("cls.predictions.bias", "cls.predictions.decoder.bias")
    )
    names["decoder"] = ("cls.predictions.decoder.weight",)
    return {**embeddings(w, config), **_bert_layers(w, config), **mlm_head(w, config, names)}


def roberta_state_dict(tensors: Tensors, config: ModelConfig) -> dict[str, torch.Tensor]:
    """RoBERTa's tensors: BERT's layout under ``roberta.``, its head under ``lm_head.``."""
    w = Weights(tensors, "roberta", ("roberta.", ""), "embeddings.word_embeddings.weight")
    names = _head_names("lm_head.", "layer_norm", ("lm_head.bias", "lm_head.decoder.bias"))
    names["decoder"] = ("lm_head.decoder.weight",)
    return {**embeddings(w, config), **_bert_layers(w, config), **mlm_head(w, config, names)}


BERT = Family("bert", "BERT", model_config, lab_state_dict)
ROBERTA = Family("roberta", "RoBERTa", roberta_config, roberta_state_dict)
