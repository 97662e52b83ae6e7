"""GPT-2 loaded into the lab's own model, against ``transformers``' GPT2LMHeadModel.

Layouts: ``save_pretrained``'s (``transformer.`` prefix), the hub's own file
(no prefix), and older files carrying ``attn.bias`` / ``attn.masked_bias``
buffers (and a stored ``lm_head.weight``); once more at GPT-2 small's real
shape for the logits.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench.hf_factory import hf_config, save_family
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
from tui_lab.core.pretrained.build import build_pretrained
from tui_lab.core.pretrained.files import open_tensors, read_config


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    folder = tmp_path_factory.mktemp("gpt2")
    return folder, save_family(folder, "gpt2", tokenizer=False)


@pytest.fixture(scope="module")
def loaded(saved):
    return load_lab(saved[0])


def test_logits(saved, loaded) -> None:
    assert_logits_match(saved[1], loaded[1], prompt(length=40))


def test_attention(saved, loaded) -> None:
    assert_attention_matches(saved[1], loaded[1], prompt(length=12))


def test_parameter_count_tied_head_once(saved, loaded) -> None:
    config, model = loaded
    assert config.tie_embeddings and model.lm_head.weight is model.tgt_embed.weight
    assert_parameter_count_matches(saved[1], config)


def test_greedy_32_tokens_with_the_kv_cache(saved, loaded) -> None:
    assert_greedy_matches(saved[1], loaded[1], prompt())


def test_settings_read_from_config(loaded) -> None:
    config = loaded[0]
    assert (config.positional, config.activation, config.d_ff) == ("learned", "gelu_tanh", 128)
    assert not config.scale_embeddings and config.norm_kind == "layernorm"


def test_weights_are_the_files_tensors_not_copies(saved) -> None:
    tensors = open_tensors(saved[0])
    _, model = build_pretrained(read_config(saved[0]), tensors)
    c_attn = tensors["transformer.h.0.attn.c_attn.weight"]  # Conv1D (in, out): q | k | v
    attn = model.decoder.layers[0].self_attn
    for j, w in enumerate((attn.w_q.weight, attn.w_k.weight, attn.w_v.weight)):
        assert w.data_ptr() == c_attn[:, j * 32].data_ptr()  # a view into the mapped file
    # The tied (vocab, d) head is the one copy: re-laid for decoding (test_layout.py).
    wte = tensors["transformer.wte.weight"]
    assert model.tgt_embed.weight.data_ptr() != wte.data_ptr()
    assert torch.equal(model.tgt_embed.weight, wte)


def hub_layout(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The hub's gpt2 file: no ``transformer.`` prefix, mask buffers, the head stored too."""
    out = without_prefix("transformer.")(state)
    n = 64
    for i in range(2):
        out[f"h.{i}.attn.bias"] = torch.tril(torch.ones(n, n)).view(1, 1, n, n)
        out[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    out["lm_head.weight"] = out["wte.weight"].clone()
    return out


@pytest.mark.parametrize(
    "layout",
    [
        pytest.param(without_prefix("transformer."), id="no-prefix"),
        pytest.param(hub_layout, id="hub-with-mask-buffers"),
        pytest.param(lambda s: {**s, **{f"transformer.h.{i}.attn.bias": torch.ones(1, 1, 64, 64) for i in range(2)}}, id="prefix-with-buffers"),
    ],
)
def test_key_layouts(saved, tmp_path: Path, layout) -> None:
    folder = rewrite(saved[0], tmp_path / "m", tensors=layout)
    config, model = load_lab(folder)
    assert_logits_match(saved[1], model, prompt(length=16))
    assert_parameter_count_matches(saved[1], config)


def test_n_inner_and_epsilon_are_read(tmp_path: Path) -> None:
    ref = save_family(tmp_path, "gpt2", tokenizer=False, n_inner=48, layer_norm_epsilon=1e-3)
    config, model = load_lab(tmp_path)
    assert config.d_ff == 48 and config.norm_eps == 1e-3
    assert_logits_match(ref, model, prompt(length=16))


@pytest.fixture(scope="module")
def gpt2_small():
    """GPT-2 small's real shape (124 M parameters), random weights, kept in memory.

    Built on the meta device and filled once (N(0, 0.02), norms' scales near 1):
    transformers' own initialisation of 124 M weights would take seconds.
    """
    import transformers

    config = hf_config("gpt2", n_embd=768, n_layer=12, n_head=12, vocab_size=50257, n_positions=1024)
    with torch.device("meta"):
        ref = transformers.AutoModelForCausalLM.from_config(config)
    ref = ref.to_empty(device="cpu")
    ref.tie_weights()
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in ref.named_parameters():
            scale = name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight"))
            p.normal_(1.0 if scale else 0.0, 0.02, generator=gen)
    ref.eval()
    return ref, build_pretrained(ref.config.to_dict(), ref.state_dict())


def test_gpt2_small_real_shape_logits(gpt2_small) -> None:
    ref, (config, model) = gpt2_small
    assert (config.d_model, config.n_decoder_layers, config.n_heads, config.max_len) == (768, 12, 12, 1024)
    assert_logits_match(ref, model, prompt(vocab=50257, length=8, batch=1))
    assert_parameter_count_matches(ref, config)
