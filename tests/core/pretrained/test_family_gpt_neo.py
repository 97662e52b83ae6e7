"""GPT-Neo (TinyStories) loaded into the lab's own model, against ``transformers``' GPTNeoForCausalLM.

Global and local layers in turn (``attention_types``, ``window_size`` 8, so
the 42-token greedy run goes well past the window with the KV cache), no
1/sqrt(d_head) scaling. Layouts: ``save_pretrained``'s (``transformer.``
prefix), no prefix, and older files with ``attn.attention.bias`` /
``masked_bias`` buffers.
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
    without_prefix,
)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    folder = tmp_path_factory.mktemp("gpt_neo")
    return folder, save_family(folder, "gpt_neo", tokenizer=False)


@pytest.fixture(scope="module")
def loaded(saved):
    return load_lab(saved[0])


def test_logits_past_the_window(saved, loaded) -> None:
    assert_logits_match(saved[1], loaded[1], prompt(length=40))


def test_attention_local_and_global(saved, loaded) -> None:
    assert_attention_matches(saved[1], loaded[1], prompt(length=20))


def test_parameter_count_tied_head_once(saved, loaded) -> None:
    config, model = loaded
    assert model.lm_head.weight is model.tgt_embed.weight
    assert_parameter_count_matches(saved[1], config)


def test_greedy_32_tokens_with_the_kv_cache(saved, loaded) -> None:
    assert_greedy_matches(saved[1], loaded[1], prompt())


def test_settings_read_from_config(loaded) -> None:
    config = loaded[0]
    assert config.attention_windows == (0, 8) and config.score_scale == 1.0
    assert config.activation == "gelu_tanh" and not config.qkv_bias and config.out_bias


def with_buffers(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = dict(state)
    for i in range(2):
        out[f"transformer.h.{i}.attn.attention.bias"] = torch.tril(torch.ones(64, 64)).view(1, 1, 64, 64)
        out[f"transformer.h.{i}.attn.attention.masked_bias"] = torch.tensor(-1e9)
    return out


@pytest.mark.parametrize(
    "layout",
    [pytest.param(without_prefix("transformer."), id="no-prefix"), pytest.param(with_buffers, id="mask-buffers")],
)
def test_key_layouts(saved, tmp_path: Path, layout) -> None:
    config, model = load_lab(rewrite(saved[0], tmp_path / "m", tensors=layout))
    assert_logits_match(saved[1], model, prompt(length=16))
    assert_parameter_count_matches(saved[1], config)


def test_attention_types_expand_to_every_layer(tmp_path: Path) -> None:
    ref = save_family(
        tmp_path, "gpt_neo", tokenizer=False, num_layers=4,
        attention_types=[[["local", "global"], 1], [["local"], 2]], window_size=5,
    )
    config, model = load_lab(tmp_path)
    assert config.attention_windows == (5, 0, 5, 5)
    assert_logits_match(ref, model, prompt(length=24))
    assert_attention_matches(ref, model, prompt(length=12))
