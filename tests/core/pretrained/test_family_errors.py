"""What the family readers refuse, each as one ``PretrainedError`` line naming
the file and the key or tensor at fault."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.hf_factory import save_family
from tests.core.pretrained.family_reference import load_lab, rewrite
from tui_lab.core.pretrained.build import build_pretrained
from tui_lab.core.pretrained.errors import PretrainedError
from tui_lab.core.pretrained.families import FAMILIES, family_for


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("gpt2")
    save_family(folder, "gpt2", tokenizer=False)
    return folder


def refusal(excinfo: pytest.ExceptionInfo[PretrainedError]) -> str:
    text = str(excinfo.value)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_the_families() -> None:
    assert sorted(FAMILIES) == [
        "bert", "distilbert", "gemma", "gemma2", "gemma3_text", "gpt2", "gpt_neo", "gpt_neox", "llama", "marian",
        "mistral", "olmo2", "phi3", "qwen2", "qwen3", "roberta",
    ]


def test_unknown_model_type_names_it_and_the_four() -> None:
    with pytest.raises(PretrainedError) as info:
        family_for({"model_type": "t5"})
    text = refusal(info)
    assert "config.json" in text and "'t5'" in text
    assert all(name in text for name in ("gpt2", "gpt_neox", "llama", "gpt_neo", "marian"))
    with pytest.raises(PretrainedError, match="model_type is missing"):
        build_pretrained({}, {})


def test_missing_tensor_names_it_and_its_file(gpt2_folder: Path, tmp_path: Path) -> None:
    drop = "transformer.h.1.mlp.c_fc.bias"
    folder = rewrite(gpt2_folder, tmp_path / "m", tensors=lambda s: {k: v for k, v in s.items() if k != drop})
    with pytest.raises(PretrainedError) as info:
        load_lab(folder)
    text = refusal(info)
    assert drop in text and "missing" in text and str(folder / "model.safetensors") in text


def test_wrong_shape_names_the_tensor_and_both_shapes(gpt2_folder: Path, tmp_path: Path) -> None:
    name = "transformer.h.0.attn.c_proj.weight"
    folder = rewrite(gpt2_folder, tmp_path / "m", tensors=lambda s: {**s, name: s[name][:16]})
    with pytest.raises(PretrainedError) as info:
        load_lab(folder)
    text = refusal(info)
    assert name in text and "[16, 32]" in text and "[32, 32]" in text
    assert str(folder / "model.safetensors") in text


def test_a_head_that_does_not_match_the_vocabulary(gpt2_folder: Path, tmp_path: Path) -> None:
    folder = rewrite(gpt2_folder, tmp_path / "m", config=lambda c: {**c, "vocab_size": 299})
    with pytest.raises(PretrainedError, match=r"transformer.wte.weight has shape \[300, 32\]"):
        load_lab(folder)


LLAMA = {
    "model_type": "llama", "hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 2,
    "intermediate_size": 64, "max_position_embeddings": 64, "vocab_size": 300,
}


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"rope_scaling": {"rope_type": "yarn", "factor": 2.0}}, "rope_scaling type 'yarn' is not supported"),
        ({"rope_scaling": {"type": "dynamic", "factor": 2.0}}, "rope_scaling type 'dynamic' is not supported"),
        ({"rope_parameters": {"rope_type": "longrope", "rope_theta": 5e5}},
         "rope_parameters type 'longrope' is not supported (the lab implements default, linear, llama3)"),
        ({"rope_parameters": {"rope_type": "linear", "rope_theta": 5e5}}, "factor is missing"),
        ({"head_dim": 0}, "model.head_dim: must be > 0"),
        ({"hidden_act": "gelu_10"}, "hidden_act 'gelu_10' is not supported"),
        ({"hidden_size": None}, "hidden_size is missing"),
        ({"num_hidden_layers": "2"}, "num_hidden_layers is '2', expected a whole number"),
        ({"num_key_value_heads": 3}, "n_kv_heads"),
    ],
)
def test_unsupported_or_broken_settings_name_the_key(change, words) -> None:
    with pytest.raises(PretrainedError) as info:
        build_pretrained({**LLAMA, **change}, {})
    text = refusal(info)
    assert text.startswith("config.json: ") and words in text


def test_other_families_unsupported_settings() -> None:
    gpt2 = {"model_type": "gpt2", "n_embd": 32, "n_head": 4, "n_layer": 2, "n_positions": 64, "vocab_size": 300}
    with pytest.raises(PretrainedError, match="scale_attn_by_inverse_layer_idx true is not supported"):
        build_pretrained({**gpt2, "scale_attn_by_inverse_layer_idx": True}, {})
    neo = {"model_type": "gpt_neo", "hidden_size": 32, "num_heads": 4, "num_layers": 3,
           "max_position_embeddings": 64, "vocab_size": 300, "attention_types": [[["global", "local"], 1]]}
    with pytest.raises(PretrainedError, match="attention_types gives 2 layer kinds for num_layers=3"):
        build_pretrained(neo, {})
    with pytest.raises(PretrainedError, match="'sparse'"):
        build_pretrained({**neo, "attention_types": [[["global", "sparse", "local"], 1]]}, {})


def test_an_auto_map_config_of_a_known_family_still_builds(gpt2_folder: Path, tmp_path: Path) -> None:
    # Custom code is never run: the family is read from model_type alone.
    folder = rewrite(gpt2_folder, tmp_path / "m", config=lambda c: {**c, "auto_map": {"AutoModel": "x.Y"}})
    config, _ = load_lab(folder)
    assert json.loads((folder / "config.json").read_text())["auto_map"] and config.d_model == 32
