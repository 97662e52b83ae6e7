"""GPT-NeoX (Pythia) loaded into the lab's own model, against ``transformers``' GPTNeoXForCausalLM.

Layouts: ``save_pretrained``'s (``gpt_neox.`` prefix, ``embed_out``), the
head stored as ``lm_head.weight``, older files with ``attention.bias`` /
``masked_bias`` / ``rotary_emb.inv_freq`` buffers, and the older config keys
(``rotary_pct``, ``rotary_emb_base``) in place of ``rope_parameters``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench.hf_factory import save_family
from tests.core.pretrained.family_reference import (
    assert_attention_matches,
    assert_greedy_matches,
    assert_logits_match,
    assert_parameter_count_matches,
    load_lab,
    prompt,
    rewrite,
)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    folder = tmp_path_factory.mktemp("gpt_neox")
    return folder, save_family(folder, "gpt_neox", tokenizer=False)


@pytest.fixture(scope="module")
def loaded(saved):
    return load_lab(saved[0])


def test_logits(saved, loaded) -> None:
    assert_logits_match(saved[1], loaded[1], prompt(length=40))


def test_attention(saved, loaded) -> None:
    assert_attention_matches(saved[1], loaded[1], prompt(length=12))


def test_parameter_count_untied_head(saved, loaded) -> None:
    config, model = loaded
    assert not config.tie_embeddings and model.lm_head.weight is not model.tgt_embed.weight
    assert_parameter_count_matches(saved[1], config)


def test_greedy_32_tokens_with_the_kv_cache(saved, loaded) -> None:
    assert_greedy_matches(saved[1], loaded[1], prompt())


def test_settings_read_from_config(loaded) -> None:
    config = loaded[0]
    assert (config.rope_fraction, config.rotary_dims, config.rope_base) == (0.25, 2, 10000.0)
    assert config.parallel_residual and config.activation == "gelu"  # exact GELU


def old_layout(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Older Pythia files: mask buffers and rotary frequencies stored beside the weights."""
    out = dict(state)
    for i in range(2):
        out[f"gpt_neox.layers.{i}.attention.bias"] = torch.tril(torch.ones(64, 64)).view(1, 1, 64, 64)
        out[f"gpt_neox.layers.{i}.attention.masked_bias"] = torch.tensor(-1e9)
        out[f"gpt_neox.layers.{i}.attention.rotary_emb.inv_freq"] = torch.ones(1)
    return out


def old_config(raw: dict) -> dict:
    raw = dict(raw)
    rope = raw.pop("rope_parameters")
    raw["rotary_pct"], raw["rotary_emb_base"] = rope["partial_rotary_factor"], rope["rope_theta"]
    return raw


@pytest.mark.parametrize(
    ("tensors", "config"),
    [
        pytest.param(
            lambda s: {("lm_head.weight" if k == "embed_out.weight" else k): v for k, v in s.items()},
            None,
            id="lm_head-name",
        ),
        pytest.param(old_layout, old_config, id="old-buffers-and-config-keys"),
    ],
)
def test_key_layouts(saved, tmp_path: Path, tensors, config) -> None:
    folder = rewrite(saved[0], tmp_path / "m", tensors=tensors, config=config)
    lab_config, model = load_lab(folder)
    assert_logits_match(saved[1], model, prompt(length=16))
    assert_parameter_count_matches(saved[1], lab_config)


@pytest.fixture(scope="module")
def variant(tmp_path_factory: pytest.TempPathFactory):
    """Sequential residual, half the head rotated with another base, no attention biases, gelu_new."""
    folder = tmp_path_factory.mktemp("gpt_neox_variant")
    ref = save_family(
        folder, "gpt_neox", tokenizer=False, use_parallel_residual=False, rotary_pct=0.5,
        rotary_emb_base=500.0, attention_bias=False, hidden_act="gelu_new",
    )
    return ref, load_lab(folder)


def test_variant_logits_attention_and_greedy(variant) -> None:
    ref, (config, model) = variant
    assert (config.parallel_residual, config.rotary_dims, config.rope_base, config.qkv_bias) == (False, 4, 500.0, False)
    assert_logits_match(ref, model, prompt(length=30))
    assert_attention_matches(ref, model, prompt(length=12))
    assert_parameter_count_matches(ref, config)
    assert_greedy_matches(ref, model, prompt(seed=1))
