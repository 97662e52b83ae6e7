"""The model options real checkpoints need, as config settings: defaults that
change nothing, YAML that reads them, and one-line refusals naming the field."""

from __future__ import annotations

import pytest

from tui_lab.core.config.error import ConfigError
from tui_lab.core.config.lab_config import default_config, from_dict, from_yaml


def model(**values) -> dict:
    base = {"arch": "decoder-only", "d_model": 32, "n_heads": 4, "n_decoder_layers": 2}
    return {"model": {**base, **values}, "task": {"name": "char-lm", "block_size": 16}}


NEW = {
    "norm_kind", "norm_eps", "gated_ff", "parallel_residual", "rope_fraction", "rope_base",
    "score_scale", "attention_windows", "n_kv_heads", "qkv_bias", "out_bias", "ff_bias",
    "scale_embeddings", "sinusoid_layout", "head_bias",
}


def test_defaults_leave_a_preset_file_as_it_was() -> None:
    assert NEW <= set(default_config().to_dict()["model"])
    assert not NEW & set(default_config().diff_dict()["model"])


def test_yaml_reads_every_option() -> None:
    text = """
model:
  arch: decoder-only
  d_model: 32
  n_heads: 4
  n_decoder_layers: 2
  positional: rope
  activation: gelu_tanh
  norm_kind: rmsnorm
  norm_eps: 1.0e-6
  gated_ff: true
  parallel_residual: true
  rope_fraction: 0.5
  rope_base: 500000
  score_scale: 1
  attention_windows: [0, 8]
  n_kv_heads: 2
  qkv_bias: false
  out_bias: false
  ff_bias: false
  scale_embeddings: false
task:
  name: char-lm
  block_size: 16
"""
    cfg = from_yaml(text, source="p.yaml")
    m = cfg.model
    assert m.attention_windows == (0, 8) and m.rope_base == 500000.0 and m.score_scale == 1.0
    assert (m.norm_kind, m.n_kv_heads, m.kv_heads, m.rotary_dims) == ("rmsnorm", 2, 2, 4)
    assert from_yaml(cfg.to_yaml(full=True), source="p.yaml") == cfg
    assert from_yaml(cfg.to_yaml(), source="p.yaml") == cfg


@pytest.mark.parametrize(
    ("values", "field", "words"),
    [
        ({"activation": "swish"}, "model.activation", "silu"),
        ({"norm_kind": "batchnorm"}, "model.norm_kind", "rmsnorm"),
        ({"norm_eps": 0}, "model.norm_eps", "> 0"),
        ({"n_kv_heads": 3}, "model.n_kv_heads", "does not divide n_heads=4"),
        ({"n_kv_heads": 0}, "model.n_kv_heads", "> 0"),
        ({"attention_windows": [0]}, "model.attention_windows", "1 windows for 2 decoder layers"),
        ({"attention_windows": [0, -1]}, "model.attention_windows", ">= 0"),
        ({"attention_windows": 4}, "model.attention_windows", "expected a list"),
        ({"rope_fraction": 0}, "model.rope_fraction", "(0, 1]"),
        ({"rope_fraction": 1.5}, "model.rope_fraction", "(0, 1]"),
        ({"positional": "rope", "rope_fraction": 0.4}, "model.rope_fraction", "even"),
        ({"score_scale": -1}, "model.score_scale", "> 0"),
        ({"rope_base": 0}, "model.rope_base", "> 0"),
        ({"parallel_residual": True, "norm": "post"}, "model.parallel_residual", "norm: pre"),
        ({"qkv_bias": "no"}, "model.qkv_bias", "true or false"),
        ({"sinusoid_layout": "pairs"}, "model.sinusoid_layout", "halves"),
        ({"head_bias": "yes"}, "model.head_bias", "true or false"),
    ],
)
def test_refusals_name_the_field_on_one_line(values, field, words) -> None:
    with pytest.raises(ConfigError) as info:
        from_dict(model(**values), source="p.yaml")
    assert info.value.field == field
    assert words in str(info.value) and "\n" not in str(info.value)


def test_parallel_residual_is_for_decoder_only_models() -> None:
    with pytest.raises(ConfigError) as info:
        from_dict({"model": {"parallel_residual": True}}, source="p.yaml")
    assert info.value.field == "model.parallel_residual"
