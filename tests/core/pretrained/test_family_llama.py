"""Llama loaded into the lab's own model, against ``transformers``' LlamaForCausalLM.

The small model has grouped-query attention (4 query heads, 2 key/value heads)
and an untied head; a variant ties the head, turns every bias on and changes
``rope_theta``. Layouts: ``save_pretrained``'s (``model.`` prefix), no prefix,
and the older config keys (top-level ``rope_theta``, ``rope_scaling: null``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.hf_factory import save_family
from tests.core.pretrained.family_reference import (
    assert_attention_matches,
    assert_greedy_matches,
    assert_logits_match,
    assert_parameter_count_matches,
    load_lab,
    prompt,
    rewrite,
    without_prefix,
)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    folder = tmp_path_factory.mktemp("llama")
    return folder, save_family(folder, "llama", tokenizer=False)


@pytest.fixture(scope="module")
def loaded(saved):
    return load_lab(saved[0])


def test_logits(saved, loaded) -> None:
    assert_logits_match(saved[1], loaded[1], prompt(length=40))


def test_attention_per_query_head(saved, loaded) -> None:
    assert_attention_matches(saved[1], loaded[1], prompt(length=12))


def test_parameter_count(saved, loaded) -> None:
    assert_parameter_count_matches(saved[1], loaded[0])


def test_greedy_32_tokens_with_the_kv_cache(saved, loaded) -> None:
    assert_greedy_matches(saved[1], loaded[1], prompt())


def test_settings_read_from_config(loaded) -> None:
    config, model = loaded
    assert (config.n_heads, config.kv_heads, config.norm_kind, config.norm_eps) == (4, 2, "rmsnorm", 1e-6)
    assert config.gated_ff and config.activation == "silu" and not config.qkv_bias and not config.ff_bias
    cache = model.new_cache()
    model(prompt(), cache)
    assert cache.self_attn[0].k.shape[1] == 2  # the cache keeps the 2 key/value heads


def old_config(raw: dict) -> dict:
    raw = dict(raw)
    raw["rope_theta"] = raw.pop("rope_parameters")["rope_theta"]
    raw["rope_scaling"] = None
    return raw


@pytest.mark.parametrize(
    ("tensors", "config"),
    [
        pytest.param(without_prefix("model."), None, id="no-prefix"),
    ],
)
def test_key_layouts(saved, tmp_path: Path, tensors, config) -> None:
    folder = rewrite(saved[0], tmp_path / "m", tensors=tensors, config=config)
    lab_config, model = load_lab(folder)
    assert_logits_match(saved[1], model, prompt(length=16))
    assert_parameter_count_matches(saved[1], lab_config)


@pytest.fixture(scope="module")
def variant(tmp_path_factory: pytest.TempPathFactory):
    """A tied head, biases in attention and MLP, multi-query attention, another rope_theta."""
    folder = tmp_path_factory.mktemp("llama_variant")
    ref = save_family(
        folder, "llama", tokenizer=False, tie_word_embeddings=True, attention_bias=True,
        mlp_bias=True, num_key_value_heads=1, rope_theta=500.0, rms_norm_eps=1e-5,
    )
    return ref, load_lab(folder), folder


def test_variant_logits_attention_and_greedy(variant) -> None:
    ref, (config, model), _ = variant
    assert config.tie_embeddings and model.lm_head.weight is model.tgt_embed.weight
    assert (config.kv_heads, config.rope_base, config.qkv_bias, config.ff_bias) == (1, 500.0, True, True)
    assert_logits_match(ref, model, prompt(length=30))
    assert_attention_matches(ref, model, prompt(length=12))
    assert_parameter_count_matches(ref, config)
    assert_greedy_matches(ref, model, prompt(seed=1))


def test_old_config_keys(variant, tmp_path: Path) -> None:
    """Hub configs written before rope_parameters: a top-level rope_theta, rope_scaling null."""
    ref, _, folder = variant
    lab_config, model = load_lab(rewrite(folder, tmp_path / "m", config=old_config))
    assert lab_config.rope_base == 500.0
    assert_logits_match(ref, model, prompt(length=30))
