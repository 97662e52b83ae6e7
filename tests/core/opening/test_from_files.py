"""``open_files``: a real model from files, through the lab's own decode, equal to ``transformers``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bench.hf_factory import save_family
from tests.hf_fixtures.hf_cache import write_cache
from tui_lab.core.decoding.decode import DecodeInputError, generate
from tui_lab.core.opening.from_files import open_files
from tui_lab.core.pretrained.errors import PretrainedError

FAMILIES = ("gpt2", "gpt_neox", "llama", "gpt_neo")
PROMPT = "The cat sat on the mat. The dog"


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, object]]:
    """One save_pretrained folder per family, with its reference model."""
    out = {}
    for family in FAMILIES:
        folder = tmp_path_factory.mktemp(family)
        out[family] = (folder, save_family(folder, family))
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_a_greedy_continuation_through_the_tokenizer_equals_generate(saved, family) -> None:
    """The whole path (tokenizer, prompt, KV cache, argmax, end of text) against the reference."""
    folder, ref = saved[family]
    loaded = open_files(str(folder))
    result = generate(loaded.model, loaded.task, PROMPT, max_new_tokens=32, capture=False)
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(folder)(PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        expected = ref.generate(ids, do_sample=False, max_new_tokens=32)[0, ids.size(1):]
    assert result.tokens == expected.tolist()
    assert result.stopped == ("eos" if len(result.tokens) < 32 else "max_len")
    assert all(0.0 < s.prob <= 1.0 and s.top[0][1] >= s.prob - 1e-6 for s in result.steps)


def test_a_continuation_stops_at_the_models_own_end_of_text(saved, tmp_path) -> None:
    """A model whose end-of-text id is a token it greedily emits after others: both stop there."""
    folder, ref = saved["gpt_neox"]
    loaded = open_files(str(folder))
    first = generate(loaded.model, loaded.task, PROMPT, max_new_tokens=16, capture=False).tokens
    at = next(i for i in range(1, len(first)) if first[i] not in first[:i])
    stop = first[at]
    save_family(tmp_path, "gpt_neox", eos_token_id=stop)  # same seed: the same weights
    loaded = open_files(str(tmp_path))
    result = generate(loaded.model, loaded.task, PROMPT, max_new_tokens=32, capture=False)
    ids = torch.tensor([loaded.task.vocab.encode(PROMPT)])
    with torch.no_grad():
        expected = ref.generate(ids, do_sample=False, max_new_tokens=32, eos_token_id=stop)
    assert result.tokens == expected[0, ids.size(1):].tolist() == first[: at + 1]
    assert result.stopped == "eos"


@pytest.mark.parametrize("family", FAMILIES)
def test_the_card_says_what_was_read_and_counts_like_the_reference(saved, family) -> None:
    folder, ref = saved[family]
    card = open_files(str(folder)).card
    assert card.family == family and card.origin == "folder"
    assert card.n_params == ref.num_parameters()
    assert card.context == 64 and card.vocab_size == 300
    assert card.files["weights"] == ["model.safetensors"]
    assert "tokenizer.json" in card.files["tokenizer"] and "config.json" in card.files["config"]


def test_a_cached_name_opens_offline(saved, tmp_path, monkeypatch, no_network) -> None:
    folder, ref = saved["gpt2"]
    write_cache(tmp_path / "hub", "openai-community/gpt2", folder, commit="c" * 40)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    loaded = open_files("openai-community/gpt2")
    assert loaded.card.origin == "cache" and loaded.card.commit == "c" * 40
    assert ("from", "the local Hugging Face cache @ cccccccccccc") in loaded.card.rows()
    ids = torch.tensor([loaded.task.vocab.encode(PROMPT)])
    with torch.no_grad():
        assert torch.allclose(loaded.model(ids), ref(ids).logits, atol=1e-4)
    assert no_network == []


def test_a_prompt_over_the_context_is_refused_in_one_line(saved) -> None:
    loaded = open_files(str(saved["gpt2"][0]))
    with pytest.raises(DecodeInputError, match=r"context is 64") as err:
        generate(loaded.model, loaded.task, "the cat " * 80, max_new_tokens=2)
    assert "\n" not in str(err.value)


def test_half_precision_weights_are_widened_and_said(saved, tmp_path) -> None:
    folder, ref = saved["llama"]
    ref.half().save_pretrained(tmp_path)
    ref.float()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((folder / name).read_bytes())
    loaded = open_files(str(tmp_path))
    assert all(p.dtype == torch.float32 for p in loaded.model.parameters())
    assert any("float16" in n and "float32" in n for n in loaded.notes)
    assert loaded.card.stored_dtype == "float16"


def test_custom_code_is_named_and_never_run(saved, tmp_path) -> None:
    folder, _ = saved["gpt2"]
    for path in folder.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    config = json.loads((tmp_path / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "evil.Model"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "evil.py").write_text("raise SystemExit('custom code ran')\n")
    loaded = open_files(str(tmp_path))
    assert any("auto_map" in n and "not run" in n for n in loaded.notes)


def test_a_tokenizer_of_another_model_is_one_line(saved, tmp_path) -> None:
    folder, _ = saved["gpt2"]
    save_family(tmp_path, "gpt2", vocab_size=200, tokenizer=False)
    (tmp_path / "tokenizer.json").write_bytes((folder / "tokenizer.json").read_bytes())
    with pytest.raises(PretrainedError, match=r"300 tokens but the weights hold 200") as err:
        open_files(str(tmp_path))
    assert "\n" not in str(err.value)
